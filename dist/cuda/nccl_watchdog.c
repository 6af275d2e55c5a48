/* nccl_watchdog.c — a thread that watches the collectives queued on the GPU until they have run.
 *
 * Why it exists: the comm thread never waits for the GPU, and the join (join.c) only proves that
 * every rank reached a collective, not that it finished. A peer whose GPU or network link dies
 * after the join leaves the collective running forever, and with it whatever waits on the device
 * next (the optimizer's kernels, a loss copied to the host) — silently. PyTorch's
 * ProcessGroupNCCL has the same watchdog for the same reason.
 *
 * Ten times a second the thread drops the collectives whose event has completed, asks NCCL for
 * an asynchronous error (a network failure, a remote error) and looks at the oldest unfinished
 * collective: after stall_seconds it reports it, and after stall_abort_seconds, or at once on an
 * NCCL error, it aborts the NCCL communicator. The kernels in flight then exit, so nothing waits
 * forever; every later call on the comm fails with the reason, and a timed-out comm ends the job
 * as any stalled collective does (rg_dist_finalize). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "dist/cuda/nccl_impl.h"
#include "ringgrad/timeline.h"

#define PERIOD_NS (100 * 1000 * 1000)

rg_status rg_nccl_fail_locked(rg_nccl *n, rg_status s, const char *fmt, ...) {
    if (n->failed == RG_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(n->why, sizeof n->why, fmt, ap);
        va_end(ap);
        n->failed = s;
        if (n->comm) ncclCommAbort(n->comm); /* blocks until NCCL's kernels have left */
        n->comm = NULL;
        n->n = 0; /* the aborted collectives are finished, one way or another */
    }
    return rg_error(n->failed, "%s", n->why);
}

rg_status rg_nccl_health_locked(rg_nccl *n) {
    if (n->failed == RG_OK && n->comm) {
        ncclResult_t state = ncclSuccess, r = ncclCommGetAsyncError(n->comm, &state);
        if (r != ncclSuccess) state = r;
        if (state != ncclSuccess && state != ncclInProgress)
            rg_nccl_fail_locked(
                n, rg_nccl_status(state), "nccl on rank %d (cuda:%d): a collective failed: %s (%s)",
                n->c->rank, n->device, ncclGetErrorString(state), ncclGetLastError(NULL));
    }
    return n->failed == RG_OK ? RG_OK : rg_error(n->failed, "%s", n->why);
}

/* Drops the collectives the GPU has finished, oldest first. */
static void reap_locked(rg_nccl *n) {
    while (n->n > 0) {
        cudaError_t e = cudaEventQuery(n->watched[n->head].ev);
        if (e == cudaErrorNotReady) {
            (void)cudaGetLastError(); /* "not yet" is an answer, not an error */
            return;
        }
        if (e != cudaSuccess) {
            rg_nccl_fail_locked(n, RG_EDEVICE, "cuda:%d failed while running a collective: %s",
                                n->device, cudaGetErrorString(e));
            return;
        }
        n->head = (n->head + 1) % RG_NCCL_WATCH_SLOTS;
        n->n--;
    }
}

/* "collective #12 (allreduce)" */
static void name_watched(const rg_nccl_watched *w, char *buf, size_t cap) {
    if (w->seq)
        snprintf(buf, cap, "collective #%llu (%s)", (unsigned long long)w->seq,
                 rg_coll_kind_name(w->kind));
    else
        snprintf(buf, cap, "a %s", rg_coll_kind_name(w->kind));
}

/* One look; writes a stall report for the caller to make (after unlocking) into report. */
static void inspect_locked(rg_nccl *n, char *report, size_t cap) {
    report[0] = '\0';
    reap_locked(n);
    if (rg_nccl_health_locked(n) != RG_OK || n->n == 0) return;
    const rg_stall_policy *p = &n->c->dist->stall;
    if (p->warn_s <= 0) return;
    rg_nccl_watched *w = &n->watched[n->head];
    double waited = (double)(rg_trace_now() - w->t_queued) * 1e-9;
    char what[96];
    name_watched(w, what, sizeof what);
    if (p->abort_s > 0 && waited >= p->abort_s) {
        rg_nccl_fail_locked(n, RG_ETIMEDOUT,
                            "%s queued on cuda:%d by rank %d had not finished after %.0f s; the "
                            "NCCL communicator was aborted (stall_abort_seconds)",
                            what, n->device, n->c->rank, waited);
        snprintf(report, cap, "%s", n->why);
    } else if (waited >= p->warn_s * (w->reports + 1)) {
        w->reports++;
        snprintf(report, cap,
                 "%s queued on cuda:%d by rank %d has not finished on the GPU after %.1f s (a "
                 "peer's GPU or network link, or this GPU, is stuck)",
                 what, n->device, n->c->rank, waited);
    }
}

static void *watchdog_main(void *arg) {
    rg_nccl *n = arg;
    rg_dist_cuda_use(n->device);
    pthread_mutex_lock(&n->mu);
    while (!n->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += PERIOD_NS;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&n->wake, &n->mu, &until);
        if (n->stopping) break;
        char report[700];
        inspect_locked(n, report, sizeof report);
        if (report[0]) {
            pthread_mutex_unlock(&n->mu); /* the report may call the user's on_stall */
            rg_comm_stall_report(n->c, report);
            pthread_mutex_lock(&n->mu);
        }
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

rg_status rg_nccl_watch_start(rg_nccl *n) {
    for (int i = 0; i < RG_NCCL_WATCH_SLOTS; i++)
        RG_DIST_CUDA(cudaEventCreateWithFlags(&n->watched[i].ev, cudaEventDisableTiming));
    int e = pthread_create(&n->thread, NULL, watchdog_main, n);
    if (e != 0) return rg_error(RG_ENOMEM, "comm backend \"nccl\": cannot start its watchdog");
    n->thread_started = true;
    return RG_OK;
}

void rg_nccl_watch_stop(rg_nccl *n) {
    if (n->thread_started) {
        pthread_mutex_lock(&n->mu);
        n->stopping = true;
        pthread_cond_signal(&n->wake);
        pthread_mutex_unlock(&n->mu);
        pthread_join(n->thread, NULL);
        n->thread_started = false;
    }
    for (int i = 0; i < RG_NCCL_WATCH_SLOTS; i++) {
        if (n->watched[i].ev) cudaEventDestroy(n->watched[i].ev);
        n->watched[i].ev = NULL;
    }
    n->n = 0;
}

/* ---- the comm thread hands over each queued collective ---- */

RG_NODISCARD static rg_status test_slot_free(rg_comm *c, void *ctx, bool *done) {
    rg_nccl *n = ctx;
    pthread_mutex_lock(&n->mu);
    reap_locked(n);
    rg_status s = rg_nccl_health_locked(n);
    *done = n->n < RG_NCCL_WATCH_SLOTS;
    pthread_mutex_unlock(&n->mu);
    return s;
}

static void describe_full(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    rg_nccl *n = ctx;
    snprintf(buf, cap,
             "rank %d has waited %.1f s for cuda:%d to finish one of %d queued "
             "collectives",
             c->rank, waited, n->device, RG_NCCL_WATCH_SLOTS);
}

rg_status rg_nccl_watch(rg_nccl *n, rg_coll_kind kind, uint64_t seq) {
    RG_TRY(rg_comm_poll(n->c, test_slot_free, NULL, n, describe_full, n));
    pthread_mutex_lock(&n->mu);
    rg_status s = rg_nccl_health_locked(n);
    if (s == RG_OK) {
        rg_nccl_watched *w = &n->watched[(n->head + n->n) % RG_NCCL_WATCH_SLOTS];
        cudaError_t e = cudaEventRecord(w->ev, n->stream);
        if (e != cudaSuccess) {
            s = rg_nccl_fail_locked(n, RG_EDEVICE, "cuda:%d: cudaEventRecord failed: %s", n->device,
                                    cudaGetErrorString(e));
        } else {
            *w = (rg_nccl_watched){w->ev, seq, kind, rg_trace_now(), 0};
            n->n++;
        }
    }
    pthread_mutex_unlock(&n->mu);
    return s;
}
