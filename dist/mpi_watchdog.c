/* mpi_watchdog.c — a thread that watches the mpi backend's blocking collectives.
 *
 * Why it exists: the join (join.c) proves that every rank reached a collective, and then the mpi
 * backend runs it with MPI's blocking call, which cannot time out. A rank that stops after the
 * join (a frozen process or host, a lost link; SIGSTOP in the test) left the others inside
 * MPI_Allreduce for good, with no stall report: dist.h's promise of a report after stall_seconds
 * and RG_ETIMEDOUT after stall_abort_seconds held only while ranks were late to the join. A
 * nonblocking collective polled with the join's timeout would keep the promise, but Open MPI's
 * doubled a small allreduce's latency on shared memory (docs/PERFORMANCE.md): the blocking calls
 * stay, and this thread watches them, as nccl_watchdog.c does the GPU's.
 *
 * Each blocking call is bracketed by rg_mpi_watch_begin and _end: a few plain stores on the
 * calling thread (no clock: the watchdog times a call from when it first sees it, so its times run
 * up to a period short). Four times a second the thread looks at every watched comm: a call in
 * flight for stall_seconds is reported (and again every stall_seconds); after
 * stall_abort_seconds it ends the job through rg_fatal_timeout (the fatal handler of rg_dist_init
 * calls MPI_Abort: exit 1), since the blocked thread can neither return an error nor be
 * interrupted. With the stall check off (stall_seconds < 0) or one rank, nothing is watched and
 * no thread runs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dist/comm_impl.h"
#include "ringgrad/timeline.h"

#define PERIOD_NS (250 * 1000 * 1000)

struct rg_mpi_watch {
    rg_comm *c;
    uint64_t calls; /* the calling thread's own: blocking calls begun */
    /* written by the calling thread; read by the watchdog */
    _Atomic uint64_t active; /* the call in flight (its number in `calls`); 0: none */
    _Atomic(const char *) call;
    _Atomic int64_t count;
    _Atomic uint64_t seq;
    /* the watchdog's own */
    uint64_t seen;               /* the call it last saw in flight */
    int64_t since, next_report;  /* when it first saw it; when to report it next */
    rg_mpi_watch *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static rg_mpi_watch *watches; /* under mu */
static pthread_t thread;
static bool running, stopping; /* under mu */

/* One look at w (mu held). */
static void check(rg_mpi_watch *w, int64_t now) {
    const uint64_t active = atomic_load_explicit(&w->active, memory_order_acquire);
    if (!active) return;
    const char *call = atomic_load_explicit(&w->call, memory_order_relaxed);
    const int64_t count = atomic_load_explicit(&w->count, memory_order_relaxed);
    const uint64_t seq = atomic_load_explicit(&w->seq, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&w->active, memory_order_relaxed) != active)
        return; /* it ended (and another began) meanwhile */
    const rg_stall_policy *p = &w->c->dist->stall;
    const int64_t warn = (int64_t)(p->warn_s * 1e9);
    if (w->seen != active) w->seen = active, w->since = now, w->next_report = now + warn;
    const double waited = (double)(now - w->since) * 1e-9;
    const bool give_up = p->abort_s > 0 && waited >= p->abort_s;
    if (now < w->next_report && !give_up) return;
    w->next_report += warn;
    char msg[512];
    snprintf(msg, sizeof msg,
             "collective #%llu has spent %.1f s inside %s (%lld elements) on rank %d, after every "
             "rank joined it: a rank stopped during the transfer (a frozen process or host, or a "
             "lost link)",
             (unsigned long long)seq, waited, call, (long long)count, w->c->rank);
    if (!give_up) {
        rg_comm_stall_report(w->c, msg);
        return;
    }
    /* The blocked thread cannot return RG_ETIMEDOUT: end the job, as a failed check does. */
    rg_fatal_timeout(__FILE__, __LINE__, "stall: %s; gave up after %.0f s (stall_abort_seconds)",
                     msg, p->abort_s);
}

static void *watchdog_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += PERIOD_NS;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&wake, &mu, &until);
        const int64_t now = rg_trace_now();
        for (rg_mpi_watch *w = watches; w && !stopping; w = w->next) check(w, now);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

rg_mpi_watch *rg_mpi_watch_new(rg_comm *c) {
    if (c->size < 2 || c->dist->stall.warn_s <= 0) return NULL;
    rg_mpi_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL; /* unwatched: the calls run as they did before the watchdog */
    w->c = c;
    pthread_mutex_lock(&mu);
    if (!running && pthread_create(&thread, NULL, watchdog_main, NULL) == 0) running = true;
    if (running) {
        w->next = watches, watches = w;
    } else {
        free(w), w = NULL;
    }
    pthread_mutex_unlock(&mu);
    return w;
}

void rg_mpi_watch_free(rg_mpi_watch *w) {
    if (!w) return;
    bool last;
    pthread_mutex_lock(&mu);
    for (rg_mpi_watch **p = &watches; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    last = !watches && running;
    if (last) stopping = true, pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
    free(w);
    if (!last) return;
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    running = stopping = false;
    pthread_mutex_unlock(&mu);
}

void rg_mpi_watch_begin(rg_mpi_watch *w, const char *call, int64_t count) {
    if (!w) return;
    /* plain stores on x86 (relaxed, then release): a few nanoseconds beside a microsecond call */
    atomic_store_explicit(&w->call, call, memory_order_relaxed);
    atomic_store_explicit(&w->count, count, memory_order_relaxed);
    atomic_store_explicit(&w->seq, w->c->seq, memory_order_relaxed);
    atomic_store_explicit(&w->active, ++w->calls, memory_order_release);
}

void rg_mpi_watch_end(rg_mpi_watch *w) {
    if (w) atomic_store_explicit(&w->active, 0, memory_order_release);
}
