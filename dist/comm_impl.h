/* comm_impl.h — inside the communicator: requests, the comm thread's queue, and the backend
 * vtable that mpi, ring, self (a world of one) and nccl implement.
 *
 * A backend only moves data. Everything around it is generic and lives in one place each:
 * argument checks (comm.c), the FIFO request queue and the thread (comm_thread.c), the join and
 * stall checks before each collective (join.c), and the timeline events. Backend functions run
 * only on the comm thread, so they may keep scratch state without locks. They are called with
 * checked arguments; count may be 0.
 *
 * MPI calls use MPI_ERRORS_ARE_FATAL (MPI's default): an MPI error aborts the whole job with
 * MPI's message, so their return codes are not checked. */
#ifndef RG_COMM_IMPL_H
#define RG_COMM_IMPL_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dist/comm.h"
#include "dist/dist.h"

/* ---- requests ---- */

typedef enum {
    RG_COLL_ALLREDUCE,
    RG_COLL_BROADCAST,
    RG_COLL_ALLGATHER,
    RG_COLL_REDUCE_SCATTER,
    RG_COLL_BARRIER,
    RG_COLL_SEND,
    RG_COLL_RECV,
    RG_COLL_OPEN,  /* set a new comm up (MPI_Comm_dup, backend init) */
    RG_COLL_CLOSE, /* tear it down; joined, so a rank that leaves early is caught */
    RG_COLL_KIND_COUNT
} rg_coll_kind;

/* What a request asks for. Unused fields are 0. */
typedef struct {
    rg_coll_kind kind;
    const void *send; /* allgather, reduce_scatter, send */
    void *recv;       /* every other kind's buffer */
    int64_t count;
    rg_comm_dtype dt;
    rg_reduce_op op;
    int peer; /* broadcast root, send/recv peer */
    int tag;
} rg_coll;

struct rg_comm_req {
    rg_comm *comm;
    rg_dist *dist; /* comm's; kept here because an async request may outlive its comm */
    rg_coll coll;
    bool heap; /* allocated by an async call, freed by rg_comm_wait */
    /* Written by the comm thread; `done` under the dist's mutex, the rest before it is set. */
    bool done;
    rg_status status;
    char error[512];
    uint64_t seq;                                   /* collective number on its comm (1, 2, ...) */
    int64_t t_queued, t_started, t_joined, t_ended; /* rg_timeline_now() */
    void *backend_data; /* set by ops->submit, e.g. a CUDA event: "the inputs are ready" */
    struct rg_comm_req *next;
};

/* ---- the backend vtable ---- */

/* Everything runs on the comm thread except submit. A device backend (nccl) keeps its own
 * stream in c->impl and must select its device there (init runs on the comm thread, and the
 * current CUDA device is per thread). The request being run is c->current. */
typedef struct rg_comm_ops {
    const char *name;
    /* Buffers are device memory: the generic code never reads or writes them itself. */
    bool device_buffers;
    /* Set up c->impl. c->rank, size, mpi and control are already set (mpi and control are
     * MPI_COMM_NULL in a world of one). On failure returns a status with rg_error() set. */
    rg_status (*init)(rg_comm *c);
    void (*deinit)(rg_comm *c); /* frees c->impl */
    /* Optional; on the caller's thread as a request is queued. A device backend records here
     * that the inputs are ready (a CUDA event on the caller's stream, in r->backend_data), so
     * that its collective waits for exactly the work queued before the call. */
    void (*submit)(rg_comm *c, rg_comm_req *r);
    /* Collectives, with the semantics of comm.h. AVG is the backend's to apply. Each returns
     * once the result is in place: a device backend synchronises its stream (and releases
     * c->current->backend_data) before returning. */
    rg_status (*allreduce)(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, rg_reduce_op op);
    rg_status (*broadcast)(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root);
    rg_status (*allgather)(rg_comm *c, const void *send, void *recv, int64_t count,
                           rg_comm_dtype dt);
    rg_status (*reduce_scatter)(rg_comm *c, const void *send, void *recv, int64_t count,
                                rg_comm_dtype dt, rg_reduce_op op);
    rg_status (*barrier)(rg_comm *c);
    rg_status (*send)(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                      int tag);
    rg_status (*recv)(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer, int tag);
} rg_comm_ops;

/* comm_mpi.c, comm_ring.c, comm_self.c, and comm_nccl_nocuda.c or cuda/comm_nccl.c. */
extern const rg_comm_ops rg_comm_mpi_ops;
extern const rg_comm_ops rg_comm_ring_ops;
extern const rg_comm_ops rg_comm_self_ops;
extern const rg_comm_ops rg_comm_nccl_ops;

/* ---- the communicator and the world ---- */

typedef struct rg_join rg_join; /* join.c */

struct rg_comm {
    rg_dist *dist;
    const rg_comm_ops *ops;
    rg_comm_backend kind;
    int rank, size, local_rank, local_size;
    MPI_Comm mpi;         /* this comm's duplicate of the world: data and user messages */
    MPI_Comm control;     /* a second duplicate for join messages, so they never match data */
    void *impl;           /* backend state: ring scratch, NCCL's comm and stream */
    rg_comm_req *current; /* the request the comm thread is running on this comm */
    /* Comm thread only. */
    uint64_t seq;     /* collectives started */
    rg_join *join;    /* buffers of the join in flight */
    rg_status broken; /* RG_OK, or why nothing more can run on this comm */
    char broken_why[512];
};

typedef struct {
    double warn_s;  /* report a stalled collective after this long; <= 0: no join at all */
    double abort_s; /* give up after this long; <= 0: never */
    rg_stall_fn fn;
    void *ctx;
} rg_stall_policy;

struct rg_dist {
    int rank, size, local_rank, local_size;
    bool launched; /* MPI is in use */
    bool owns_mpi; /* we called MPI_Init_thread, so we call MPI_Finalize */
    rg_stall_policy stall;
    rg_comm *comm; /* the default communicator */
    /* The comm thread and its FIFO queue. */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* signalled when a request is queued or on stop */
    pthread_cond_t done_cv; /* broadcast when a request is done */
    rg_comm_req *head, *tail;
    bool stopping;
    uint64_t requests; /* requests queued so far: ids for the timeline */
};

/* ---- comm_thread.c ---- */
rg_status rg_comm_thread_start(rg_dist *d);
void rg_comm_thread_stop(rg_dist *d); /* after the queue drains */
/* Queues r (filled in by the caller) and returns at once. */
void rg_comm_submit(rg_comm_req *r);
/* Waits until r is done and returns its status, setting rg_last_error() from it. */
rg_status rg_comm_req_finish(rg_comm_req *r);

/* ---- comm.c ---- */
/* Collective: closes c (a joined request) and frees it; returns the close's status. */
rg_status rg_comm_close(rg_comm *c);

/* ---- join.c ---- */
/* Before a collective: every rank checks in with rank 0, which checks that they called the same
 * collective and names the late ranks. RG_OK, RG_EMISMATCH or RG_ETIMEDOUT. */
rg_status rg_comm_join(rg_comm *c, const rg_comm_req *r);
void rg_comm_join_free(rg_comm *c);
/* After a timeout: moves c's join buffers, which MPI may still touch, to a list kept until exit. */
void rg_comm_join_abandon(rg_comm *c);
/* Waits for n MPI requests, sleeping between polls. Every stall_seconds it reports the line that
 * describe() writes (what is waiting, for whom, for how long); after stall_abort_seconds it
 * cancels the requests and returns RG_ETIMEDOUT with that line as the error. */
typedef void (*rg_describe_fn)(rg_comm *c, void *ctx, double waited_s, char *buf, size_t cap);
rg_status rg_comm_mpi_wait(rg_comm *c, int n, MPI_Request *reqs, rg_describe_fn describe,
                           void *ctx);

/* ---- comm_mpi.c: shared by the host backends ---- */
MPI_Datatype rg_comm_mpi_type(rg_comm_dtype dt);
rg_status rg_comm_mpi_barrier(rg_comm *c);
rg_status rg_comm_mpi_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag);
rg_status rg_comm_mpi_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag);

/* ---- host_reduce.c: the arithmetic of the host backends ---- */
/* dst[i] += src[i]; F16 is added in float32 and rounded once. */
void rg_host_reduce_sum(void *dst, const void *src, int64_t count, rg_comm_dtype dt);
/* buf[i] *= factor (F32 and F16 only). */
void rg_host_scale(void *buf, int64_t count, rg_comm_dtype dt, double factor);

/* Name of a request kind ("allreduce"). Static string. */
const char *rg_coll_kind_name(rg_coll_kind k);
/* Whether every rank takes part (everything but send and recv). */
bool rg_coll_is_collective(rg_coll_kind k);

#endif
