/* nccl_impl.h — the nccl backend's state, shared by comm_nccl.c (the collectives, on the comm
 * thread) and nccl_watchdog.c (the thread that watches them run on the GPU). */
#ifndef RG_NCCL_IMPL_H
#define RG_NCCL_IMPL_H

#include <nccl.h>
#include <pthread.h>

#include "dist/cuda/dist_cuda.h"

/* Collectives that may be queued on the GPU, not yet finished, before the comm thread waits. */
#define RG_NCCL_WATCH_SLOTS 64

/* One collective queued on the comm stream, watched until the GPU has run it. */
typedef struct {
    cudaEvent_t ev; /* recorded after the collective */
    uint64_t seq;   /* its number on the communicator (0 for the barrier's own) */
    rg_coll_kind kind;
    int64_t t_queued; /* rg_trace_now() */
    int reports;      /* stall reports made about it so far */
} rg_nccl_watched;

typedef struct {
    rg_comm *c;
    int device;
    cudaStream_t stream; /* the device's comm stream */
    int32_t *one;        /* (1) device scratch for the barrier's allreduce */

    /* Under mu: the NCCL communicator and everything the watchdog shares. Every NCCL call on comm
     * is made under mu, so that the watchdog's abort (which frees comm) never races one; NCCL
     * calls on a nonblocking communicator return at once, so mu is never held for long. */
    pthread_mutex_t mu;
    ncclComm_t comm;  /* NULL once aborted */
    rg_status failed; /* RG_OK, or why the communicator is unusable */
    char why[512];
    rg_nccl_watched watched[RG_NCCL_WATCH_SLOTS]; /* a ring, oldest at head */
    int head, n;
    /* The watchdog thread. */
    pthread_cond_t wake; /* signalled to stop it */
    pthread_t thread;
    bool thread_started, stopping;
} rg_nccl;

/* NCCL's failure as a status: a CUDA error is the device's, a bad argument the caller's, and
 * anything else (a system, network or remote error) the peers'. */
RG_NODISCARD static inline rg_status rg_nccl_status(ncclResult_t r) {
    if (r == ncclUnhandledCudaError) return RG_EDEVICE;
    if (r == ncclInvalidArgument || r == ncclInvalidUsage) return RG_EINVAL;
    return RG_EPEER;
}

/* ---- nccl_watchdog.c ---- */
/* Creates the events and starts the thread. RG_EDEVICE / RG_ENOMEM on failure. */
RG_NODISCARD rg_status rg_nccl_watch_start(rg_nccl *n);
/* Stops the thread and releases the events. Safe on a half-started watchdog. */
void rg_nccl_watch_stop(rg_nccl *n);
/* Comm thread, after a collective was queued on n->stream: watch it. Waits (politely, with stall
 * reports) while RG_NCCL_WATCH_SLOTS collectives are still unfinished. */
RG_NODISCARD rg_status rg_nccl_watch(rg_nccl *n, rg_coll_kind kind, uint64_t seq);
/* Under mu: RG_OK, or the failure of work already queued (an NCCL async error; a collective
 * that never finished, after which the communicator has been aborted), with rg_error set. */
RG_NODISCARD rg_status rg_nccl_health_locked(rg_nccl *n);
/* Under mu: aborts the communicator once (kernels in flight exit, so no stream waits for them
 * forever), records why and returns s with rg_error set. */
rg_status rg_nccl_fail_locked(rg_nccl *n, rg_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
