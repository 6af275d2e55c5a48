/* comm.h — the communicator: the collectives data parallelism needs, behind one interface.
 *
 * Backends (chosen by name, --comm / RG_COMM):
 *   mpi   Open MPI's own collectives on host buffers;
 *   ring  our readable ring allreduce (reduce-scatter, then allgather) on MPI point-to-point;
 *   nccl  NCCL on device buffers, its id bootstrapped by an MPI broadcast (CUDA builds).
 * All calls are collective over the communicator's ranks unless marked otherwise, and every rank
 * must make them in the same order. Failures (a dead peer, a timeout) return a status;
 * rg_last_error() says which rank and which call. */
#ifndef RG_COMM_H
#define RG_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/status.h"

typedef enum { RG_REDUCE_SUM, RG_REDUCE_AVG, RG_REDUCE_OP_COUNT } rg_reduce_op;

/* Element types on the wire. F16 is IEEE half, used to compress gradients; sums of F16 are
 * accumulated in float32 and rounded once per hop. */
typedef enum { RG_COMM_F32, RG_COMM_F16, RG_COMM_I32, RG_COMM_I64, RG_COMM_U8, RG_COMM_DTYPE_COUNT } rg_comm_dtype;

typedef enum { RG_COMM_MPI, RG_COMM_RING, RG_COMM_NCCL, RG_COMM_BACKEND_COUNT } rg_comm_backend;

typedef struct rg_comm rg_comm;
typedef struct rg_comm_req rg_comm_req;

/* ---- lifecycle ---- */
/* Parses "mpi", "ring" or "nccl". */
rg_status rg_comm_backend_parse(const char *name, rg_comm_backend *out);
const char *rg_comm_backend_name(rg_comm_backend b);

/* ---- queries (local, not collective) ---- */
int rg_comm_rank(const rg_comm *c);
int rg_comm_size(const rg_comm *c);
int rg_comm_local_rank(const rg_comm *c); /* rank among the processes on this host */
int rg_comm_local_size(const rg_comm *c);
rg_comm_backend rg_comm_kind(const rg_comm *c);

/* ---- collectives; count is in elements ---- */
/* In place: buf = op over ranks of buf. */
rg_status rg_comm_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, rg_reduce_op op);
/* Starts an allreduce and returns at once; *req is waited on (or tested) exactly once. The buffer
 * must not be touched until the wait returns. */
rg_status rg_comm_allreduce_async(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                  rg_reduce_op op, rg_comm_req **req);
/* Waits for and frees req. */
rg_status rg_comm_wait(rg_comm_req *req);
/* *done = whether req has finished; a finished req must still be waited on. */
rg_status rg_comm_test(rg_comm_req *req, bool *done);
rg_status rg_comm_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root);
/* recv holds size * count elements, rank r's contribution at r * count. */
rg_status rg_comm_allgather(rg_comm *c, const void *send, void *recv, int64_t count, rg_comm_dtype dt);
/* send holds size * count elements; rank r receives the reduction of block r into recv (count). */
rg_status rg_comm_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                 rg_comm_dtype dt, rg_reduce_op op);
rg_status rg_comm_barrier(rg_comm *c);
/* Point-to-point (not collective). */
rg_status rg_comm_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer, int tag);
rg_status rg_comm_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer, int tag);

#endif
