/* Collectives on GPUs, one per rank, against serial references: the nccl backend on device
 * buffers, nccl on host buffers (staged through the GPU), the mpi and ring backends on device
 * buffers (staged through the host), and the stream ordering of each: a collective waits for the
 * kernels that wrote its input, and the kernels queued after rg_comm_wait see its result, with
 * no host synchronisation in between. Skips (exit 77) without a GPU for every rank. */
#include <math.h>

#include "dist_test.h"
#include "gpu_test.h"

static rg_dist *dist;
static rg_device dev;
static const rg_backend *gpu;
static int rank, size;

enum { NCCL, MPI, RING, NCOMMS };
static rg_comm *comms[NCOMMS];

/* (comm, where) pairs: nccl on both sides, the host backends on GPU buffers. */
typedef struct {
    int comm;
    bool on_gpu;
} place;
static const place places[] = {{NCCL, true}, {NCCL, false}, {MPI, true}, {RING, true}};
#define NPLACES ((int)(sizeof places / sizeof *places))

static const char *where(const place *p) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s on %s buffers",
             rg_comm_backend_name(rg_comm_kind(comms[p->comm])), p->on_gpu ? "GPU" : "host");
    return buf;
}

static gt_buf buf_for(const place *p, int64_t n, rg_comm_dtype dt) {
    return gt_buf_new((size_t)n * rg_comm_dtype_size(dt), p->on_gpu ? gpu : NULL);
}

static double want_reduce(rg_comm_dtype dt, int64_t i, int op, int salt) {
    double s = 0;
    for (int r = 0; r < size; r++) s += dt_input(dt, r, i, salt);
    return op == RG_REDUCE_AVG ? s / size : s;
}

static void check(const char *what, const place *p, const gt_buf *b, rg_comm_dtype dt, int64_t n,
                  int64_t first, int op, int salt, double tol) {
    for (int64_t i = 0; i < n; i++) {
        double got = dt_get(b->host, dt, i), w = want_reduce(dt, first + i, op, salt);
        MT_CHECK(fabs(got - w) <= tol * (1 + fabs(w)),
                 "%s, %s, dtype %d, op %d, %lld elements: element %lld is %.9g, want %.9g", what,
                 where(p), (int)dt, op, (long long)n, (long long)i, got, w);
    }
}

/* Exact for sums of small integers; NCCL averages float16 with a few roundings. */
static double tolerance(rg_comm_dtype dt, rg_reduce_op op) {
    if (op == RG_REDUCE_SUM) return 0;
    return dt == RG_COMM_F16 ? 4e-3 : 1e-6;
}

static int64_t sizes[5]; /* 0, 1, 7, size + 1, 1000003 */

static void allreduce_case(const place *p, rg_comm_dtype dt, rg_reduce_op op, int64_t n, int salt) {
    gt_buf b = buf_for(p, n, dt);
    for (int64_t i = 0; i < n; i++) dt_put(b.host, dt, i, dt_input(dt, rank, i, salt));
    gt_push(&b);
    MT_OK(rg_comm_allreduce(comms[p->comm], gt_ptr(&b), n, dt, op));
    gt_pull(&b);
    check("allreduce", p, &b, dt, n, 0, op, salt, tolerance(dt, op));
    gt_buf_free(&b);
}

static void test_allreduce_every_dtype_and_op(void) {
    const rg_comm_dtype ints[] = {RG_COMM_I32, RG_COMM_I64, RG_COMM_U8};
    for (int k = 0; k < NPLACES; k++)
        for (int s = 0; s < 5; s++) {
            int64_t n = sizes[s];
            for (int op = 0; op < RG_REDUCE_OP_COUNT; op++) {
                allreduce_case(&places[k], RG_COMM_F32, op, n, s + op);
                allreduce_case(&places[k], RG_COMM_F16, op, n, s + op + 2);
            }
            for (int d = 0; d < 3; d++)
                allreduce_case(&places[k], ints[d], RG_REDUCE_SUM, n, s + d);
        }
}

static void test_broadcast_from_every_root(void) {
    int64_t n = 100003;
    for (int k = 0; k < NPLACES; k++)
        for (int root = 0; root < size; root++) {
            gt_buf b = buf_for(&places[k], n, RG_COMM_I32);
            for (int64_t i = 0; i < n; i++)
                ((int32_t *)b.host)[i] = rank == root ? (int32_t)(i ^ root) : -1;
            gt_push(&b);
            MT_OK(rg_comm_broadcast(comms[places[k].comm], gt_ptr(&b), n, RG_COMM_I32, root));
            gt_pull(&b);
            for (int64_t i = 0; i < n; i++)
                MT_CHECK(((int32_t *)b.host)[i] == (int32_t)(i ^ root),
                         "broadcast from %d, %s: element %lld", root, where(&places[k]),
                         (long long)i);
            gt_buf_free(&b);
        }
}

/* Separate buffers, then in place (send inside recv at rank * n). */
static void test_allgather(void) {
    int64_t n = 70001;
    for (int k = 0; k < NPLACES; k++)
        for (int in_place = 0; in_place < 2; in_place++) {
            const place *p = &places[k];
            gt_buf recv = buf_for(p, n * size, RG_COMM_F32), send = buf_for(p, n, RG_COMM_F32);
            float *mine = in_place ? (float *)recv.host + rank * n : (float *)send.host;
            for (int64_t i = 0; i < n * size; i++) ((float *)recv.host)[i] = -99;
            for (int64_t i = 0; i < n; i++) mine[i] = (float)dt_input(RG_COMM_F32, rank, i, 5);
            gt_push(&recv);
            gt_push(&send);
            char *base = gt_ptr(&recv);
            const void *s = in_place ? base + (size_t)rank * n * sizeof(float) : gt_ptr(&send);
            MT_OK(rg_comm_allgather(comms[p->comm], s, base, n, RG_COMM_F32));
            gt_pull(&recv);
            for (int r = 0; r < size; r++)
                for (int64_t i = 0; i < n; i++)
                    MT_CHECK(((float *)recv.host)[r * n + i] ==
                                 (float)dt_input(RG_COMM_F32, r, i, 5),
                             "allgather (in place %d), %s: rank %d's element %lld", in_place,
                             where(p), r, (long long)i);
            gt_buf_free(&recv);
            gt_buf_free(&send);
        }
}

static void test_reduce_scatter(void) {
    int64_t n = 50021;
    for (int k = 0; k < NPLACES; k++)
        for (int op = 0; op < RG_REDUCE_OP_COUNT; op++) {
            const place *p = &places[k];
            gt_buf send = buf_for(p, n * size, RG_COMM_F32), recv = buf_for(p, n, RG_COMM_F32);
            for (int64_t i = 0; i < n * size; i++)
                ((float *)send.host)[i] = (float)dt_input(RG_COMM_F32, rank, i, 9);
            gt_push(&send);
            MT_OK(rg_comm_reduce_scatter(comms[p->comm], gt_ptr(&send), gt_ptr(&recv), n,
                                         RG_COMM_F32, op));
            gt_pull(&recv);
            check("reduce_scatter", p, &recv, RG_COMM_F32, n, rank * n, op, 9,
                  tolerance(RG_COMM_F32, op));
            gt_buf_free(&send);
            gt_buf_free(&recv);
        }
}

/* Every ordered pair in turn, the same order on every rank. NCCL matches by order, not tag. */
static void test_send_recv_between_every_pair(void) {
    int64_t n = 300007;
    for (int k = 0; k < NPLACES; k++)
        for (int from = 0; from < size; from++)
            for (int to = 0; to < size; to++) {
                if (from == to || (rank != from && rank != to)) continue;
                gt_buf b = buf_for(&places[k], n, RG_COMM_I32);
                int32_t *v = (int32_t *)b.host, tag = from * 100 + to;
                for (int64_t i = 0; i < n; i++) v[i] = rank == from ? (int32_t)(i * 3 + tag) : -1;
                gt_push(&b);
                rg_comm *c = comms[places[k].comm];
                if (rank == from)
                    MT_OK(rg_comm_send(c, gt_ptr(&b), n, RG_COMM_I32, to, tag));
                else
                    MT_OK(rg_comm_recv(c, gt_ptr(&b), n, RG_COMM_I32, from, tag));
                gt_pull(&b);
                for (int64_t i = 0; rank == to && i < n; i++)
                    MT_CHECK(v[i] == (int32_t)(i * 3 + tag), "%s from %d: element %lld",
                             where(&places[k]), from, (long long)i);
                gt_buf_free(&b);
            }
}

static void test_barrier(void) {
    for (int b = 0; b < NCOMMS; b++) MT_OK(rg_comm_barrier(comms[b]));
}

/* ---- stream order ---- */

/* Keeps the compute stream busy for a while (GEMMs), so that work queued next runs late. */
static void busy_compute(float *scratch, int64_t m) {
    for (int i = 0; i < 8; i++)
        gpu->gemm(false, false, m, m, m, 1.0f, scratch, m, scratch, m, 0.0f, scratch + m * m, m);
}

/* A kernel writes the input just before the collective is queued, behind a busy compute stream;
 * right after rg_comm_wait another kernel doubles the result. Without the device-side ordering
 * the collective would read stale input, or the doubling would read the unreduced buffer. */
static void test_collective_is_ordered_between_the_kernels_around_it(void) {
    int64_t n = 1 << 24, m = 2048;
    float *x = gpu->alloc((size_t)n * sizeof *x), *scratch = gpu->alloc((size_t)2 * m * m * 4);
    float *host = malloc((size_t)n * sizeof *host);
    MT_CHECK(x && scratch && host, "out of memory");
    gpu->fill(2 * m * m, 0.001f, scratch);
    for (int k = 0; k < NPLACES; k++) {
        if (!places[k].on_gpu) continue;
        gpu->fill(n, -1000.0f, x);
        gpu->synchronize();
        busy_compute(scratch, m);
        gpu->fill(n, (float)(rank + 1), x); /* queued behind the GEMMs */
        rg_comm_req *req;
        MT_OK(
            rg_comm_allreduce_async(comms[places[k].comm], x, n, RG_COMM_F32, RG_REDUCE_SUM, &req));
        MT_OK(rg_comm_wait(req));
        gpu->axpby(n, 0.0f, x, 2.0f, x); /* x = 2x, queued before the reduction has run */
        gpu->copy(host, x, (size_t)n * sizeof *host, RG_COPY_D2H);
        float want = (float)(size * (size + 1)); /* 2 * (1 + 2 + ... + size) */
        for (int64_t i = 0; i < n; i += 4099)
            MT_CHECK(host[i] == want, "%s: element %lld is %g, want %g", where(&places[k]),
                     (long long)i, host[i], want);
    }
    gpu->free(x, (size_t)n * sizeof *x);
    gpu->free(scratch, (size_t)2 * m * m * 4);
    free(host);
}

/* More requests in flight than the nccl watchdog has slots: the comm thread waits for free ones. */
static void test_many_async_requests_in_flight(void) {
    enum { NREQ = 150 };
    int64_t n = 4096;
    float *x = gpu->alloc((size_t)NREQ * n * sizeof *x), *host = malloc((size_t)n * sizeof *host);
    MT_CHECK(x && host, "out of memory");
    rg_comm_req *reqs[NREQ];
    for (int k = 0; k < NREQ; k++) {
        gpu->fill(n, (float)(k + rank), x + k * n);
        MT_OK(rg_comm_allreduce_async(comms[NCCL], x + k * n, n, RG_COMM_F32, RG_REDUCE_AVG,
                                      &reqs[k]));
    }
    for (int k = 0; k < NREQ; k++) MT_OK(rg_comm_wait(reqs[k]));
    for (int k = 0; k < NREQ; k += 7) {
        gpu->copy(host, x + k * n, (size_t)n * sizeof *host, RG_COPY_D2H);
        float want = (float)k + (float)(size - 1) / 2.0f;
        MT_CHECK(fabsf(host[0] - want) <= 1e-5f * (1 + want) && host[n - 1] == host[0],
                 "request %d: %g, want %g", k, host[0], want);
    }
    gpu->free(x, (size_t)NREQ * n * sizeof *x);
    free(host);
}

int main(int argc, char **argv) {
    dist = gt_start(&argc, &argv, "mpi_nccl", &dev);
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    gpu = rg_backend_for(dev);
    memcpy(sizes, (int64_t[]){0, 1, 7, size + 1, 1000003}, sizeof sizes);
    MT_OK(rg_comm_new(dist, RG_COMM_NCCL, &comms[NCCL]));
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &comms[MPI]));
    MT_OK(rg_comm_new(dist, RG_COMM_RING, &comms[RING]));

    MT_RUN(test_allreduce_every_dtype_and_op);
    MT_RUN(test_broadcast_from_every_root);
    MT_RUN(test_allgather);
    MT_RUN(test_reduce_scatter);
    MT_RUN(test_send_recv_between_every_pair);
    MT_RUN(test_barrier);
    MT_RUN(test_collective_is_ordered_between_the_kernels_around_it);
    MT_RUN(test_many_async_requests_in_flight);

    for (int b = 0; b < NCOMMS; b++) rg_comm_free(comms[b]);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
