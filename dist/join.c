/* join.c — before each collective, every rank checks in with rank 0. This turns the two classic
 * ways a data-parallel job hangs into messages:
 *
 *   - a late rank (stuck in I/O, a deadlock, a slow host): after stall_seconds rank 0 names the
 *     ranks that have not joined collective #k, and repeats that every stall_seconds; after
 *     stall_abort_seconds every waiting rank gives up with RG_ETIMEDOUT;
 *   - a mismatched call (one rank in allreduce, another in broadcast, or one that has already
 *     begun to shut down): rank 0 compares what each rank announced, and every rank gets
 *     RG_EMISMATCH naming both calls, instead of a collective that never completes.
 *
 * The protocol, on the comm's own `control` communicator so it never matches data messages:
 *
 *     rank r > 0                               rank 0
 *     Isend(what I call, #k) ─────────────▶    Irecv from every rank, wait (stall reports)
 *     Irecv(go) ◀─────────────────────────     compare; Isend(go: OK or who differs) to each
 *
 * Only then does the backend run the collective itself, with MPI's fast blocking calls: every rank
 * has arrived, so it cannot stall for long. (Open MPI's nonblocking collectives, which could be
 * polled with a timeout instead, are 1.5-2.5x slower for large buffers.) The price is a gather
 * and a scatter of 100-byte messages per collective, a few microseconds on one host; a stall
 * time < 0 turns the whole check off.
 *
 * The waits poll politely: on a waiting thread (not the comm thread, whose core the compute may
 * need), for the first HOT_NS they spin on the core (a yield hands it to any
 * other runnable process, a compiler on a busy host, and then the answer waits for that process's
 * time slice: with yields from the start a joined barrier on 2 ranks took 16-21 us, with 20 us of
 * plain spinning first 8-13 us, 5-7 us with no join; load ~2.7), then spin yielding the core for
 * up to SPIN_NS, since an answer is often microseconds away (a ring segment on shared memory
 * arrives within that: with a 50 us spin the ring lost a fifth of its bandwidth at 1 MiB), then
 * sleep in steps of at most 1/8 of the time waited so far, so a rank waiting for a slow peer or a
 * slow link leaves the CPU to the threads that compute, yet answers within ~12% of the wait. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/comm_impl.h"
#include "ringgrad/timeline.h"

enum { TAG_JOIN = 1, TAG_GO = 2 };

/* What a rank announces: which collective it is in, with which arguments. All int64 so that it
 * travels as MPI_INT64_T. Fields a kind does not use are 0. */
typedef struct {
    int64_t seq, kind, count, dtype, op, root;
} join_msg;

/* Rank 0's answer: bad_rank < 0 to go ahead, else the first rank whose call differs. */
typedef struct {
    int64_t bad_rank;
    join_msg root, bad;
} join_go;

#define MSG_LEN ((int)(sizeof(join_msg) / sizeof(int64_t)))
#define GO_LEN ((int)(sizeof(join_go) / sizeof(int64_t)))

/* Lives as long as the comm, not on the stack: after a timeout MPI may still write into it. */
struct rg_join {
    join_msg me;
    join_go go;
    join_msg *got;     /* rank 0: each rank's announcement */
    MPI_Request *reqs; /* max(2, size - 1) */
    rg_join *next;     /* in `abandoned` */
};

/* Join buffers of comms that timed out, kept until exit (the running request's thread only). */
static rg_join *abandoned;

/* ---- naming calls ---- */

static const char *const dtype_names[] = {"f32", "f16", "i32", "i64", "u8"};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == RG_COMM_DTYPE_COUNT, "dtype names");
static const char *const op_names[] = {"sum", "avg"};
_Static_assert(sizeof op_names / sizeof *op_names == RG_REDUCE_OP_COUNT, "op names");

/* "allreduce(1024 x f32, sum)" */
static void format_call(const join_msg *m, char *buf, size_t cap) {
    rg_coll_kind k = (rg_coll_kind)m->kind;
    const char *dt = (uint64_t)m->dtype < RG_COMM_DTYPE_COUNT ? dtype_names[m->dtype] : "?";
    const char *op = (uint64_t)m->op < RG_REDUCE_OP_COUNT ? op_names[m->op] : "?";
    if (k == RG_COLL_ALLREDUCE || k == RG_COLL_REDUCE_SCATTER)
        snprintf(buf, cap, "%s(%lld x %s, %s)", rg_coll_kind_name(k), (long long)m->count, dt, op);
    else if (k == RG_COLL_BROADCAST)
        snprintf(buf, cap, "%s(%lld x %s, root %lld)", rg_coll_kind_name(k), (long long)m->count,
                 dt, (long long)m->root);
    else if (k == RG_COLL_ALLGATHER)
        snprintf(buf, cap, "%s(%lld x %s)", rg_coll_kind_name(k), (long long)m->count, dt);
    else
        snprintf(buf, cap, "%s", rg_coll_kind_name(k));
}

static bool same_call(const join_msg *a, const join_msg *b) {
    return a->seq == b->seq && a->kind == b->kind && a->count == b->count && a->dtype == b->dtype &&
           a->op == b->op && a->root == b->root;
}

RG_NODISCARD static rg_status mismatch_error(const join_go *go) {
    char want[128], got[128];
    format_call(&go->root, want, sizeof want);
    format_call(&go->bad, got, sizeof got);
    return rg_error(RG_EMISMATCH,
                    "collective #%lld differs across ranks: rank 0 called %s but rank %lld called "
                    "%s (every rank must make the same collective calls in the same order)",
                    (long long)go->root.seq, want, (long long)go->bad_rank, got);
}

/* ---- polite waiting with stall reports ---- */

#define HOT_NS (20 * 1000)
#define SPIN_NS (200 * 1000)

static void pause_after(int64_t waited_ns) {
    /* A waiter keeps its core (a yield may hand it to another process): it has nothing else to
     * do. The comm thread yields from the start: it runs beside this rank's compute. */
    if (waited_ns < HOT_NS && !rg_comm_on_comm_thread()) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    if (waited_ns < SPIN_NS) {
        sched_yield();
        return;
    }
    int64_t ns = waited_ns / 8 < 1000 * 1000 ? waited_ns / 8 : 1000 * 1000;
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

static void report(const rg_stall_policy *p, const char *msg) {
    if (p->fn) {
        p->fn(msg, p->ctx);
    } else {
        fprintf(stderr, "ringgrad: stall: %s\n", msg);
        fflush(stderr);
    }
}

/* Gives up on reqs: a cancelled receive never writes, and a freed send finishes or dies with
 * the job. MPI cannot cancel Open MPI's sends, so waiting for them could hang. */
static void abandon(int n, MPI_Request *reqs) {
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&reqs[i]);
        MPI_Request_free(&reqs[i]);
    }
}

void rg_comm_stall_report(const rg_comm *c, const char *msg) {
    report(&c->dist->stall, msg);
}

rg_status rg_comm_poll(rg_comm *c, rg_poll_fn test, rg_give_up_fn give_up, void *ctx,
                       rg_describe_fn describe, void *dctx) {
    const rg_stall_policy *p = &c->dist->stall;
    const int64_t t0 = rg_trace_now(), warn = (int64_t)(p->warn_s * 1e9);
    int64_t next_warn = t0 + warn;
    for (;;) {
        bool done = false;
        RG_TRY(test(c, ctx, &done));
        if (done) return RG_OK;
        int64_t now = rg_trace_now(), waited = now - t0;
        char msg[1024];
        if (warn > 0 && now >= next_warn) {
            describe(c, dctx, waited * 1e-9, msg, sizeof msg);
            report(p, msg);
            next_warn += warn;
        }
        if (warn > 0 && p->abort_s > 0 && waited >= (int64_t)(p->abort_s * 1e9)) {
            describe(c, dctx, waited * 1e-9, msg, sizeof msg);
            if (give_up) give_up(c, ctx);
            return rg_error(RG_ETIMEDOUT, "%s; gave up after %.0f s (stall_abort_seconds)", msg,
                            p->abort_s);
        }
        pause_after(waited);
    }
}

typedef struct {
    int n;
    MPI_Request *reqs;
} mpi_reqs;

RG_NODISCARD static rg_status test_mpi(rg_comm *c, void *ctx, bool *done) {
    mpi_reqs *m = ctx;
    int flag;
    MPI_Testall(m->n, m->reqs, &flag, MPI_STATUSES_IGNORE);
    *done = flag;
    return RG_OK;
}

static void abandon_mpi(rg_comm *c, void *ctx) {
    mpi_reqs *m = ctx;
    abandon(m->n, m->reqs);
}

rg_status rg_comm_mpi_wait(rg_comm *c, int n, MPI_Request *reqs, rg_describe_fn describe,
                           void *ctx) {
    return rg_comm_poll(c, test_mpi, abandon_mpi, &(mpi_reqs){n, reqs}, describe, ctx);
}

/* ---- the join ---- */

static void describe_root(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    rg_join *j = ctx;
    char call[128];
    format_call(&j->me, call, sizeof call);
    int n = snprintf(buf, cap, "collective #%lld %s has waited %.1f s on rank 0: not joined yet:",
                     (long long)j->me.seq, call, waited);
    int missing = 0;
    for (int r = 1; r < c->size && n > 0 && (size_t)n < cap; r++) {
        int arrived = 0;
        MPI_Request_get_status(j->reqs[r - 1], &arrived, MPI_STATUS_IGNORE);
        if (!arrived) n += snprintf(buf + n, cap - n, "%s rank %d", missing++ ? "," : "", r);
    }
}

static void describe_member(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    rg_join *j = ctx;
    char call[128];
    format_call(&j->me, call, sizeof call);
    snprintf(buf, cap,
             "collective #%lld %s has waited %.1f s on rank %d for rank 0 to see every rank join "
             "(rank 0 names the late ranks; if it names none, rank 0 itself is late)",
             (long long)j->me.seq, call, waited, c->rank);
}

RG_NODISCARD static rg_status join_root(rg_comm *c, rg_join *j) {
    int n = c->size - 1;
    for (int r = 1; r < c->size; r++)
        MPI_Irecv(&j->got[r], MSG_LEN, MPI_INT64_T, r, TAG_JOIN, c->control, &j->reqs[r - 1]);
    RG_TRY(rg_comm_mpi_wait(c, n, j->reqs, describe_root, j));
    j->go = (join_go){.bad_rank = -1, .root = j->me};
    for (int r = 1; r < c->size && j->go.bad_rank < 0; r++) {
        if (!same_call(&j->got[r], &j->me)) j->go = (join_go){r, j->me, j->got[r]};
    }
    for (int r = 1; r < c->size; r++)
        MPI_Isend(&j->go, GO_LEN, MPI_INT64_T, r, TAG_GO, c->control, &j->reqs[r - 1]);
    MPI_Waitall(n, j->reqs, MPI_STATUSES_IGNORE); /* small messages: they leave at once */
    return j->go.bad_rank < 0 ? RG_OK : mismatch_error(&j->go);
}

RG_NODISCARD static rg_status join_member(rg_comm *c, rg_join *j) {
    MPI_Isend(&j->me, MSG_LEN, MPI_INT64_T, 0, TAG_JOIN, c->control, &j->reqs[0]);
    MPI_Irecv(&j->go, GO_LEN, MPI_INT64_T, 0, TAG_GO, c->control, &j->reqs[1]);
    RG_TRY(rg_comm_mpi_wait(c, 2, j->reqs, describe_member, j));
    return j->go.bad_rank < 0 ? RG_OK : mismatch_error(&j->go);
}

static rg_join *join_state(rg_comm *c) {
    if (c->join) return c->join;
    rg_join *j = calloc(1, sizeof *j);
    int nreq = c->size - 1 > 2 ? c->size - 1 : 2;
    if (j) j->got = calloc((size_t)c->size, sizeof *j->got);
    if (j) j->reqs = calloc((size_t)nreq, sizeof *j->reqs);
    if (!j || !j->got || !j->reqs) {
        if (j) free(j->got), free(j->reqs);
        free(j);
        return NULL;
    }
    return c->join = j;
}

rg_status rg_comm_join(rg_comm *c, const rg_comm_req *r) {
    if (c->size == 1 || c->dist->stall.warn_s <= 0) return RG_OK;
    rg_join *j = join_state(c);
    if (!j)
        return rg_error(RG_ENOMEM, "collective #%llu: out of memory", (unsigned long long)r->seq);
    const rg_coll *a = &r->coll; /* fields a kind does not use are 0 on every rank */
    j->me = (join_msg){(int64_t)r->seq, a->kind, a->count, a->dt, a->op, a->peer};
    return c->rank == 0 ? join_root(c, j) : join_member(c, j);
}

void rg_comm_join_free(rg_comm *c) {
    if (!c->join) return;
    free(c->join->got);
    free(c->join->reqs);
    free(c->join);
    c->join = NULL;
}

void rg_comm_join_abandon(rg_comm *c) {
    if (!c->join) return;
    c->join->next = abandoned;
    abandoned = c->join;
    c->join = NULL;
}
