/* trace.c — the process-wide trace recorder behind ringgrad/trace.h, and the Chrome-trace JSON of
 * this process's events (dist/timeline.c gathers every rank's to one file).
 *
 * Recording is lock-free: each thread owns a buffer (a list of blocks of BLOCK_EVENTS events),
 * appends to it alone, and publishes how many events are complete with one release-store. The
 * writer, on another thread, reads up to that count with an acquire-load, so it never sees half
 * an event. Registering a thread and allocating a new block are the only allocations: one per
 * BLOCK_EVENTS events.
 *
 * The file is the Trace Event Format (the JSON that chrome://tracing and Perfetto open): an array
 * of events, "X" for a complete interval on a thread, "b"/"e" for an async interval, "M" for the
 * names of rows. pid = rank and tid = thread, so each rank is a group of rows. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringgrad/trace.h"
#include "core/strbuf.h"

#define BLOCK_EVENTS 1024
#define MAX_EVENTS (1 << 20) /* per thread; later events are counted as dropped */
#define NAME_LEN 48
#define THREAD_NAME_LEN 32
#define MAX_DEPTH 32

typedef struct {
    int64_t t0, t1;
    uint64_t id; /* async only */
    const char *cat;
    rg_trace_arg args[RG_TRACE_MAX_ARGS];
    int nargs;
    bool async;
    char name[NAME_LEN];
} tl_event;

typedef struct tl_block {
    tl_event ev[BLOCK_EVENTS];
    struct tl_block *next;
} tl_block;

typedef struct tl_thread {
    int tid;
    char name[THREAD_NAME_LEN]; /* under tl.mu */
    tl_block *head, *tail;      /* the owner appends, the writer reads */
    _Atomic int64_t n;          /* events complete and visible */
    _Atomic int64_t dropped;
    struct tl_thread *next;
} tl_thread;

static struct {
    pthread_mutex_t mu; /* the list of threads and their names */
    tl_thread *threads;
    int ntids;
    _Atomic bool on;
    _Atomic bool ops; /* rg_trace_set_ops */
    _Atomic int64_t t0;
} tl = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local tl_thread *self;

/* begin/end frames of this thread. */
static _Thread_local struct {
    int depth;
    struct {
        int64_t t0;
        const char *cat;
        char name[NAME_LEN];
    } f[MAX_DEPTH];
} frames;

/* ---- recording ---- */

int64_t rg_trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool rg_trace_enabled(void) {
    return atomic_load_explicit(&tl.on, memory_order_relaxed);
}

void rg_trace_start(void) {
    atomic_store(&tl.t0, rg_trace_now());
    atomic_store(&tl.on, true);
}

void rg_trace_stop(void) {
    atomic_store(&tl.on, false);
}

void rg_trace_set_ops(bool on) {
    atomic_store(&tl.ops, on);
}

bool rg_trace_ops_enabled(void) {
    return rg_trace_enabled() && atomic_load_explicit(&tl.ops, memory_order_relaxed);
}

static void copy_name(char *dst, size_t cap, const char *src) {
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

static tl_thread *this_thread(void) {
    if (self) return self;
    tl_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_lock(&tl.mu);
    t->tid = ++tl.ntids;
    snprintf(t->name, sizeof t->name, "thread %d", t->tid);
    t->next = tl.threads;
    tl.threads = t;
    pthread_mutex_unlock(&tl.mu);
    return self = t;
}

void rg_trace_name_thread(const char *name) {
    tl_thread *t = this_thread();
    if (!t) return;
    pthread_mutex_lock(&tl.mu);
    copy_name(t->name, sizeof t->name, name);
    pthread_mutex_unlock(&tl.mu);
}

/* Appends an event to this thread's buffer and publishes it. */
static void append(const tl_event *e) {
    tl_thread *t = this_thread();
    if (!t) return;
    int64_t n = atomic_load_explicit(&t->n, memory_order_relaxed); /* we are the only writer */
    if (n >= MAX_EVENTS) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        return;
    }
    if (n % BLOCK_EVENTS == 0) { /* the last block is full (or there is none): one more */
        tl_block *b = calloc(1, sizeof *b);
        if (!b) {
            atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
            return;
        }
        if (n == 0)
            t->head = b;
        else
            t->tail->next = b;
        t->tail = b;
    }
    t->tail->ev[n % BLOCK_EVENTS] = *e;
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
}

static void record(bool async, const char *name, const char *cat, uint64_t id, int64_t t0,
                   int64_t t1, int nargs, const rg_trace_arg *args) {
    tl_event e = {.t0 = t0, .t1 = t1, .id = id, .cat = cat ? cat : "", .async = async};
    e.nargs = nargs < RG_TRACE_MAX_ARGS ? nargs : RG_TRACE_MAX_ARGS;
    for (int i = 0; i < e.nargs; i++) e.args[i] = args[i];
    copy_name(e.name, sizeof e.name, name);
    append(&e);
}

void rg_trace_complete(const char *name, const char *cat, int64_t t0, int64_t t1, int nargs,
                       const rg_trace_arg *args) {
    if (rg_trace_enabled()) record(false, name, cat, 0, t0, t1, nargs, args);
}

void rg_trace_async(const char *name, const char *cat, uint64_t id, int64_t t0, int64_t t1,
                    int nargs, const rg_trace_arg *args) {
    if (rg_trace_enabled()) record(true, name, cat, id, t0, t1, nargs, args);
}

/* Frames are kept even while recording is off, so that begin and end always pair up. */
void rg_trace_begin(const char *name, const char *cat) {
    RG_CHECK(frames.depth < MAX_DEPTH, "rg_trace_begin(\"%s\"): nested more than %d deep", name,
             MAX_DEPTH);
    int d = frames.depth++;
    if (!rg_trace_enabled()) {
        frames.f[d].t0 = -1;
        return;
    }
    frames.f[d].cat = cat;
    copy_name(frames.f[d].name, NAME_LEN, name);
    frames.f[d].t0 = rg_trace_now();
}

void rg_trace_end(void) {
    RG_CHECK(frames.depth > 0, "rg_trace_end without rg_trace_begin");
    int d = --frames.depth;
    if (frames.f[d].t0 >= 0 && rg_trace_enabled())
        record(false, frames.f[d].name, frames.f[d].cat, 0, frames.f[d].t0, rg_trace_now(), 0,
               NULL);
}

void rg_trace_reset(void) {
    pthread_mutex_lock(&tl.mu);
    for (tl_thread *t = tl.threads; t; t = t->next) {
        for (tl_block *b = t->head, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        t->head = t->tail = NULL;
        atomic_store(&t->n, 0);
        atomic_store(&t->dropped, 0);
    }
    pthread_mutex_unlock(&tl.mu);
}

/* ---- the JSON text of this rank's events ---- */

static double micros(int64_t t) {
    int64_t t0 = atomic_load(&tl.t0);
    return t > t0 ? (double)(t - t0) / 1000.0 : 0.0;
}

static void put_args(rg_strbuf *t, const tl_event *e) {
    if (!e->nargs) return;
    rg_strbuf_printf(t, ",\"args\":{");
    for (int i = 0; i < e->nargs; i++) {
        rg_strbuf_printf(t, "%s", i ? "," : "");
        rg_strbuf_json_string(t, e->args[i].name);
        rg_strbuf_printf(t, ":%lld", (long long)e->args[i].value);
    }
    rg_strbuf_printf(t, "}");
}

static void put_event(rg_strbuf *t, int pid, int tid, const tl_event *e) {
    rg_strbuf_printf(t, ",\n{\"pid\":%d,\"tid\":%d,\"name\":", pid, tid);
    rg_strbuf_json_string(t, e->name);
    rg_strbuf_printf(t, ",\"cat\":");
    rg_strbuf_json_string(t, e->cat);
    if (!e->async) {
        rg_strbuf_printf(t, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f", micros(e->t0),
            micros(e->t1) - micros(e->t0));
        put_args(t, e);
        rg_strbuf_printf(t, "}");
        return;
    }
    rg_strbuf_printf(t, ",\"ph\":\"b\",\"id\":\"0x%llx\",\"ts\":%.3f", (unsigned long long)e->id, micros(e->t0));
    put_args(t, e);
    rg_strbuf_printf(t, "},\n{\"pid\":%d,\"tid\":%d,\"name\":", pid, tid);
    rg_strbuf_json_string(t, e->name);
    rg_strbuf_printf(t, ",\"cat\":");
    rg_strbuf_json_string(t, e->cat);
    rg_strbuf_printf(t, ",\"ph\":\"e\",\"id\":\"0x%llx\",\"ts\":%.3f}", (unsigned long long)e->id,
        micros(e->t1));
}

static void put_thread(rg_strbuf *t, int pid, const tl_thread *th) {
    rg_strbuf_printf(t,
        ",\n{\"pid\":%d,\"tid\":%d,\"ph\":\"M\",\"name\":\"thread_name\",\"args\":{\"name\":", pid,
        th->tid);
    rg_strbuf_json_string(t, th->name);
    rg_strbuf_printf(t,
        "}},\n{\"pid\":%d,\"tid\":%d,\"ph\":\"M\",\"name\":\"thread_sort_index\","
        "\"args\":{\"sort_index\":%d}}",
        pid, th->tid, th->tid);
    int64_t n = atomic_load_explicit(&th->n, memory_order_acquire);
    const tl_block *b = th->head;
    for (int64_t i = 0; i < n; i++) {
        if (i && i % BLOCK_EVENTS == 0) b = b->next;
        put_event(t, pid, th->tid, &b->ev[i % BLOCK_EVENTS]);
    }
}

static rg_strbuf format_rank(int rank) {
    rg_strbuf t = {0};
    int64_t dropped = 0;
    pthread_mutex_lock(&tl.mu);
    for (tl_thread *th = tl.threads; th; th = th->next) dropped += atomic_load(&th->dropped);
    rg_strbuf_printf(&t,
        "{\"pid\":%d,\"ph\":\"M\",\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\","
        "\"dropped_events\":%lld}},\n",
        rank, rank, (long long)dropped);
    rg_strbuf_printf(&t,
        "{\"pid\":%d,\"ph\":\"M\",\"name\":\"process_sort_index\","
        "\"args\":{\"sort_index\":%d}}",
        rank, rank);
    for (tl_thread *th = tl.threads; th; th = th->next) put_thread(&t, rank, th);
    pthread_mutex_unlock(&tl.mu);
    return t;
}

char *rg_trace_format(int pid, size_t *len) {
    rg_strbuf t = format_rank(pid);
    if (t.oom) {
        free(t.s);
        *len = 0;
        return NULL;
    }
    if (!t.s) t.s = calloc(1, 1);
    *len = t.len;
    return t.s;
}
