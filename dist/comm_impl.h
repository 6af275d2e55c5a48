/* comm_impl.h — inside the communicator: requests, the comm thread's queue, and the backend
 * vtable that mpi, ring, self (a world of one) and nccl implement.
 *
 * A backend only moves data. Everything around it is generic and lives in one place each:
 * argument checks (comm.c), the FIFO request queue and the thread (comm_thread.c), the join and
 * stall checks before each collective (join.c), buffers on a GPU (comm_device.c), and the
 * timeline events. Backend functions run for one request at a time (on the comm thread, or on a
 * thread waiting for the request: comm_thread.c), so they may keep scratch state without locks. They are called with checked arguments; count may be 0.
 *
 * MPI calls use MPI_ERRORS_ARE_FATAL (MPI's default): an MPI error aborts the whole job with
 * MPI's message, so their return codes are not checked. */
#ifndef RG_COMM_IMPL_H
#define RG_COMM_IMPL_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/comm.h"
#include "ringgrad/dist.h"

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
    /* Written by the thread that runs it; `done` under the dist's mutex, the rest before. */
    bool done;
    rg_status status;
    char error[512];
    uint64_t seq;                                   /* collective number on its comm (1, 2, ...) */
    int64_t t_queued, t_started, t_joined, t_ended; /* rg_trace_now() */
    /* Buffers on a GPU (comm_device.c): device is the CUDA device that holds them, -1 for host
     * memory; the events are cudaEvent_t, NULL when unused. */
    int device;
    void *ready_ev; /* recorded on the compute stream as the request is queued: inputs written */
    void *done_ev;  /* recorded on the comm stream after a device backend's collective */
    struct rg_comm_req *next;
};

/* ---- the backend vtable ---- */

/* Everything runs on the thread running the request, c->current: the comm thread, or for host
 * work a thread waiting for it (comm_thread.c); never two at once.
 *
 * A host backend (mpi, ring, self) works on host memory; a device backend (nccl) on memory of
 * the GPU c->device, queueing its work on that device's comm stream. Buffers on the other side
 * are copied through by comm_device.c, so a backend only ever sees its own kind of memory. A
 * device backend's collective returns as soon as its work is queued: comm_device.c has already
 * made the comm stream wait for the caller's inputs, and orders the caller's compute stream
 * after the collective when the request is waited on (see comm_device.c for the picture). */
typedef struct rg_comm_ops {
    const char *name;
    /* Buffers are device memory on c->device (set by init). */
    bool device_buffers;
    /* Set up c->impl. c->rank, size, mpi and control are already set (mpi and control are
     * MPI_COMM_NULL in a world of one). A device backend selects its GPU here, on the comm
     * thread (the current CUDA device is per thread), and sets c->device. On failure returns a
     * status with rg_error() set. */
    rg_status (*init)(rg_comm *c);
    void (*deinit)(rg_comm *c); /* frees c->impl; c->broken says whether peers are still there */
    /* Optional, for device backends: RG_OK, or the error that work already queued on the device
     * met (a peer that failed, a collective that never finished). Checked while waiting for the
     * device, so that a failed collective is reported instead of its garbage. */
    rg_status (*check)(rg_comm *c);
    /* Collectives, with the semantics of comm.h. AVG is the backend's to apply. A host backend
     * returns once the result is in place; a device backend once the work is queued. */
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
    int device;           /* the GPU a device backend works on; -1 for host backends */
    int split_color;      /* rg_comm_split: ranks of one color form this comm; -1: the world */
    int split_key;        /* rg_comm_split: the order of the ranks in it */
    void *impl;           /* backend state: ring scratch, NCCL's comm and stream */
    rg_comm_req *current; /* the request running on this comm */
    /* Only the thread running a request touches these. */
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
    bool thread_named; /* the comm thread has named itself in the timeline (rg_comm_thread_start waits) */
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* signalled when a request is queued or on stop */
    pthread_cond_t done_cv; /* broadcast when a request is done */
    rg_comm_req *head, *tail;
    bool running;  /* a thread (the comm thread or a waiter) runs a request taken off the queue */
    bool stopping;
    uint64_t requests; /* requests queued so far: ids for the timeline */
};

/* ---- agree.c ---- */
/* Collective over MPI_COMM_WORLD (no-op alone): every rank's "name value" lines must equal rank
 * 0's; otherwise RG_EMISMATCH on every rank with the same message. */
RG_NODISCARD rg_status rg_dist_agree_config(rg_dist *d, const char *config);

/* ---- comm_thread.c ---- */
RG_NODISCARD rg_status rg_comm_thread_start(rg_dist *d);
void rg_comm_thread_stop(rg_dist *d); /* after the queue drains */
/* Queues r (filled in by the caller) and returns at once. `waited`: the caller waits for r next
 * (rg_comm_req_finish), so the comm thread is not woken for a host request, which the waiter runs
 * if the comm thread has not; otherwise the comm thread is woken to run r while the caller goes
 * on. */
void rg_comm_submit(rg_comm_req *r, bool waited);
/* Whether the calling thread is a comm thread (which runs beside the compute, unlike a waiter). */
bool rg_comm_on_comm_thread(void);
/* Queues r and waits for it (rg_comm_req_finish): a blocking call. On an empty queue, r runs on
 * the calling thread and the comm thread is not woken. */
RG_NODISCARD rg_status rg_comm_run(rg_comm_req *r);
/* Waits until r is done and returns its status, setting rg_last_error() from it. Meanwhile, when
 * nothing runs, runs the queue's head on this thread (host requests only), up to r. */
RG_NODISCARD rg_status rg_comm_req_finish(rg_comm_req *r);

/* ---- comm.c ---- */
/* rg_comm_allreduce_async; `waited` as in rg_comm_submit (rg_ddp_wait's own launches). */
RG_NODISCARD rg_status rg_comm_allreduce_launch(rg_comm *c, void *buf, int64_t count,
                                                rg_comm_dtype dt, rg_reduce_op op, bool waited,
                                                rg_comm_req **req);
/* rg_comm_reduce_scatter_async; `waited` as above (rg_zero1_step's own launches). */
RG_NODISCARD rg_status rg_comm_reduce_scatter_launch(rg_comm *c, const void *send, void *recv,
                                                     int64_t count, rg_comm_dtype dt,
                                                     rg_reduce_op op, bool waited,
                                                     rg_comm_req **req);
/* Collective: closes c (a joined request) and frees it; returns the close's status. */
RG_NODISCARD rg_status rg_comm_close(rg_comm *c);

/* ---- join.c ---- */
/* Before a collective: every rank checks in with rank 0, which checks that they called the same
 * collective and names the late ranks. RG_OK, RG_EMISMATCH or RG_ETIMEDOUT. */
RG_NODISCARD rg_status rg_comm_join(rg_comm *c, const rg_comm_req *r);
void rg_comm_join_free(rg_comm *c);
/* After a timeout: moves c's join buffers, which MPI may still touch, to a list kept until exit. */
void rg_comm_join_abandon(rg_comm *c);
/* Writes what is waiting, for whom and for how long into buf (one line). */
typedef void (*rg_describe_fn)(rg_comm *c, void *ctx, double waited_s, char *buf, size_t cap);
/* *done = whether the awaited thing has happened; a status other than RG_OK ends the wait. */
typedef rg_status (*rg_poll_fn)(rg_comm *c, void *ctx, bool *done);
/* Called once when a wait gives up, to let go of what is still in flight. */
typedef void (*rg_give_up_fn)(rg_comm *c, void *ctx);
/* Calls test(c, ctx) until it says done, sleeping politely between polls. Every stall_seconds it
 * reports the line that describe(c, dctx) writes; after stall_abort_seconds it calls give_up
 * (if not NULL) and returns RG_ETIMEDOUT with that line as the error. */
RG_NODISCARD rg_status rg_comm_poll(rg_comm *c, rg_poll_fn test, rg_give_up_fn give_up, void *ctx,
                       rg_describe_fn describe, void *dctx);
/* The watchdog of the mpi backend's blocking collectives (mpi_watchdog.c). _new returns NULL,
 * and the others do nothing with NULL, when the stall check is off or the comm has one rank. */
typedef struct rg_mpi_watch rg_mpi_watch;
rg_mpi_watch *rg_mpi_watch_new(rg_comm *c);
void rg_mpi_watch_free(rg_mpi_watch *w);
void rg_mpi_watch_begin(rg_mpi_watch *w, const char *call, int64_t count);
void rg_mpi_watch_end(rg_mpi_watch *w);

/* rg_comm_poll for n MPI requests, which are cancelled on giving up. */
RG_NODISCARD
rg_status rg_comm_mpi_wait(rg_comm *c, int n, MPI_Request *reqs, rg_describe_fn describe,
                           void *ctx);
/* Reports a stall through the dist's policy (on_stall, or a line on stderr). Any thread. */
void rg_comm_stall_report(const rg_comm *c, const char *msg);

/* ---- comm_device.c (cuda/comm_device.c with CUDA, comm_device_nocuda.c without) ----
 * Requests whose buffers are GPU memory, and buffers on the side a backend cannot use. */
typedef rg_status (*rg_dispatch_fn)(rg_comm *c, const rg_coll *a);
/* On the caller's thread as r is queued: sets r->device and, for GPU buffers, records
 * r->ready_ev on that device's compute stream. Stops (RG_CHECK) when send and recv are on
 * different sides. */
void rg_comm_dev_submit(rg_comm_req *r);
/* On the thread running r (the comm thread if r has GPU data or c is a device backend): runs
 * r->coll through run, ordered on the device after r->ready_ev, or with its buffers copied to
 * the side the backend works on (and the results copied back). */
RG_NODISCARD rg_status rg_comm_dev_run(rg_comm *c, rg_comm_req *r, rg_dispatch_fn run);
/* On the waiting thread once r is done: the compute stream of r's device waits for the
 * collective (never the host); r's events are released. */
void rg_comm_dev_finish(rg_comm_req *r);
/* On the comm thread: waits until the work queued so far on c->device's comm stream has run,
 * polling c->ops->check, with stall reports and the stall timeout. `what` names it. */
RG_NODISCARD rg_status rg_comm_dev_sync(rg_comm *c, const char *what);

/* ---- comm_mpi.c: shared by the host backends ---- */
MPI_Datatype rg_comm_mpi_type(rg_comm_dtype dt);
/* Whether the mpi backend may run large allreduces on the ring (RG_MPI_RING is not "0"). */
bool rg_comm_mpi_ring_enabled(void);
/* Whether the mpi comm c runs a collective of this kind over `bytes` (a reduce-scatter's whole
 * input) on the ring rather than MPI's call (comm_mpi.c says when). Not collective. */
bool rg_comm_mpi_takes_ring(const rg_comm *c, rg_coll_kind kind, int64_t bytes);
RG_NODISCARD rg_status rg_comm_mpi_barrier(rg_comm *c);
RG_NODISCARD
rg_status rg_comm_mpi_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag);
RG_NODISCARD
rg_status rg_comm_mpi_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag);

/* ---- comm_ring.c: the ring, which the mpi backend also runs (large allreduces; comm_mpi.c
 * says why) ---- */
/* Scratch a ring keeps from call to call: the ring backend's state, and a part of the mpi
 * backend's. Zero-initialised is empty. */
typedef struct {
    char *scratch; /* two segments: where received segments land before they are added */
    size_t scratch_bytes;
    char *work; /* reduce-scatter's copy of its const input */
    size_t work_bytes;
} rg_ring_scratch;
RG_NODISCARD rg_status rg_comm_ring_allreduce(rg_comm *c, rg_ring_scratch *st, void *buf,
                                              int64_t count, rg_comm_dtype dt, rg_reduce_op op);
/* recv (count) = block `rank` of the sum of every rank's send (size * count). */
RG_NODISCARD rg_status rg_comm_ring_reduce_scatter(rg_comm *c, rg_ring_scratch *st,
                                                   const void *send, void *recv, int64_t count,
                                                   rg_comm_dtype dt, rg_reduce_op op);
void rg_ring_scratch_free(rg_ring_scratch *st);

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
