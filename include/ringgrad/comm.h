/* comm.h — the communicator: the collectives data parallelism needs, behind one interface.
 *
 * Backends (chosen by name: rg_dist_opts.comm, $RG_COMM, or rg_comm_new):
 *   mpi   Open MPI's own collectives on host buffers;
 *   ring  our readable ring allreduce (reduce-scatter, then allgather) on MPI point-to-point;
 *   nccl  NCCL on device buffers, its id bootstrapped by an MPI broadcast (CUDA builds).
 *
 * Every call is carried out in the order the calls were made, one at a time, by the dist's comm
 * thread (dist/comm_thread.c) or by a thread waiting for it: an async call queues its request,
 * wakes the comm thread and returns a handle; a blocking call, or rg_comm_wait, runs the requests
 * ahead of it itself when nothing runs (host buffers; GPU work stays on the comm thread), and
 * otherwise sleeps until its request is done. All calls are collective over the communicator's ranks unless marked
 * otherwise, and every rank must make them in the same order; a rank that is late is named after
 * stall_seconds, and a rank that calls a different collective gets RG_EMISMATCH instead of a hang
 * (dist/join.c).
 *
 * Buffers may be host memory or GPU memory (CUDA builds) with every backend; send and recv of one
 * call must be on the same side. nccl works on the GPU of the local rank and copies host buffers
 * there and back; mpi and ring copy GPU buffers through page-locked host memory (dist/cuda/
 * comm_device.c). With GPU buffers, calls follow CUDA's stream semantics, not the host's: a
 * collective starts after the kernels queued on the buffer's device before the call, and "done"
 * (a blocking call's return, rg_comm_wait) means that kernels queued from then on see the result.
 * The host does not wait for the GPU; copying the result to the host does (the D2H copy).
 *
 * Failures a correct program can meet (a dead or late peer, a mismatched call) return a status and
 * rg_last_error() says which rank and which call. Misuse (a NULL buffer, a root out of range)
 * stops through RG_CHECK, which under MPI aborts the whole job. */
#ifndef RG_COMM_H
#define RG_COMM_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RG_REDUCE_SUM, RG_REDUCE_AVG, RG_REDUCE_OP_COUNT } rg_reduce_op;

/* Element types on the wire. F16 is IEEE half, used to compress gradients; sums of F16 are
 * accumulated in float32 and rounded once per hop. AVG is only defined for F32 and F16. */
typedef enum {
    RG_COMM_F32,
    RG_COMM_F16,
    RG_COMM_I32,
    RG_COMM_I64,
    RG_COMM_U8,
    RG_COMM_DTYPE_COUNT
} rg_comm_dtype;

typedef enum { RG_COMM_MPI, RG_COMM_RING, RG_COMM_NCCL, RG_COMM_BACKEND_COUNT } rg_comm_backend;

/* User tags for rg_comm_send/recv are in [0, RG_COMM_TAG_MAX); the tags above are the ring's. */
#define RG_COMM_TAG_MAX 16384
/* rg_comm_recv's peer for "whichever rank sends first" (mpi and ring; not nccl). The message must
 * say who sent it (the parameter servers put the worker in a header). */
#define RG_COMM_ANY_SOURCE (-1)

typedef struct rg_dist rg_dist; /* ringgrad/dist.h */
typedef struct rg_comm rg_comm;
typedef struct rg_comm_req rg_comm_req;

/* ---- names and sizes ---- */
/* Parses "mpi", "ring" or "nccl" into *out. RG_EINVAL (listing the valid names) otherwise. */
RG_API RG_NODISCARD rg_status rg_comm_backend_parse(const char *name, rg_comm_backend *out);
/* "mpi", "ring", "nccl". Static string. */
RG_API const char *rg_comm_backend_name(rg_comm_backend b);
/* Bytes per element: 4, 2, 4, 8, 1. */
RG_API size_t rg_comm_dtype_size(rg_comm_dtype dt);

/* ---- lifecycle ---- */
/* Collective over the dist's world: a new communicator on backend b, served by d's comm thread.
 * Its messages never mix with another communicator's. On success *out is owned by the caller
 * (rg_comm_free); on failure (RG_ENOTSUP for nccl without CUDA) *out is NULL. */
RG_API RG_NODISCARD rg_status rg_comm_new(rg_dist *d, rg_comm_backend b, rg_comm **out);
/* Collective over world (a comm from rg_comm_new or the dist's own): the ranks that pass the same
 * color (>= 0) form a new communicator on world's backend, ranked by key (ties by world rank),
 * as MPI_Comm_split. Its rank and size are within the group. Used by the pipeline for data
 * parallelism across pipelines (the ranks holding one stage). *out as rg_comm_new's. */
RG_API RG_NODISCARD rg_status rg_comm_split(rg_comm *world, int color, int key, rg_comm **out);
/* Collective. Requests queued earlier on c finish first; async handles must still be waited on.
 * NULL is a no-op. The dist's own communicator (rg_dist_comm) is freed by rg_dist_finalize. */
RG_API void rg_comm_free(rg_comm *c);

/* ---- queries (local, not collective) ---- */
RG_API int rg_comm_rank(const rg_comm *c);
RG_API int rg_comm_size(const rg_comm *c);
RG_API int rg_comm_local_rank(const rg_comm *c); /* rank among the processes on this host */
RG_API int rg_comm_local_size(const rg_comm *c);
RG_API rg_comm_backend rg_comm_kind(const rg_comm *c);

/* ---- collectives; count is in elements; buffers on the host or a GPU (see above) ---- */
/* In place: buf = op over ranks of buf.                       buf: (count) */
RG_API RG_NODISCARD
rg_status rg_comm_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                            rg_reduce_op op);
/* Starts an allreduce and returns at once; *req must be waited on exactly once (rg_comm_wait).
 * The buffer must not be touched until the wait returns. Requests finish in the order they were
 * started. On failure to start, *req is NULL. */
RG_API RG_NODISCARD
rg_status rg_comm_allreduce_async(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                  rg_reduce_op op, rg_comm_req **req);
/* Waits for req, frees it and returns its status. */
RG_API RG_NODISCARD rg_status rg_comm_wait(rg_comm_req *req);
/* *done = whether req has finished (not collective, never blocks); a finished req must still be
 * waited on to free it. With GPU buffers on nccl, "finished" means queued on the GPU. */
RG_API RG_NODISCARD rg_status rg_comm_test(rg_comm_req *req, bool *done);
/* buf on root is copied to buf on every rank.                    buf: (count) */
RG_API RG_NODISCARD
rg_status rg_comm_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root);
/* recv = the concatenation of every rank's send, rank r's at r * count.
 * send: (count); recv: (size * count). send may be recv + rank * count (in place). */
RG_API RG_NODISCARD
rg_status rg_comm_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                            rg_comm_dtype dt);
/* Rank r receives block r of the reduction: recv = op over ranks of send[r*count, (r+1)*count).
 * send: (size * count); recv: (count); they must not overlap. */
RG_API RG_NODISCARD
rg_status rg_comm_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                 rg_comm_dtype dt, rg_reduce_op op);
/* Starts a reduce-scatter and returns at once, as rg_comm_allreduce_async (ZeRO-1 reduces each
 * bucket of gradients this way during backward). send and recv must not be touched until the
 * wait returns. */
RG_API RG_NODISCARD rg_status rg_comm_reduce_scatter_async(rg_comm *c, const void *send, void *recv,
                                                           int64_t count, rg_comm_dtype dt,
                                                           rg_reduce_op op, rg_comm_req **req);
/* Returns once every rank has entered it. */
RG_API RG_NODISCARD rg_status rg_comm_barrier(rg_comm *c);
/* Point-to-point, not collective: peer is another rank of c, tag in [0, RG_COMM_TAG_MAX). They
 * run on the comm thread in order with the collectives, so a send must not wait for a recv that
 * this rank queues later. recv takes a message of at most count elements (a longer one is an MPI
 * error, which aborts the job). A wait longer than the stall times is reported, then fails with
 * RG_ETIMEDOUT like a stalled collective. nccl has no tags: messages between two ranks match in
 * the order they were sent, and recv must ask for exactly the count that was sent. */
RG_API RG_NODISCARD
rg_status rg_comm_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                       int tag);
RG_API RG_NODISCARD
rg_status rg_comm_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer, int tag);

#ifdef __cplusplus
}
#endif

#endif
