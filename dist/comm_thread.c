/* comm_thread.c — the comm thread: one thread per process runs every request, in the order the
 * requests were made.
 *
 * This is Horovod's background thread in miniature, and it teaches three things:
 *   - Order. Every rank issues its collectives in the same program order and one thread runs
 *     them first-in first-out, so every rank runs them in the same order too. That identical
 *     order is what keeps ranks from waiting on each other in different collectives.
 *   - Overlap. Backward only queues a bucket's allreduce and goes on computing; the reduction
 *     runs here meanwhile.
 *   - Politeness. With nothing queued the thread sleeps on a condition variable; on a machine
 *     with few cores a spinning comm thread would steal the core that computes.
 * Requests run one at a time, in order, mostly here; a thread waiting for a request may run the
 * queue's head itself (below). MPI is called only by whichever thread runs the request of the
 * moment, never by two at once, so MPI_THREAD_SERIALIZED is enough. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "dist/comm_impl.h"
#include "ringgrad/timeline.h"

/* ---- running one request ---- */

RG_NODISCARD static rg_status open_comm(rg_comm *c) {
    if (c->dist->launched && c->split_color >= 0) { /* rg_comm_split: a group of the world */
        MPI_Comm_split(MPI_COMM_WORLD, c->split_color, c->split_key, &c->mpi);
        MPI_Comm_dup(c->mpi, &c->control);
        MPI_Comm_rank(c->mpi, &c->rank);
        MPI_Comm_size(c->mpi, &c->size);
    } else if (c->dist->launched) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
        MPI_Comm_dup(MPI_COMM_WORLD, &c->control);
    }
    rg_status s = c->ops->init(c);
    if (s != RG_OK && c->mpi != MPI_COMM_NULL) {
        MPI_Comm_free(&c->mpi);
        MPI_Comm_free(&c->control);
    }
    return s;
}

static void close_comm(rg_comm *c) {
    c->ops->deinit(c);
    if (c->broken == RG_ETIMEDOUT) {
        /* A peer never came: MPI may still touch the join buffers, and freeing the MPI
         * communicators could wait for that peer. Keep both; rg_dist_finalize aborts the job. */
        rg_comm_join_abandon(c);
        return;
    }
    rg_comm_join_free(c);
    if (c->mpi != MPI_COMM_NULL) {
        MPI_Comm_free(&c->mpi);
        MPI_Comm_free(&c->control);
    }
}

RG_NODISCARD static rg_status dispatch(rg_comm *c, const rg_coll *a) {
    const rg_comm_ops *o = c->ops;
    switch (a->kind) {
    case RG_COLL_ALLREDUCE:
        return o->allreduce(c, a->recv, a->count, a->dt, a->op);
    case RG_COLL_BROADCAST:
        return o->broadcast(c, a->recv, a->count, a->dt, a->peer);
    case RG_COLL_ALLGATHER:
        return o->allgather(c, a->send, a->recv, a->count, a->dt);
    case RG_COLL_REDUCE_SCATTER:
        return o->reduce_scatter(c, a->send, a->recv, a->count, a->dt, a->op);
    case RG_COLL_BARRIER:
        return o->barrier(c);
    case RG_COLL_SEND:
        return o->send(c, a->send, a->count, a->dt, a->peer, a->tag);
    case RG_COLL_RECV:
        return o->recv(c, a->recv, a->count, a->dt, a->peer, a->tag);
    case RG_COLL_OPEN:
        return open_comm(c);
    case RG_COLL_CLOSE:
        close_comm(c);
        return RG_OK;
    default:
        return rg_error(RG_EINVAL, "comm thread: bad request kind %d", (int)a->kind);
    }
}

/* Bytes this rank contributes, for the timeline. */
static int64_t request_bytes(const rg_comm_req *r) {
    int64_t n = r->coll.count;
    if (r->coll.kind == RG_COLL_REDUCE_SCATTER) n *= r->comm->size;
    return r->coll.kind >= RG_COLL_OPEN ? 0 : n * (int64_t)rg_comm_dtype_size(r->coll.dt);
}

static void record(const rg_comm_req *r, uint64_t id) {
    if (!rg_trace_enabled()) return;
    const char *name = rg_coll_kind_name(r->coll.kind);
    rg_trace_arg args[2] = {{"bytes", request_bytes(r)}, {"seq", (int64_t)r->seq}};
    rg_trace_async(name, "comm.queue", id, r->t_queued, r->t_started, 1, args);
    rg_trace_complete(name, "comm", r->t_started, r->t_ended, 2, args);
    if (r->t_joined > r->t_started)
        rg_trace_complete("wait for ranks", "comm.join", r->t_started, r->t_joined, 1, args + 1);
}

/* After a timeout or a mismatch the ranks no longer agree on what comes next: every later
 * request on c fails at once with the first error. */
static void mark_broken(rg_comm *c, rg_status s) {
    if (c->broken != RG_OK) return;
    c->broken = s;
    snprintf(c->broken_why, sizeof c->broken_why, "%s", rg_last_error());
}

/* Runs r: check in with the other ranks (collectives only), then the backend's call. */
RG_NODISCARD static rg_status run_checked(rg_comm_req *r) {
    rg_comm *c = r->comm;
    rg_coll_kind kind = r->coll.kind;
    rg_status s = RG_OK;
    if (c->broken != RG_OK) {
        s = rg_error(c->broken, "%s: communicator broken earlier: %s", rg_coll_kind_name(kind),
                     c->broken_why);
    } else if (rg_coll_is_collective(kind) && kind != RG_COLL_OPEN) {
        r->seq = ++c->seq;
        s = rg_comm_join(c, r);
        r->t_joined = rg_trace_now();
    }
    c->current = r;
    if (s == RG_OK) s = rg_comm_dev_run(c, r, dispatch);
    c->current = NULL;
    if (s == RG_ETIMEDOUT || s == RG_EMISMATCH) mark_broken(c, s);
    if (s != RG_OK && kind == RG_COLL_CLOSE) close_comm(c); /* still free what can be freed */
    return s;
}

static void run(rg_comm_req *r, uint64_t id) {
    r->t_started = rg_trace_now();
    r->t_joined = r->t_started;
    rg_status s = run_checked(r);
    r->t_ended = rg_trace_now();
    r->status = s;
    if (s != RG_OK) snprintf(r->error, sizeof r->error, "%s", rg_last_error());
    record(r, id);
}

/* ---- the queue ----
 *
 * One request runs at a time (d->running), taken from the head of the queue, so they run in the
 * order they were queued. Usually the comm thread runs them; but a thread that waits for a request
 * runs the queue's head itself when nobody runs anything, since it would only sleep meanwhile. A
 * blocking call on an empty queue so runs at once on the caller's thread without waking the comm
 * thread, and its caller is not woken either: two wake-ups of a sleeping thread were a fixed
 * ~15-25 us per call on this 2-core VM, a tenth of a 1 MiB allreduce. Async requests still wake
 * the comm thread, which runs them while the caller computes (the overlap).
 *
 * Only host work moves between threads: a request with GPU buffers, or on a device backend
 * (nccl), uses the comm thread's current CUDA device and its streams, so it always runs there. */

/* Whether a thread other than the comm thread may run r. */
static bool runs_anywhere(const rg_comm_req *r) {
    return r->device < 0 && !r->comm->ops->device_buffers;
}

/* Runs the head of the queue on the calling thread. Called with d->mu held, a head there and
 * nothing running; returns with d->mu held, having released it while the request ran. */
static void run_head(rg_dist *d) {
    rg_comm_req *r = d->head;
    d->head = r->next;
    if (!d->head) d->tail = NULL;
    uint64_t id = ++d->requests;
    d->running = true;
    pthread_mutex_unlock(&d->mu);

    run(r, id);

    pthread_mutex_lock(&d->mu);
    r->done = true;
    d->running = false;
    pthread_mutex_unlock(&d->mu);
    /* After unlocking, so that a waiter does not wake into a held lock. r may be gone now. A
     * broadcast with nobody waiting costs no system call. */
    pthread_cond_broadcast(&d->done_cv);
    pthread_mutex_lock(&d->mu);
}

static _Thread_local bool on_comm_thread;

bool rg_comm_on_comm_thread(void) {
    return on_comm_thread;
}

static void *thread_main(void *arg) {
    rg_dist *d = arg;
    on_comm_thread = true;
    rg_trace_name_thread("comm");
    /* Linux rounds a sleep up by the thread's timer slack (50 us by default); the polls in join.c
     * sleep in steps of a few microseconds, so ask for 1 us. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&d->mu);
    d->thread_named = true;
    pthread_cond_broadcast(&d->done_cv);
    for (;;) {
        while (!(d->head && !d->running) && !(d->stopping && !d->head))
            pthread_cond_wait(&d->work_cv, &d->mu);
        if (!d->head) break; /* stopping, and the queue has drained */
        run_head(d);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

rg_status rg_comm_thread_start(rg_dist *d) {
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work_cv, NULL);
    pthread_cond_init(&d->done_cv, NULL);
    int e = pthread_create(&d->thread, NULL, thread_main, d);
    if (e == 0) {
        d->thread_started = true;
        /* Wait until the thread has named itself: a timeline written before then (a loaded
         * machine can keep a new thread off the CPU for a while) would lack the comm thread. */
        pthread_mutex_lock(&d->mu);
        while (!d->thread_named) pthread_cond_wait(&d->done_cv, &d->mu);
        pthread_mutex_unlock(&d->mu);
        return RG_OK;
    }
    pthread_cond_destroy(&d->done_cv);
    pthread_cond_destroy(&d->work_cv);
    pthread_mutex_destroy(&d->mu);
    return rg_error(RG_ENOMEM, "rg_dist_init: cannot start the comm thread: %s", strerror(e));
}

void rg_comm_thread_stop(rg_dist *d) {
    if (!d->thread_started) return;
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    pthread_cond_signal(&d->work_cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    d->thread_started = false;
    pthread_cond_destroy(&d->done_cv);
    pthread_cond_destroy(&d->work_cv);
    pthread_mutex_destroy(&d->mu);
}

void rg_comm_submit(rg_comm_req *r, bool waited) {
    rg_dist *d = r->dist = r->comm->dist;
    r->t_queued = rg_trace_now();
    r->next = NULL;
    rg_comm_dev_submit(r);
    /* A waiter runs what is queued ahead of r, and r, unless the comm thread does: it goes on
     * to the next request without sleeping while the queue is not empty. */
    bool wake = !(waited && runs_anywhere(r));
    pthread_mutex_lock(&d->mu);
    if (d->tail)
        d->tail->next = r;
    else
        d->head = r;
    d->tail = r;
    pthread_mutex_unlock(&d->mu);
    if (wake) pthread_cond_signal(&d->work_cv);
}

rg_status rg_comm_run(rg_comm_req *r) {
    rg_comm_submit(r, true);
    return rg_comm_req_finish(r);
}

/* Whether this thread has asked for a 1 us timer slack, as the comm thread does (thread_main):
 * once, and kept, since two prctl calls per request cost a microsecond. */
static _Thread_local bool precise_sleeps;

rg_status rg_comm_req_finish(rg_comm_req *r) {
    rg_dist *d = r->dist;
    bool helped = false;
    pthread_mutex_lock(&d->mu);
    while (!r->done) {
        if (d->head && !d->running && runs_anywhere(d->head)) {
            if (!precise_sleeps) {
                prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
                precise_sleeps = true;
            }
            run_head(d); /* requests before r first: in order */
            helped = true;
        } else {
            /* A head that only the comm thread may run: make sure that it is awake. */
            if (d->head && !d->running) pthread_cond_signal(&d->work_cv);
            pthread_cond_wait(&d->done_cv, &d->mu);
        }
    }
    /* Requests queued after r go on on the comm thread, which may be asleep: we ran r. */
    bool wake = helped && d->head && !d->running;
    pthread_mutex_unlock(&d->mu);
    if (wake) pthread_cond_signal(&d->work_cv);
    rg_comm_dev_finish(r);
    if (r->status != RG_OK) return rg_error(r->status, "%s", r->error);
    return RG_OK;
}
