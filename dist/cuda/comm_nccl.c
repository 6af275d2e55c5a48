/* comm_nccl.c — the nccl backend: NCCL collectives on GPU memory, one NCCL communicator per
 * rg_comm, on the GPU of the local rank.
 *
 * What it teaches:
 *   - Bootstrap. NCCL's ranks find each other through a ncclUniqueId (in effect rank 0's socket
 *     address): rank 0 makes it and MPI broadcasts it over the comm's own MPI communicator, after
 *     every rank has said that it has a GPU (a rank without one would leave the others waiting in
 *     ncclCommInitRank). A world of one without mpirun makes it locally.
 *   - Streams. Every collective is queued on the device's comm stream, a high-priority stream
 *     beside the compute stream, and the comm thread never waits for the GPU: comm_device.c makes
 *     the comm stream wait for the caller's inputs and the caller's stream wait for the result.
 *   - Failures. The communicator is nonblocking (ncclConfig.blocking = 0), so no NCCL call can
 *     block the comm thread: a call that answers ncclInProgress is polled with
 *     ncclCommGetAsyncError, with stall reports and the stall timeout, and a watchdog thread
 *     (nccl_watchdog.c) watches every queued collective until the GPU has run it.
 *
 * Where it differs from the host backends: NCCL adds float16 in half precision (rounded at every
 * addition, not once per hop); AVG is NCCL's own ncclAvg; send and recv match by order, since
 * NCCL has no tags, and a recv must ask for exactly the count that was sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/cuda/nccl_impl.h"
#include "tensor/backend_impl.h"
#include "ringgrad/device.h"

/* 2.14: nonblocking communicators (ncclAvg arrived in 2.10). */
#define NCCL_MIN_VERSION 21400

static const ncclDataType_t nccl_types[] = {ncclFloat32, ncclFloat16, ncclInt32, ncclInt64,
                                            ncclUint8};
_Static_assert(sizeof nccl_types / sizeof *nccl_types == RG_COMM_DTYPE_COUNT, "an NCCL type each");

static const char *nccl_message(void) {
    const char *m = ncclGetLastError(NULL);
    return m && *m ? m : "no details";
}

/* ---- NCCL calls on a nonblocking communicator ---- */

typedef struct {
    rg_nccl *n;
    const char *call;
} pending;

RG_NODISCARD static rg_status test_settled(rg_comm *c, void *ctx, bool *done) {
    pending *p = ctx;
    rg_nccl *n = p->n;
    pthread_mutex_lock(&n->mu);
    ncclResult_t state = ncclInvalidUsage;
    rg_status s = n->failed;
    if (s == RG_OK) {
        ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
        if (r != ncclSuccess) state = r;
        if (state != ncclSuccess && state != ncclInProgress)
            rg_nccl_fail_locked(n, rg_nccl_status(state), "%s on rank %d (cuda:%d) failed: %s (%s)",
                                p->call, c->rank, n->device, ncclGetErrorString(state),
                                nccl_message());
    }
    s = n->failed == RG_OK ? RG_OK : rg_error(n->failed, "%s", n->why);
    pthread_mutex_unlock(&n->mu);
    *done = state == ncclSuccess;
    return s;
}

static void give_up_settle(rg_comm *c, void *ctx) {
    pending *p = ctx;
    pthread_mutex_lock(&p->n->mu);
    rg_nccl_fail_locked(p->n, RG_ETIMEDOUT, "%s on rank %d never completed", p->call, c->rank);
    pthread_mutex_unlock(&p->n->mu);
}

static void describe_settle(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    pending *p = ctx;
    snprintf(buf, cap, "%s on rank %d (cuda:%d) has waited %.1f s for the other ranks", p->call,
             c->rank, p->n->device, waited);
}

/* Finishes a call made under n->mu (and unlocked since) that returned r: a nonblocking
 * communicator may answer ncclInProgress, and must then be polled until it has settled before
 * any other NCCL call is made on it. Any failure aborts the communicator. */
RG_NODISCARD static rg_status settle(rg_nccl *n, ncclResult_t r, const char *call) {
    if (r == ncclInProgress) {
        pending p = {n, call};
        return rg_comm_poll(n->c, test_settled, give_up_settle, &p, describe_settle, &p);
    }
    if (r == ncclSuccess) return RG_OK;
    pthread_mutex_lock(&n->mu);
    rg_status s =
        rg_nccl_fail_locked(n, rg_nccl_status(r), "%s on rank %d (cuda:%d) failed: %s (%s)", call,
                            n->c->rank, n->device, ncclGetErrorString(r), nccl_message());
    pthread_mutex_unlock(&n->mu);
    return s;
}

/* Before a collective: the device current, n->mu held, and the communicator healthy. On
 * failure mu is not held. */
RG_NODISCARD static rg_status begin(rg_nccl *n) {
    rg_dist_cuda_use(n->device);
    pthread_mutex_lock(&n->mu);
    rg_status s = rg_nccl_health_locked(n);
    if (s != RG_OK) pthread_mutex_unlock(&n->mu);
    return s;
}

/* After it: settle the call and watch the work it queued until the GPU has run it. */
RG_NODISCARD static rg_status end(rg_nccl *n, ncclResult_t r, const char *call, rg_coll_kind kind) {
    pthread_mutex_unlock(&n->mu);
    RG_TRY(settle(n, r, call));
    const rg_comm_req *req = n->c->current;
    return rg_nccl_watch(n, kind, req ? req->seq : 0);
}

/* ---- the collectives (device buffers on n->device; count may be 0) ---- */

RG_NODISCARD static rg_status nccl_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                rg_reduce_op op) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, nccl_types[dt],
                                   op == RG_REDUCE_AVG ? ncclAvg : ncclSum, n->comm, n->stream);
    return end(n, r, "ncclAllReduce", RG_COLL_ALLREDUCE);
}

RG_NODISCARD
static rg_status nccl_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r =
        ncclBroadcast(buf, buf, (size_t)count, nccl_types[dt], root, n->comm, n->stream);
    return end(n, r, "ncclBroadcast", RG_COLL_BROADCAST);
}

/* send may be recv + rank * count: NCCL's in-place allgather. */
RG_NODISCARD
static rg_status nccl_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                                rg_comm_dtype dt) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r = ncclAllGather(send, recv, (size_t)count, nccl_types[dt], n->comm, n->stream);
    return end(n, r, "ncclAllGather", RG_COLL_ALLGATHER);
}

RG_NODISCARD
static rg_status nccl_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                     rg_comm_dtype dt, rg_reduce_op op) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r = ncclReduceScatter(send, recv, (size_t)count, nccl_types[dt],
                                       op == RG_REDUCE_AVG ? ncclAvg : ncclSum, n->comm, n->stream);
    return end(n, r, "ncclReduceScatter", RG_COLL_REDUCE_SCATTER);
}

/* An allreduce of one zero, then a wait for it: the host returns only once every rank's GPU
 * has reached the barrier. */
RG_NODISCARD static rg_status nccl_barrier(rg_comm *c) {
    rg_nccl *n = c->impl;
    RG_TRY(begin(n));
    ncclResult_t r = ncclAllReduce(n->one, n->one, 1, ncclInt32, ncclSum, n->comm, n->stream);
    RG_TRY(end(n, r, "ncclAllReduce (barrier)", RG_COLL_BARRIER));
    return rg_comm_dev_sync(c, "barrier");
}

RG_NODISCARD
static rg_status nccl_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r = ncclSend(buf, (size_t)count, nccl_types[dt], peer, n->comm, n->stream);
    return end(n, r, "ncclSend", RG_COLL_SEND);
}

RG_NODISCARD
static rg_status nccl_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    rg_nccl *n = c->impl;
    if (count == 0) return RG_OK;
    RG_TRY(begin(n));
    ncclResult_t r = ncclRecv(buf, (size_t)count, nccl_types[dt], peer, n->comm, n->stream);
    return end(n, r, "ncclRecv", RG_COLL_RECV);
}

RG_NODISCARD static rg_status nccl_check(rg_comm *c) {
    rg_nccl *n = c->impl;
    pthread_mutex_lock(&n->mu);
    rg_status s = rg_nccl_health_locked(n);
    pthread_mutex_unlock(&n->mu);
    return s;
}

/* ---- set-up: a GPU on every rank, the id, the communicator ---- */

/* This rank's GPU (current on the comm thread from now on), and an NCCL that is new enough. */
RG_NODISCARD static rg_status pick_device(rg_comm *c, int *device) {
    rg_device dev;
    if (rg_cuda_set_device(c->local_rank, &dev) != RG_OK) {
        char why[512]; /* rg_error must not read the buffer it writes */
        snprintf(why, sizeof why, "%s", rg_last_error());
        return rg_error(RG_EDEVICE,
                        "comm backend \"nccl\" on rank %d: %s; use --comm mpi, or "
                        "--device cpu",
                        c->rank, why);
    }
    *device = dev.index;
    int v = 0;
    ncclResult_t r = ncclGetVersion(&v);
    if (r != ncclSuccess || v < NCCL_MIN_VERSION)
        return rg_error(RG_ENOTSUP,
                        "comm backend \"nccl\": NCCL %d is too old (ringgrad needs "
                        "2.14 or later, for nonblocking communicators)",
                        v);
    return RG_OK;
}

static void describe_setup(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    snprintf(buf, cap, "nccl set-up on rank %d has waited %.1f s for the other ranks (%s)", c->rank,
             waited, (const char *)ctx);
}

/* Every rank learns whether all of them can go on; then rank 0's id reaches every rank. */
RG_NODISCARD static rg_status exchange_id(rg_comm *c, rg_status mine, ncclUniqueId *id) {
    if (c->mpi == MPI_COMM_NULL) return mine; /* a world of one: rank 0 made the id itself */
    char why[512];
    snprintf(why, sizeof why, "%s", rg_last_error());
    int32_t me = (int32_t)mine, *all = calloc((size_t)c->size, sizeof *all);
    if (!all) return rg_error(RG_ENOMEM, "comm backend \"nccl\": out of host memory");
    MPI_Request req;
    MPI_Iallgather(&me, 1, MPI_INT32_T, all, 1, MPI_INT32_T, c->mpi, &req);
    rg_status s = rg_comm_mpi_wait(c, 1, &req, describe_setup, "who has a GPU");
    int bad = -1;
    for (int r = 0; s == RG_OK && r < c->size && bad < 0; r++)
        if (all[r] != RG_OK) bad = r;
    if (s == RG_OK && mine != RG_OK) {
        s = rg_error(mine, "%s", why);
    } else if (s == RG_OK && bad >= 0) {
        rg_status theirs = all[bad] > 0 && all[bad] < RG_STATUS_COUNT ? all[bad] : RG_EPEER;
        s = rg_error(theirs,
                     "comm backend \"nccl\": rank %d cannot take part (%s; its own "
                     "message says why)",
                     bad, rg_status_name(theirs));
    }
    free(all);
    if (s != RG_OK) return s;
    MPI_Ibcast(id, (int)sizeof *id, MPI_BYTE, 0, c->mpi, &req);
    return rg_comm_mpi_wait(c, 1, &req, describe_setup, "the NCCL id from rank 0");
}

RG_NODISCARD static rg_status create_comm(rg_comm *c, rg_nccl *n) {
    rg_status mine = pick_device(c, &n->device);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (mine == RG_OK && c->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            mine = rg_error(rg_nccl_status(r),
                            "comm backend \"nccl\": ncclGetUniqueId failed: "
                            "%s (%s)",
                            ncclGetErrorString(r), nccl_message());
    }
    RG_TRY(exchange_id(c, mine, &id));
    n->stream = rg_cuda_stream(n->device, RG_CUDA_STREAM_COMM);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    pthread_mutex_lock(&n->mu);
    ncclResult_t r = ncclCommInitRankConfig(&n->comm, c->size, id, c->rank, &config);
    pthread_mutex_unlock(&n->mu);
    return settle(n, r, "ncclCommInitRankConfig");
}

/* Frees what init made. With `clean`, flushes the communicator (every rank is here: close is
 * joined); otherwise, or if that fails, aborts it. */
static void release(rg_nccl *n, bool clean) {
    rg_nccl_watch_stop(n);
    pthread_mutex_lock(&n->mu);
    clean = clean && n->comm && n->failed == RG_OK;
    ncclResult_t r = clean ? ncclCommFinalize(n->comm) : ncclSuccess;
    pthread_mutex_unlock(&n->mu);
    if (clean && settle(n, r, "ncclCommFinalize") == RG_OK) {
        pthread_mutex_lock(&n->mu);
        if (n->comm) ncclCommDestroy(n->comm); /* the flushed comm is local now: it cannot hang */
        n->comm = NULL;
        pthread_mutex_unlock(&n->mu);
    }
    if (n->comm) ncclCommAbort(n->comm);
    if (n->one) rg_backend_for(RG_CUDA_DEVICE(n->device))->free(n->one, sizeof *n->one);
    pthread_cond_destroy(&n->wake);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

RG_NODISCARD static rg_status nccl_init(rg_comm *c) {
    rg_nccl *n = calloc(1, sizeof *n);
    if (!n) return rg_error(RG_ENOMEM, "comm backend \"nccl\": out of host memory");
    n->c = c;
    n->device = -1;
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_t monotonic; /* the watchdog's timed waits ignore changes of the wall clock */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&n->wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    rg_status s = create_comm(c, n);
    if (s == RG_OK) {
        n->one = rg_cuda_alloc_on(n->device, sizeof *n->one, RG_CUDA_STREAM_COMM);
        s = n->one ? RG_OK : rg_error(RG_ENOMEM, "comm backend \"nccl\": out of device memory");
    }
    if (s == RG_OK) {
        cudaError_t e = cudaMemsetAsync(n->one, 0, sizeof *n->one, n->stream);
        s = e == cudaSuccess ? RG_OK : rg_dist_cuda_error(e, "cudaMemsetAsync");
    }
    if (s == RG_OK) s = rg_nccl_watch_start(n);
    if (s != RG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", rg_last_error());
        release(n, false);
        return rg_error(s, "%s", why);
    }
    c->impl = n;
    c->device = n->device;
    return RG_OK;
}

static void nccl_deinit(rg_comm *c) {
    rg_nccl *n = c->impl;
    if (!n) return;
    rg_dist_cuda_use(n->device);
    release(n, c->broken == RG_OK);
    c->impl = NULL;
    c->device = -1;
}

const rg_comm_ops rg_comm_nccl_ops = {
    .name = "nccl",
    .device_buffers = true,
    .init = nccl_init,
    .deinit = nccl_deinit,
    .check = nccl_check,
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .reduce_scatter = nccl_reduce_scatter,
    .barrier = nccl_barrier,
    .send = nccl_send,
    .recv = nccl_recv,
};
