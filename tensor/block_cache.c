/* block_cache.c — a stream-ordered caching allocator's bookkeeping (rules in block_cache.h).
 *
 * Data structures: per (stream, size class) a singly linked free list; one list of pending
 * blocks (freed, but still in use by another stream until their events complete); a chained hash
 * map from pointer to block header for the blocks handed out; and a stack of idle events. Block
 * headers live on the host, never in the device memory they describe. */
#include "tensor/block_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define MIN_LOG2 9      /* RG_BLOCK_CACHE_MIN_BYTES == 1 << MIN_LOG2 */
#define NUM_CLASSES 125 /* class 124 is 2^40 bytes */
#define MAP_MIN_BITS 8
_Static_assert(RG_BLOCK_CACHE_MIN_BYTES == (size_t)1 << MIN_LOG2, "minimum class");

typedef struct block {
    void *ptr;
    size_t size; /* the class size: what the system gave */
    int cls;
    int owner;                                /* the stream it was last handed out on */
    unsigned uses;                            /* bit s: stream s (not the owner) used it */
    void *events[RG_BLOCK_CACHE_MAX_STREAMS]; /* while pending: recorded on those streams */
    struct block *next;                       /* free list, pending list or map chain */
} block;

struct rg_block_cache {
    pthread_mutex_t lock;
    const rg_block_cache_ops *ops;
    void *user;
    bool caching;
    block *free[RG_BLOCK_CACHE_MAX_STREAMS][NUM_CLASSES];
    block *pending;
    block **map; /* handed-out blocks, chained by pointer hash */
    int map_bits;
    size_t map_count;
    void **events; /* idle events, a stack */
    size_t n_events, cap_events;
    rg_mem_stats stats;
};

/* ---- size classes: 512, 640, 768, 896, 1024, 1280, ... (four steps per power of two) ---- */

static int size_class(size_t bytes) {
    if (bytes <= RG_BLOCK_CACHE_MIN_BYTES) return 0;
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* bytes in (2^e, 2^(e+1)] */
    size_t base = (size_t)1 << e, step = base >> 2;
    int k = (int)((bytes - base + step - 1) / step); /* 1..4 steps above 2^e */
    return (e - MIN_LOG2) * 4 + k;
}

static size_t class_size(int c) {
    if (c == 0) return RG_BLOCK_CACHE_MIN_BYTES;
    int e = MIN_LOG2 + (c - 1) / 4, k = (c - 1) % 4 + 1;
    return ((size_t)1 << e) + ((size_t)1 << (e - 2)) * (size_t)k;
}

size_t rg_block_cache_round(size_t bytes) {
    if (bytes > RG_BLOCK_CACHE_MAX_BYTES) return 0;
    return class_size(size_class(bytes ? bytes : 1));
}

/* ---- the pointer map ---- */

static size_t map_slot(const rg_block_cache *bc, const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15); /* Fibonacci hashing */
    return (size_t)(h >> (64 - bc->map_bits));
}

/* Doubles the table when it is full; on failure keeps the old one (chains just grow longer). */
static void map_grow(rg_block_cache *bc) {
    size_t cap = (size_t)1 << bc->map_bits;
    if (bc->map && bc->map_count < cap) return;
    int bits = bc->map ? bc->map_bits + 1 : MAP_MIN_BITS;
    block **fresh = calloc((size_t)1 << bits, sizeof *fresh);
    if (!fresh) return;
    block **old = bc->map;
    bc->map = fresh, bc->map_bits = bits;
    for (size_t i = 0; old && i < cap; i++)
        for (block *b = old[i], *next; b; b = next) {
            next = b->next;
            size_t s = map_slot(bc, b->ptr);
            b->next = fresh[s], fresh[s] = b;
        }
    free(old);
}

static bool map_insert(rg_block_cache *bc, block *b) {
    map_grow(bc);
    if (!bc->map) return false;
    size_t s = map_slot(bc, b->ptr);
    b->next = bc->map[s], bc->map[s] = b;
    bc->map_count++;
    return true;
}

/* The handed-out block at p, unlinked from the map when `remove`; NULL if there is none. */
static block *map_find(rg_block_cache *bc, const void *p, bool remove) {
    if (!bc->map) return NULL;
    for (block **pp = &bc->map[map_slot(bc, p)]; *pp; pp = &(*pp)->next) {
        block *b = *pp;
        if (b->ptr != p) continue;
        if (remove) *pp = b->next, bc->map_count--;
        return b;
    }
    return NULL;
}

/* ---- events ---- */

static void *event_get(rg_block_cache *bc) {
    if (bc->n_events) return bc->events[--bc->n_events];
    void *ev = bc->ops->event_new(bc->user);
    RG_CHECK(ev, "caching allocator: could not create a device event");
    return ev;
}

static void event_put(rg_block_cache *bc, void *ev) {
    if (bc->n_events == bc->cap_events) {
        size_t cap = bc->cap_events ? 2 * bc->cap_events : 16;
        void **grown = realloc(bc->events, cap * sizeof *grown);
        if (!grown) return bc->ops->event_free(bc->user, ev);
        bc->events = grown, bc->cap_events = cap;
    }
    bc->events[bc->n_events++] = ev;
}

/* Makes `stream` wait on the device for the work queued so far on every stream in `mask`. */
static void wait_streams(rg_block_cache *bc, unsigned mask, int stream) {
    for (int s = 0; s < RG_BLOCK_CACHE_MAX_STREAMS; s++) {
        if (!(mask & (1u << s))) continue;
        void *ev = event_get(bc);
        bc->ops->event_record(bc->user, ev, s);
        bc->ops->stream_wait(bc->user, stream, ev);
        event_put(bc, ev); /* a queued wait is not affected by recording the event again */
    }
}

/* ---- free lists and pending blocks ---- */

static void push(block **list, block *b) {
    b->next = *list, *list = b;
}

static block *pop(block **list) {
    block *b = *list;
    if (b) *list = b->next;
    return b;
}

/* True when every event of b has completed; with `wait`, blocks the host until they have. */
static bool pending_done(rg_block_cache *bc, block *b, bool wait) {
    for (int s = 0; s < RG_BLOCK_CACHE_MAX_STREAMS; s++) {
        void *ev = b->events[s];
        if (!ev) continue;
        if (wait)
            bc->ops->event_sync(bc->user, ev);
        else if (!bc->ops->event_done(bc->user, ev))
            return false;
    }
    return true;
}

/* Moves the pending blocks whose events have completed to their owners' free lists. */
static void poll_pending(rg_block_cache *bc, bool wait) {
    block **pp = &bc->pending;
    while (*pp) {
        block *b = *pp;
        if (!pending_done(bc, b, wait)) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        for (int s = 0; s < RG_BLOCK_CACHE_MAX_STREAMS; s++)
            if (b->events[s]) event_put(bc, b->events[s]), b->events[s] = NULL;
        b->uses = 0;
        push(&bc->free[b->owner][b->cls], b);
    }
}

/* Waits for pending blocks, then returns every cached block to the system. */
static void release_cached(rg_block_cache *bc) {
    poll_pending(bc, true);
    for (int s = 0; s < RG_BLOCK_CACHE_MAX_STREAMS; s++)
        for (int c = 0; c < NUM_CLASSES; c++)
            for (block *b; (b = pop(&bc->free[s][c]));) {
                bc->ops->sys_free(bc->user, b->ptr, b->owner);
                free(b);
            }
    bc->stats.cached = 0;
}

/* A cached block of class c for `stream`: its own, a completed pending one, or another stream's
 * behind a device-side wait. NULL if the cache has none. */
static block *take_cached(rg_block_cache *bc, int c, int stream) {
    block *b = pop(&bc->free[stream][c]);
    if (!b && bc->pending) {
        poll_pending(bc, false);
        b = pop(&bc->free[stream][c]);
    }
    for (int s = 0; !b && s < RG_BLOCK_CACHE_MAX_STREAMS; s++) {
        if (s == stream || !(b = pop(&bc->free[s][c]))) continue;
        wait_streams(bc, 1u << s, stream); /* the old owner's last use comes first */
    }
    if (b) bc->stats.cached -= b->size, bc->stats.reuses++;
    return b;
}

/* A block straight from the system; when that fails, the cache is emptied and it tries again. */
static block *fresh_block(rg_block_cache *bc, int c, int stream) {
    size_t size = class_size(c);
    void *p = bc->ops->sys_alloc(bc->user, size, stream);
    if (!p) {
        release_cached(bc);
        p = bc->ops->sys_alloc(bc->user, size, stream);
    }
    if (!p) return NULL;
    block *b = calloc(1, sizeof *b);
    if (!b) return bc->ops->sys_free(bc->user, p, stream), NULL;
    b->ptr = p, b->size = size, b->cls = c;
    bc->stats.sys_allocs++;
    return b;
}

/* ---- the interface ---- */

rg_block_cache *rg_block_cache_new(const rg_block_cache_ops *ops, void *user, bool caching) {
    rg_block_cache *bc = calloc(1, sizeof *bc);
    if (!bc) return NULL;
    pthread_mutex_init(&bc->lock, NULL);
    bc->ops = ops, bc->user = user, bc->caching = caching;
    return bc;
}

void rg_block_cache_free(rg_block_cache *bc) {
    if (!bc) return;
    release_cached(bc);
    for (size_t i = 0; bc->map && i < ((size_t)1 << bc->map_bits); i++)
        for (block *b = bc->map[i], *next; b; b = next) next = b->next, free(b);
    for (size_t i = 0; i < bc->n_events; i++) bc->ops->event_free(bc->user, bc->events[i]);
    free(bc->events);
    free(bc->map);
    pthread_mutex_destroy(&bc->lock);
    free(bc);
}

static void check_stream(int stream) {
    RG_CHECK(stream >= 0 && stream < RG_BLOCK_CACHE_MAX_STREAMS,
             "caching allocator: stream id %d outside [0, %d)", stream, RG_BLOCK_CACHE_MAX_STREAMS);
}

void *rg_block_cache_get(rg_block_cache *bc, size_t bytes, int stream) {
    check_stream(stream);
    if (bytes > RG_BLOCK_CACHE_MAX_BYTES) return NULL;
    int c = size_class(bytes ? bytes : 1);
    pthread_mutex_lock(&bc->lock);
    block *b = bc->caching ? take_cached(bc, c, stream) : NULL;
    if (!b) b = fresh_block(bc, c, stream);
    if (b) b->owner = stream, b->uses = 0;
    if (b && !map_insert(bc, b)) { /* no host memory for the map: give the block back */
        push(&bc->free[stream][c], b);
        bc->stats.cached += b->size;
        b = NULL;
    }
    if (b) {
        bc->stats.in_use += b->size;
        if (bc->stats.in_use > bc->stats.peak_in_use) bc->stats.peak_in_use = bc->stats.in_use;
    }
    pthread_mutex_unlock(&bc->lock);
    return b ? b->ptr : NULL;
}

void rg_block_cache_put(rg_block_cache *bc, void *p) {
    if (!p) return;
    pthread_mutex_lock(&bc->lock);
    block *b = map_find(bc, p, true);
    RG_CHECK(b, "caching allocator: free of %p, which it did not hand out (or freed twice)", p);
    bc->stats.in_use -= b->size;
    if (!bc->caching) {
        wait_streams(bc, b->uses, b->owner); /* a stream-ordered free must follow every use */
        bc->ops->sys_free(bc->user, b->ptr, b->owner);
        free(b);
    } else if (!b->uses) {
        push(&bc->free[b->owner][b->cls], b);
        bc->stats.cached += b->size;
    } else {
        for (int s = 0; s < RG_BLOCK_CACHE_MAX_STREAMS; s++) {
            if (!(b->uses & (1u << s))) continue;
            b->events[s] = event_get(bc);
            bc->ops->event_record(bc->user, b->events[s], s);
        }
        push(&bc->pending, b);
        bc->stats.cached += b->size;
    }
    pthread_mutex_unlock(&bc->lock);
}

void rg_block_cache_use(rg_block_cache *bc, void *p, int stream) {
    check_stream(stream);
    pthread_mutex_lock(&bc->lock);
    block *b = map_find(bc, p, false);
    RG_CHECK(b, "caching allocator: %p is not a block it handed out", p);
    if (stream != b->owner) b->uses |= 1u << stream;
    pthread_mutex_unlock(&bc->lock);
}

void rg_block_cache_trim(rg_block_cache *bc) {
    pthread_mutex_lock(&bc->lock);
    release_cached(bc);
    pthread_mutex_unlock(&bc->lock);
}

rg_mem_stats rg_block_cache_stats(rg_block_cache *bc) {
    pthread_mutex_lock(&bc->lock);
    rg_mem_stats s = bc->stats;
    pthread_mutex_unlock(&bc->lock);
    return s;
}
