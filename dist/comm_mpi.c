/* comm_mpi.c — the mpi backend: each collective is the MPI call of the same name on host buffers,
 * so Open MPI picks the algorithm (tree, recursive doubling, ring, ...) by size and world.
 *
 * Three things MPI does not do for us:
 *   - float16: MPI has no half type, so F16 travels as MPI_UINT16_T with a user-defined sum that
 *     adds in float32 and rounds once per hop (host_reduce.c);
 *   - AVG: MPI has no average; it is SUM, then a scale by 1/size;
 *   - counts: MPI counts are int; allreduce and broadcast are split into chunks of 2^30
 *     elements, the others refuse more than INT_MAX elements.
 * Reduce-scatter calls MPI_Reduce_scatter with equal counts, not MPI_Reduce_scatter_block, which
 * means the same: Open MPI 4.1 runs the block form as a reduce to one rank and a scatter, 2.8x
 * the time of the vector form on 2 hosts at 1 Gbit/s, 3.7x on 3 and 4.4x on 4 at 16 MiB, and
 * 2.0-2.9x on shared memory (bench/collectives_bench.c; docs/PERFORMANCE.md, twenty-first
 * session).
 * Barrier and the point-to-point calls here serve the ring backend too.
 *
 * Large allreduces (RING_MIN_BYTES and more: every DDP bucket) do not go to MPI_Allreduce but to
 * comm_ring.c's ring, over this comm's MPI point-to-point, for two reasons measured on simulated
 * hosts (docs/PERFORMANCE.md, twenty-first session):
 *   - on a world size that is not a power of two (3, 5, 6, ... ranks) Open MPI 4.1 runs them by
 *     recursive doubling or Rabenseifner's algorithm, which fold the extra ranks' whole buffers
 *     into partners first and send them the result at the end: on 3 hosts at 1 Gbit/s 2.2x the
 *     ring's time (1.3-1.5x at 10 Gbit/s and on shared memory);
 *   - at any size, MPI_Allreduce spins on the comm thread while it waits for the network, and
 *     takes that core from backward, where the ring's waits sleep (comm_ring.c, Waiting): with
 *     the microbenchmark's back-to-back calls and nothing to compute, MPI_Allreduce moves its
 *     bytes up to a fifth faster on 2 hosts (the ring's sleeps: with waits that never sleep the
 *     ring matches it), but training with DDP, whose buckets overlap backward, ran 1.07-1.10x
 *     faster on the ring on 2 hosts at 1 Gbit/s and 1.12-1.30x on 4 (1.07-1.08x and 1.04-1.07x
 *     at 10 Gbit/s), the same on one host.
 * Smaller allreduces stay with MPI_Allreduce, whose tree has a fraction of the ring's latency.
 * Each element is then summed in the ring's order, the same on every rank (on 2 ranks that is
 * MPI's result, bit for bit: a + b).
 * Large reduce-scatters (zero1's buckets, which overlap backward too) take the ring for the second
 * reason, but only when the job spans more than one host (twenty-second session): zero1 on 2
 * hosts at 1 Gbit/s ran 1.08x faster (1.05-1.08x on 3), and 2-3% slower on one host, where
 * MPI_Reduce_scatter's shared-memory path beats the ring; MPI_Reduce_scatter otherwise.
 * RG_MPI_RING=0 keeps MPI's calls for every size (ranks must agree: rg_dist_init checks). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "dist/comm_impl.h"

#define CHUNK ((int64_t)1 << 30)
#define RING_MIN_BYTES ((int64_t)1 << 20) /* DDP's first bucket */

typedef struct {
    MPI_Op f16_sum;
    int *counts;             /* reduce-scatter's recvcounts, one per rank */
    bool ring;               /* large allreduces take the ring (above) */
    bool ring_rs;            /* and large reduce-scatters, when the job spans hosts */
    rg_ring_scratch scratch; /* the ring's */
    rg_mpi_watch *watch;     /* of the blocking calls below (mpi_watchdog.c); NULL: unwatched */
} mpi_state;

/* A blocking MPI call, watched: CALL runs between the watch's begin and end. */
#define WATCHED(c, name, count, CALL)                                                              \
    do {                                                                                           \
        rg_mpi_watch *w_ = ((mpi_state *)(c)->impl)->watch;                                        \
        rg_mpi_watch_begin(w_, name, count);                                                       \
        CALL;                                                                                      \
        rg_mpi_watch_end(w_);                                                                      \
    } while (0)

bool rg_comm_mpi_ring_enabled(void) {
    return rg_env_switch("RG_MPI_RING", true);
}

MPI_Datatype rg_comm_mpi_type(rg_comm_dtype dt) {
    switch (dt) {
    case RG_COMM_F32:
        return MPI_FLOAT;
    case RG_COMM_F16:
        return MPI_UINT16_T;
    case RG_COMM_I32:
        return MPI_INT32_T;
    case RG_COMM_I64:
        return MPI_INT64_T;
    case RG_COMM_U8:
        return MPI_UINT8_T;
    default:
        RG_CHECK(0, "comm: bad dtype %d", (int)dt);
    }
}

/* MPI_User_function: inout[i] = in[i] + inout[i], for float16. */
static void f16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    rg_host_reduce_sum(inout, in, *len, RG_COMM_F16);
}

static MPI_Op sum_op(const rg_comm *c, rg_comm_dtype dt) {
    return dt == RG_COMM_F16 ? ((mpi_state *)c->impl)->f16_sum : MPI_SUM;
}

RG_NODISCARD static rg_status mpi_init(rg_comm *c) {
    mpi_state *st = calloc(1, sizeof *st);
    int *counts = malloc((size_t)c->size * sizeof *counts);
    if (!st || !counts) {
        free(st);
        free(counts);
        return rg_error(RG_ENOMEM, "comm backend mpi: out of memory");
    }
    st->counts = counts;
    MPI_Op_create(f16_sum, 1, &st->f16_sum);
    st->ring = rg_comm_mpi_ring_enabled() && c->size >= 2;
    /* the same answer on every rank: each has local_size < size iff some rank is elsewhere */
    st->ring_rs = st->ring && c->dist->local_size < c->dist->size;
    st->watch = rg_mpi_watch_new(c);
    c->impl = st;
    return RG_OK;
}

static void mpi_deinit(rg_comm *c) {
    mpi_state *st = c->impl;
    if (!st) return;
    rg_mpi_watch_free(st->watch);
    MPI_Op_free(&st->f16_sum);
    free(st->counts);
    rg_ring_scratch_free(&st->scratch);
    free(st);
    c->impl = NULL;
}

RG_NODISCARD static rg_status too_large(const char *what, int64_t count) {
    return rg_error(RG_EINVAL, "%s: %lld elements exceed MPI's int count", what, (long long)count);
}

bool rg_comm_mpi_takes_ring(const rg_comm *c, rg_coll_kind kind, int64_t bytes) {
    const mpi_state *st = c->impl;
    if (bytes < RING_MIN_BYTES) return false;
    return kind == RG_COLL_ALLREDUCE ? st->ring : kind == RG_COLL_REDUCE_SCATTER && st->ring_rs;
}

RG_NODISCARD static rg_status mpi_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                               rg_reduce_op op) {
    size_t esz = rg_comm_dtype_size(dt);
    mpi_state *st = c->impl;
    if (rg_comm_mpi_takes_ring(c, RG_COLL_ALLREDUCE, count * (int64_t)esz))
        return rg_comm_ring_allreduce(c, &st->scratch, buf, count, dt, op);
    for (int64_t off = 0; off < count; off += CHUNK) {
        int n = (int)(count - off < CHUNK ? count - off : CHUNK);
        WATCHED(c, "MPI_Allreduce", n,
                MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * esz, n, rg_comm_mpi_type(dt),
                              sum_op(c, dt), c->mpi));
    }
    if (op == RG_REDUCE_AVG) rg_host_scale(buf, count, dt, 1.0 / c->size);
    return RG_OK;
}

RG_NODISCARD
static rg_status mpi_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root) {
    size_t esz = rg_comm_dtype_size(dt);
    for (int64_t off = 0; off < count; off += CHUNK) {
        int n = (int)(count - off < CHUNK ? count - off : CHUNK);
        WATCHED(c, "MPI_Bcast", n,
                MPI_Bcast((char *)buf + off * esz, n, rg_comm_mpi_type(dt), root, c->mpi));
    }
    return RG_OK;
}

RG_NODISCARD static rg_status mpi_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                               rg_comm_dtype dt) {
    if (count > INT_MAX) return too_large("rg_comm_allgather", count);
    const char *mine = (const char *)recv + (size_t)c->rank * count * rg_comm_dtype_size(dt);
    MPI_Datatype t = rg_comm_mpi_type(dt);
    WATCHED(c, "MPI_Allgather", count,
            MPI_Allgather(send == mine ? MPI_IN_PLACE : send, (int)count, t, recv, (int)count, t,
                          c->mpi));
    return RG_OK;
}

RG_NODISCARD
static rg_status mpi_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                    rg_comm_dtype dt, rg_reduce_op op) {
    mpi_state *st = c->impl;
    if (rg_comm_mpi_takes_ring(c, RG_COLL_REDUCE_SCATTER,
                               count * c->size * (int64_t)rg_comm_dtype_size(dt)))
        return rg_comm_ring_reduce_scatter(c, &st->scratch, send, recv, count, dt, op);
    if (count > INT_MAX) return too_large("rg_comm_reduce_scatter", count);
    int *counts = st->counts;
    for (int r = 0; r < c->size; r++) counts[r] = (int)count;
    WATCHED(c, "MPI_Reduce_scatter", count * c->size,
            MPI_Reduce_scatter(send, recv, counts, rg_comm_mpi_type(dt), sum_op(c, dt), c->mpi));
    if (op == RG_REDUCE_AVG) rg_host_scale(recv, count, dt, 1.0 / c->size);
    return RG_OK;
}

rg_status rg_comm_mpi_barrier(rg_comm *c) {
    MPI_Barrier(c->mpi);
    return RG_OK;
}

/* The mpi backend's own barrier, watched (the ring backend's has no mpi_state to watch it by). */
RG_NODISCARD static rg_status mpi_barrier(rg_comm *c) {
    WATCHED(c, "MPI_Barrier", 0, MPI_Barrier(c->mpi));
    return RG_OK;
}

/* ---- point-to-point, waited on politely with stall reports (join.c) ---- */

typedef struct {
    const char *what;
    int64_t count;
    int peer, tag;
} p2p_info;

static void describe_p2p(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    const p2p_info *p = ctx;
    snprintf(buf, cap, "%s of %lld elements %s rank %d (tag %d) has waited %.1f s on rank %d",
             p->what, (long long)p->count, p->what[0] == 's' ? "to" : "from", p->peer, p->tag,
             waited, c->rank);
}

rg_status rg_comm_mpi_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    if (count > INT_MAX) return too_large("rg_comm_send", count);
    MPI_Request req;
    MPI_Isend(buf, (int)count, rg_comm_mpi_type(dt), peer, tag, c->mpi, &req);
    return rg_comm_mpi_wait(c, 1, &req, describe_p2p, &(p2p_info){"send", count, peer, tag});
}

rg_status rg_comm_mpi_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    if (count > INT_MAX) return too_large("rg_comm_recv", count);
    MPI_Request req;
    MPI_Irecv(buf, (int)count, rg_comm_mpi_type(dt), peer == RG_COMM_ANY_SOURCE ? MPI_ANY_SOURCE : peer,
              tag, c->mpi, &req);
    return rg_comm_mpi_wait(c, 1, &req, describe_p2p, &(p2p_info){"recv", count, peer, tag});
}

const rg_comm_ops rg_comm_mpi_ops = {
    .name = "mpi",
    .init = mpi_init,
    .deinit = mpi_deinit,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .reduce_scatter = mpi_reduce_scatter,
    .barrier = mpi_barrier,
    .send = rg_comm_mpi_send,
    .recv = rg_comm_mpi_recv,
};
