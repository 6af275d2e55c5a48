/* comm_ring.c — ring allreduce, written to be read.
 *
 * The N ranks stand in a ring: each sends only to its right neighbour (rank + 1) and receives
 * only from its left (rank - 1). The buffer is cut into N blocks, and allreduce runs in two
 * phases of N - 1 steps each:
 *
 *   1. reduce-scatter: at every step each rank passes one block to the right and adds the block
 *      arriving from the left into its own copy. A block travels around the ring collecting one
 *      contribution per hop; after N - 1 steps rank r holds the complete sum of block r.
 *   2. allgather: at every step each rank passes a complete block to the right, which keeps it.
 *      After N - 1 steps every rank has every complete block.
 *
 * N = 3, rank r's data a/b/c, blocks 0 1 2. At step s rank r sends block r-s-1 (mod 3):
 *
 *                      block 0        block 1        block 2
 *     start   rank 0   a0             a1             a2
 *             rank 1   b0             b1             b2
 *             rank 2   c0             c1             c2
 *
 *     reduce-scatter, step 0:  0 ─a2─▶ 1   1 ─b0─▶ 2   2 ─c1─▶ 0
 *             rank 0                  a1+c1
 *             rank 1                                a2+b2
 *             rank 2   b0+c0
 *     reduce-scatter, step 1:  0 ─(a1+c1)─▶ 1   1 ─(a2+b2)─▶ 2   2 ─(b0+c0)─▶ 0
 *             rank 0   a0+b0+c0                                    rank r now owns
 *             rank 1                  a1+b1+c1                     block r, complete
 *             rank 2                                a2+b2+c2
 *     allgather, step 0: each rank sends the block it owns;  step 1: the block it just got.
 *
 * Cost. Each rank sends (and receives) 2(N-1) blocks of B/N bytes: 2(N-1)/N * B in all. That
 * stays below 2B however many ranks there are, and no link carries more than that, which is
 * why the ring is bandwidth-optimal (NCCL-tests call B/time the algorithm bandwidth and
 * 2(N-1)/N * B/time the bus bandwidth). The price is 2(N-1) message latencies, so for small
 * buffers a tree (what MPI picks there) is faster.
 *
 * Pipelining. A block travels as up to RING_MAX_SEGS segments. While segment j is being added,
 * segment j+1 is already arriving, so the additions hide behind the transfer.
 *
 * Waiting. Every wait for a segment polls politely (join.c's rg_comm_mpi_wait): it spins for up
 * to 0.2 ms, then sleeps in steps of at most 1/8 of the time waited. On shared memory a segment
 * arrives within that and the wait spins; over a network it takes milliseconds, and the comm thread
 * sleeps instead of spinning in MPI_Wait, leaving its core to backward (the overlap DDP is
 * for; docs/PERFORMANCE.md D2). A wait that stalls is reported like a stalled collective.
 *
 * This backend rings allreduce, reduce-scatter, allgather and broadcast (a pipelined chain);
 * barrier and send/recv are the mpi backend's. The mpi backend in turn runs its large
 * allreduces through rg_comm_ring_allreduce (comm_mpi.c says why). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"

#define RING_SEG_BYTES ((int64_t)1 << 20) /* small enough to pipeline, large enough to stream */
#define RING_MAX_SEGS 64                  /* so that a step's requests fit on the stack */
#define TAG_RING RG_COMM_TAG_MAX          /* above every user tag */

/* One collective's view of the ring: count elements of buf, cut into nblocks blocks. */
typedef struct {
    rg_comm *c;
    rg_ring_scratch *st;
    char *buf;
    int64_t count;
    int nblocks;
    rg_comm_dtype dt;
    MPI_Datatype type;
    size_t esz;
    int n, rank, left, right;
    char *slot[2]; /* the two scratch segments */
} ring;

/* A range of elements sent as nseg segments of seg elements (the last may be shorter). */
typedef struct {
    int64_t off, len, seg;
    int nseg;
} segs;

static char *at(const ring *g, int64_t elem) {
    return g->buf + (size_t)elem * g->esz;
}

/* Block b (taken mod nblocks): nearly equal blocks, the first count % nblocks one longer. */
static segs block(const ring *g, int64_t b) {
    int64_t nb = g->nblocks, q = g->count / nb, r = g->count % nb;
    b = ((b % nb) + nb) % nb;
    segs s = {.off = b * q + (b < r ? b : r), .len = q + (b < r)};
    int64_t nseg = ((int64_t)(s.len * g->esz) + RING_SEG_BYTES - 1) / RING_SEG_BYTES;
    if (nseg > RING_MAX_SEGS) nseg = RING_MAX_SEGS;
    s.seg = nseg ? (s.len + nseg - 1) / nseg : 0;
    s.nseg = s.seg ? (int)((s.len + s.seg - 1) / s.seg) : 0;
    return s;
}

static int seg_len(const segs *s, int j) {
    int64_t rest = s->len - j * s->seg;
    return (int)(rest < s->seg ? rest : s->seg);
}

RG_NODISCARD static rg_status grow(char **p, size_t *have, size_t want) {
    if (*have >= want) return RG_OK;
    char *q = realloc(*p, want);
    if (!q) return rg_error(RG_ENOMEM, "ring: out of memory for %zu bytes of scratch", want);
    *p = q, *have = want;
    return RG_OK;
}

RG_NODISCARD
static rg_status ring_begin(ring *g, rg_comm *c, rg_ring_scratch *st, void *buf, int64_t count,
                            rg_comm_dtype dt, int nblocks) {
    *g = (ring){.c = c,
                .st = st,
                .buf = buf,
                .count = count,
                .nblocks = nblocks,
                .dt = dt,
                .type = rg_comm_mpi_type(dt),
                .esz = rg_comm_dtype_size(dt),
                .n = c->size,
                .rank = c->rank,
                .left = (c->rank + c->size - 1) % c->size,
                .right = (c->rank + 1) % c->size};
    if (block(g, 0).seg > INT_MAX) /* block 0 is the longest */
        return rg_error(RG_EINVAL, "ring: %lld elements are too many", (long long)count);
    return RG_OK;
}

/* The two scratch segments that recv_and_add receives into, kept from call to call. */
RG_NODISCARD static rg_status reserve_scratch(ring *g) {
    rg_ring_scratch *st = g->st;
    size_t seg_bytes = (size_t)block(g, 0).seg * g->esz;
    RG_TRY(grow(&st->scratch, &st->scratch_bytes, 2 * seg_bytes));
    g->slot[0] = st->scratch, g->slot[1] = st->scratch + seg_bytes;
    return RG_OK;
}

/* ---- waiting ---- */

static void describe_wait(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    const ring *g = ctx;
    snprintf(buf, cap,
             "ring: rank %d has waited %.1f s for a segment from rank %d or to rank %d (a %lld "
             "element collective)",
             c->rank, waited, g->left, g->right, (long long)g->count);
}

/* Waits politely for n requests (see Waiting above). */
RG_NODISCARD static rg_status wait_all(ring *g, int n, MPI_Request *reqs) {
    return n > 0 ? rg_comm_mpi_wait(g->c, n, reqs, describe_wait, g) : RG_OK;
}

/* ---- one step: send a block to the right while receiving one from the left ---- */

/* Receives `in` straight into place (allgather: the arriving block is final). */
RG_NODISCARD static rg_status recv_in_place(ring *g, const segs *in, MPI_Request *reqs) {
    for (int j = 0; j < in->nseg; j++)
        MPI_Irecv(at(g, in->off + j * in->seg), seg_len(in, j), g->type, g->left, TAG_RING,
                  g->c->mpi, &reqs[j]);
    return wait_all(g, (int)in->nseg, reqs);
}

/* Receives `in` segment by segment into two scratch buffers and adds each into place; segment
 * j+1 is already arriving while segment j is added. */
RG_NODISCARD static rg_status recv_and_add(ring *g, const segs *in, MPI_Request *reqs) {
    for (int j = 0; j < in->nseg; j++) {
        if (j == 0)
            MPI_Irecv(g->slot[0], seg_len(in, 0), g->type, g->left, TAG_RING, g->c->mpi, &reqs[0]);
        if (j + 1 < in->nseg)
            MPI_Irecv(g->slot[(j + 1) % 2], seg_len(in, j + 1), g->type, g->left, TAG_RING,
                      g->c->mpi, &reqs[j + 1]);
        RG_TRY(wait_all(g, 1, &reqs[j]));
        rg_host_reduce_sum(at(g, in->off + j * in->seg), g->slot[j % 2], seg_len(in, j), g->dt);
    }
    return RG_OK;
}

/* Sends block `out` to the right while receiving block `in` from the left; with `add` the
 * arriving data is added to ours (reduce-scatter), else it replaces ours (allgather). */
RG_NODISCARD static rg_status ring_step(ring *g, int64_t out, int64_t in, bool add) {
    segs so = block(g, out), si = block(g, in);
    MPI_Request sends[RING_MAX_SEGS], recvs[RING_MAX_SEGS];
    for (int j = 0; j < so.nseg; j++) /* all at once: the right neighbour takes them in order */
        MPI_Isend(at(g, so.off + j * so.seg), seg_len(&so, j), g->type, g->right, TAG_RING,
                  g->c->mpi, &sends[j]);
    RG_TRY(add ? recv_and_add(g, &si, recvs) : recv_in_place(g, &si, recvs));
    return wait_all(g, (int)so.nseg, sends);
}

/* ---- the two phases ---- */

/* Step s: pass block r-s-1 on and add the arriving block r-s-2 into ours. Block b starts at
 * rank b+1 and is complete when it reaches rank b, N-1 hops later. */
RG_NODISCARD static rg_status reduce_scatter_phase(ring *g) {
    for (int s = 0; s < g->n - 1; s++) RG_TRY(ring_step(g, g->rank - s - 1, g->rank - s - 2, true));
    return RG_OK;
}

/* Step s: pass block r-s on (our own complete block first, then the one that just arrived)
 * and keep the arriving block r-s-1. */
RG_NODISCARD static rg_status allgather_phase(ring *g) {
    for (int s = 0; s < g->n - 1; s++) RG_TRY(ring_step(g, g->rank - s, g->rank - s - 1, false));
    return RG_OK;
}

rg_status rg_comm_ring_allreduce(rg_comm *c, rg_ring_scratch *st, void *buf, int64_t count,
                                 rg_comm_dtype dt, rg_reduce_op op) {
    ring g;
    RG_TRY(ring_begin(&g, c, st, buf, count, dt, c->size));
    RG_TRY(reserve_scratch(&g));
    RG_TRY(reduce_scatter_phase(&g));
    if (op == RG_REDUCE_AVG) { /* scale only the block we own; the allgather spreads it */
        segs mine = block(&g, g.rank);
        rg_host_scale(at(&g, mine.off), mine.len, dt, 1.0 / g.n);
    }
    return allgather_phase(&g);
}

RG_NODISCARD static rg_status ring_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                             rg_reduce_op op) {
    return rg_comm_ring_allreduce(c, c->impl, buf, count, dt, op);
}

/* The phase works in place, and send is const, so it runs on a copy of send. */
rg_status rg_comm_ring_reduce_scatter(rg_comm *c, rg_ring_scratch *st, const void *send, void *recv,
                                      int64_t count, rg_comm_dtype dt, rg_reduce_op op) {
    size_t esz = rg_comm_dtype_size(dt), bytes = (size_t)count * c->size * esz;
    RG_TRY(grow(&st->work, &st->work_bytes, bytes));
    if (bytes) memcpy(st->work, send, bytes);
    ring g;
    RG_TRY(ring_begin(&g, c, st, st->work, count * c->size, dt, c->size)); /* block r: rank r's */
    RG_TRY(reserve_scratch(&g));
    RG_TRY(reduce_scatter_phase(&g));
    if (count) memcpy(recv, at(&g, (int64_t)c->rank * count), (size_t)count * esz);
    if (op == RG_REDUCE_AVG) rg_host_scale(recv, count, dt, 1.0 / c->size);
    return RG_OK;
}

RG_NODISCARD
static rg_status ring_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                     rg_comm_dtype dt, rg_reduce_op op) {
    return rg_comm_ring_reduce_scatter(c, c->impl, send, recv, count, dt, op);
}

RG_NODISCARD
static rg_status ring_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                                rg_comm_dtype dt) {
    size_t esz = rg_comm_dtype_size(dt);
    char *mine = (char *)recv + (size_t)c->rank * count * esz;
    if (send != mine && count) memcpy(mine, send, (size_t)count * esz);
    ring g;
    RG_TRY(ring_begin(&g, c, c->impl, recv, count * c->size, dt, c->size));
    return allgather_phase(&g);
}

/* A pipelined chain root -> root+1 -> ... -> root-1: each rank passes segment j on as soon as it
 * has it, while segment j+1 is still arriving. For B bytes that takes about B/bandwidth plus N-2
 * segment times, where a binomial tree takes log2(N) * B/bandwidth. */
RG_NODISCARD
static rg_status ring_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root) {
    ring g;
    RG_TRY(ring_begin(&g, c, c->impl, buf, count, dt, 1)); /* one block: all of buf */
    segs s = block(&g, 0);
    bool first = g.rank == root, last = g.right == root;
    MPI_Request recvs[RING_MAX_SEGS], sends[RING_MAX_SEGS];
    for (int j = 0; j < s.nseg && !first; j++)
        MPI_Irecv(at(&g, j * s.seg), seg_len(&s, j), g.type, g.left, TAG_RING, c->mpi, &recvs[j]);
    for (int j = 0; j < s.nseg; j++) {
        if (!first) RG_TRY(wait_all(&g, 1, &recvs[j]));
        if (!last)
            MPI_Isend(at(&g, j * s.seg), seg_len(&s, j), g.type, g.right, TAG_RING, c->mpi,
                      &sends[j]);
    }
    return last ? RG_OK : wait_all(&g, (int)s.nseg, sends);
}

void rg_ring_scratch_free(rg_ring_scratch *st) {
    free(st->scratch);
    free(st->work);
    *st = (rg_ring_scratch){0};
}

RG_NODISCARD static rg_status ring_init(rg_comm *c) {
    c->impl = calloc(1, sizeof(rg_ring_scratch));
    return c->impl ? RG_OK : rg_error(RG_ENOMEM, "comm backend ring: out of memory");
}

static void ring_deinit(rg_comm *c) {
    rg_ring_scratch *st = c->impl;
    if (!st) return;
    rg_ring_scratch_free(st);
    free(st);
    c->impl = NULL;
}

const rg_comm_ops rg_comm_ring_ops = {
    .name = "ring",
    .init = ring_init,
    .deinit = ring_deinit,
    .allreduce = ring_allreduce,
    .broadcast = ring_broadcast,
    .allgather = ring_allgather,
    .reduce_scatter = ring_reduce_scatter,
    .barrier = rg_comm_mpi_barrier,
    .send = rg_comm_mpi_send,
    .recv = rg_comm_mpi_recv,
};
