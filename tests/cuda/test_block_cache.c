/* The caching allocator's bookkeeping (tensor/block_cache.c), checked on the CPU with fake
 * streams: each stream counts work queued and work completed, an event completes when its stream
 * has completed the work queued before it was recorded, and malloc stands in for cudaMalloc.
 * These are the rules the CUDA backend relies on, tested without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "rgtest.h"
#include "tensor/block_cache.h"

#define STREAMS RG_BLOCK_CACHE_MAX_STREAMS

typedef struct {
    int stream;
    int64_t mark; /* the stream's queued count when recorded */
} fake_event;

typedef struct {
    int64_t queued[STREAMS], completed[STREAMS];
    size_t budget, used; /* budget 0: unlimited */
    int sys_allocs, sys_frees, syncs, live_events;
    int waits, wait_stream, wait_on; /* stream_wait calls; the last one's waiter and signaller */
    int64_t wait_mark;
} fake;

static void *f_alloc(void *user, size_t bytes, int stream) {
    fake *f = user;
    if (f->budget && f->used + bytes > f->budget) return NULL;
    size_t *p = malloc(sizeof(size_t) * 2 + bytes); /* the size rides in front, for f_free */
    cr_assert(p);
    p[0] = bytes;
    f->used += bytes, f->sys_allocs++;
    return p + 2;
}

static void f_free(void *user, void *p, int stream) {
    fake *f = user;
    size_t *h = (size_t *)p - 2;
    f->used -= h[0], f->sys_frees++;
    free(h);
}

static void *f_event_new(void *user) {
    ((fake *)user)->live_events++;
    return calloc(1, sizeof(fake_event));
}

static void f_event_free(void *user, void *ev) {
    ((fake *)user)->live_events--;
    free(ev);
}

static void f_record(void *user, void *ev, int stream) {
    fake_event *e = ev;
    e->stream = stream, e->mark = ((fake *)user)->queued[stream];
}

static bool f_done(void *user, void *ev) {
    fake_event *e = ev;
    return ((fake *)user)->completed[e->stream] >= e->mark;
}

static void f_sync(void *user, void *ev) {
    fake *f = user;
    fake_event *e = ev;
    if (f->completed[e->stream] < e->mark) f->completed[e->stream] = e->mark; /* host waited */
    f->syncs++;
}

static void f_wait(void *user, int stream, void *ev) {
    fake *f = user;
    fake_event *e = ev;
    f->waits++, f->wait_stream = stream, f->wait_on = e->stream, f->wait_mark = e->mark;
}

static const rg_block_cache_ops fake_ops = {f_alloc,  f_free, f_event_new, f_event_free,
                                            f_record, f_done, f_sync,      f_wait};

Test(cuda_block_cache, sizes_round_up_to_classes_with_at_most_25_percent_slack) {
    size_t prev = 0;
    for (size_t b = 1; b < ((size_t)1 << 24); b += 1 + b / 7) {
        size_t r = rg_block_cache_round(b);
        cr_assert_geq(r, b, "class of %zu bytes is %zu", b, r);
        cr_assert(r <= 512 || (double)r <= 1.25 * (double)b, "class of %zu bytes is %zu", b, r);
        cr_assert_geq(r, prev, "classes grow with the request");
        cr_assert_eq(rg_block_cache_round(r), r, "a class size is its own class");
        prev = r;
    }
    cr_assert_eq(rg_block_cache_round(0), 512);
    cr_assert_eq(rg_block_cache_round(1025), 1280);
    cr_assert_eq(rg_block_cache_round(RG_BLOCK_CACHE_MAX_BYTES), RG_BLOCK_CACHE_MAX_BYTES);
    cr_assert_eq(rg_block_cache_round(RG_BLOCK_CACHE_MAX_BYTES + 1), 0);
}

Test(cuda_block_cache, freed_block_is_reused_at_once_on_the_same_stream) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    void *p = rg_block_cache_get(bc, 1000, 0);
    memset(p, 1, 1024); /* the whole class is usable */
    rg_block_cache_put(bc, p);
    void *q = rg_block_cache_get(bc, 900, 0); /* same class: 1024 bytes */
    cr_assert_eq(q, p, "stream order makes immediate reuse safe");
    rg_mem_stats s = rg_block_cache_stats(bc);
    cr_assert_eq(s.sys_allocs, 1);
    cr_assert_eq(s.reuses, 1);
    cr_assert_eq(s.in_use, 1024);
    cr_assert_eq(f.waits + f.syncs + f.live_events, 0, "no events on the same-stream path");
    rg_block_cache_put(bc, q);
    rg_block_cache_free(bc);
    cr_assert_eq(f.sys_frees, 1);
}

Test(cuda_block_cache, block_used_by_another_stream_waits_for_that_work) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    void *p = rg_block_cache_get(bc, 4096, 0);
    f.queued[1] = 5; /* the comm stream has work queued that reads p */
    rg_block_cache_use(bc, p, 1);
    rg_block_cache_put(bc, p);
    void *q = rg_block_cache_get(bc, 4096, 0);
    cr_assert_neq(q, p, "p is pending until stream 1 completes its work");
    cr_assert_eq(rg_block_cache_stats(bc).sys_allocs, 2);
    cr_assert_eq(f.syncs, 0, "the host never waited");
    f.completed[1] = 5;
    void *r = rg_block_cache_get(bc, 4096, 0);
    cr_assert_eq(r, p, "once the event completed, p is reused");
    cr_assert_eq(rg_block_cache_stats(bc).sys_allocs, 2);
    rg_block_cache_put(bc, q);
    rg_block_cache_put(bc, r);
    rg_block_cache_free(bc);
    cr_assert_eq(f.live_events, 0, "events are destroyed with the cache");
}

Test(cuda_block_cache, other_stream_takes_a_cached_block_behind_a_device_wait) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    void *p = rg_block_cache_get(bc, 4096, 0);
    f.queued[0] = 3; /* compute work that used p */
    rg_block_cache_put(bc, p);
    void *q = rg_block_cache_get(bc, 4096, 1);
    cr_assert_eq(q, p, "a cached block moves to the other stream");
    cr_assert_eq(f.waits, 1);
    cr_assert_eq(f.wait_stream, 1, "the new owner waits...");
    cr_assert_eq(f.wait_on, 0, "...for the old owner...");
    cr_assert_eq(f.wait_mark, 3, "...up to its last queued work");
    cr_assert_eq(f.syncs, 0, "on the device, not the host");
    rg_block_cache_put(bc, q);
    cr_assert_eq(rg_block_cache_get(bc, 4096, 1), p, "now owned by stream 1: no further wait");
    cr_assert_eq(f.waits, 1);
    rg_block_cache_put(bc, p);
    rg_block_cache_free(bc);
}

Test(cuda_block_cache, memory_stays_flat_across_steps) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    size_t sizes[] = {4, 512, 513, 10000, 10000, 1 << 20, 3 << 20, 77};
    int n = sizeof sizes / sizeof sizes[0];
    size_t total = 0;
    for (int i = 0; i < n; i++) total += rg_block_cache_round(sizes[i]);
    void *ptr[8];
    for (int step = 0; step < 100; step++) {
        for (int i = 0; i < n; i++) ptr[i] = rg_block_cache_get(bc, sizes[i], 0);
        rg_mem_stats s = rg_block_cache_stats(bc);
        cr_assert_eq(s.in_use, total, "step %d", step);
        cr_assert_eq(s.cached, 0, "step %d: every cached block is in use", step);
        for (int i = n - 1; i >= 0; i--) rg_block_cache_put(bc, ptr[i]);
    }
    rg_mem_stats s = rg_block_cache_stats(bc);
    cr_assert_eq(s.sys_allocs, (uint64_t)n, "only the first step reached the system");
    cr_assert_eq(s.reuses, (uint64_t)(99 * n));
    cr_assert_eq(s.in_use, 0);
    cr_assert_eq(s.cached, total);
    cr_assert_eq(s.peak_in_use, total);
    rg_block_cache_trim(bc);
    cr_assert_eq(rg_block_cache_stats(bc).cached, 0);
    cr_assert_eq(f.sys_frees, n);
    cr_assert_eq(f.used, 0);
    rg_block_cache_free(bc);
}

Test(cuda_block_cache, caching_off_sends_every_call_to_the_system) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, false);
    for (int i = 0; i < 10; i++) rg_block_cache_put(bc, rg_block_cache_get(bc, 4096, 0));
    cr_assert_eq(f.sys_allocs, 10);
    cr_assert_eq(f.sys_frees, 10);
    void *p = rg_block_cache_get(bc, 4096, 0);
    f.queued[1] = 2;
    rg_block_cache_use(bc, p, 1);
    rg_block_cache_put(bc, p);
    cr_assert_eq(f.waits, 1, "a stream-ordered free first waits for the other stream");
    cr_assert_eq(f.wait_stream, 0);
    cr_assert_eq(f.wait_on, 1);
    rg_mem_stats s = rg_block_cache_stats(bc);
    cr_assert_eq(s.cached, 0);
    cr_assert_eq(s.in_use, 0);
    cr_assert_eq(s.reuses, 0);
    rg_block_cache_free(bc);
    cr_assert_eq(f.used, 0);
}

Test(cuda_block_cache, out_of_memory_empties_the_cache_then_reports_null) {
    fake f = {.budget = 12 * 1024};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    rg_block_cache_put(bc, rg_block_cache_get(bc, 4096, 0)); /* 4 KiB cached */
    void *big = rg_block_cache_get(bc, 8192 + 1, 0);         /* class 10 KiB: needs the 4 KiB */
    cr_assert(big, "the cached block was returned to make room");
    cr_assert_eq(f.sys_frees, 1);
    cr_assert_eq(rg_block_cache_stats(bc).cached, 0);
    void *more = rg_block_cache_get(bc, 8192, 0);
    cr_assert_null(more, "truly out of memory: NULL, not a crash");
    cr_assert_eq(rg_block_cache_stats(bc).in_use, 10 * 1024, "a failed request changes nothing");
    cr_assert_null(rg_block_cache_get(bc, RG_BLOCK_CACHE_MAX_BYTES + 1, 0));
    rg_block_cache_put(bc, big);
    rg_block_cache_free(bc);
}

Test(cuda_block_cache, trim_waits_for_pending_blocks) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    void *p = rg_block_cache_get(bc, 4096, 0);
    f.queued[2] = 7;
    rg_block_cache_use(bc, p, 2);
    rg_block_cache_put(bc, p);
    cr_assert_eq(rg_block_cache_stats(bc).cached, 4096, "pending blocks count as cached");
    rg_block_cache_trim(bc);
    cr_assert_eq(f.syncs, 1, "trim waited on the host for stream 2");
    cr_assert_eq(f.sys_frees, 1);
    cr_assert_eq(rg_block_cache_stats(bc).cached, 0);
    rg_block_cache_free(bc);
}

Test(cuda_block_cache, events_are_recycled) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    for (int i = 0; i < 50; i++) {
        void *p = rg_block_cache_get(bc, 4096, 0);
        f.queued[1]++;
        rg_block_cache_use(bc, p, 1);
        rg_block_cache_put(bc, p);
        f.completed[1] = f.queued[1];
    }
    cr_assert_leq(f.live_events, 2, "%d events alive after 50 cycles", f.live_events);
    cr_assert_eq(rg_block_cache_stats(bc).sys_allocs, 1);
    rg_block_cache_free(bc);
    cr_assert_eq(f.live_events, 0);
}

Test(cuda_block_cache, freeing_a_pointer_it_did_not_hand_out_is_misuse, .signal = SIGABRT) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    static char not_a_block[64];
    rg_block_cache_put(bc, not_a_block);
}

Test(cuda_block_cache, many_live_blocks_are_all_found_again) {
    fake f = {0};
    rg_block_cache *bc = rg_block_cache_new(&fake_ops, &f, true);
    enum { N = 2000 }; /* past several map resizes */
    void **p = malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) p[i] = rg_block_cache_get(bc, 600 + (size_t)i, i % 2);
    for (int i = 0; i < N; i += 2) rg_block_cache_put(bc, p[i]);
    for (int i = 1; i < N; i += 2) rg_block_cache_use(bc, p[i], 0);
    for (int i = 1; i < N; i += 2) rg_block_cache_put(bc, p[i]);
    rg_mem_stats s = rg_block_cache_stats(bc);
    cr_assert_eq(s.in_use, 0);
    cr_assert_eq(s.sys_allocs, N);
    free(p);
    rg_block_cache_free(bc);
    cr_assert_eq(f.used, 0, "every block went back to the system");
}
