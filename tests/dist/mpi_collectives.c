/* Every collective of the mpi and ring backends against a serial reference, over sizes that hit
 * the edges of the ring's block split (0, 1, fewer elements than ranks, one more, a prime count
 * of a few MiB) in every dtype it reduces, with SUM and AVG. Each rank computes what every other
 * rank contributed (dt_input), so each rank checks the full result by itself. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "dist/comm_impl.h"
#include "dist_test.h"
#include "mpitest.h"

static rg_dist *dist;
static rg_comm *comms[2]; /* mpi, ring */
static int rank, size;

static int64_t sizes[16];
static int nsizes;

static void set_sizes(void) {
    int64_t s[] = {0, 1, 2, 3, 7, size - 1, size + 1, 1000003, ((int64_t)3 << 20) + 5};
    nsizes = (int)(sizeof s / sizeof *s);
    memcpy(sizes, s, sizeof s);
}

/* Checks buf[i] against want(i) within tol * (1 + |want|). */
static void check_elems(const char *what, rg_comm *c, const void *buf, rg_comm_dtype dt, int64_t n,
                        double (*want)(rg_comm_dtype, int64_t, int, int), int arg, int salt,
                        double tol) {
    for (int64_t i = 0; i < n; i++) {
        double got = dt_get(buf, dt, i), w = want(dt, i, arg, salt);
        MT_CHECK(fabs(got - w) <= tol * (1 + fabs(w)),
                 "%s on %s, dtype %d, %lld elements: element %lld is %.9g, want %.9g", what,
                 rg_comm_backend_name(rg_comm_kind(c)), (int)dt, (long long)n, (long long)i, got,
                 w);
    }
}

/* ---- allreduce ---- */

static double want_reduce(rg_comm_dtype dt, int64_t i, int op, int salt) {
    double s = 0;
    for (int r = 0; r < size; r++) s += dt_input(dt, r, i, salt);
    return op == RG_REDUCE_AVG ? s / size : s;
}

static void allreduce_case(rg_comm *c, rg_comm_dtype dt, rg_reduce_op op, int64_t n, int salt) {
    void *buf = dt_alloc(n, dt);
    for (int64_t i = 0; i < n; i++) dt_put(buf, dt, i, dt_input(dt, rank, i, salt));
    MT_OK(rg_comm_allreduce(c, buf, n, dt, op));
    /* Sums of small integers are exact; an average is a rounded 1/size multiple. */
    double tol = op == RG_REDUCE_SUM ? 0 : dt == RG_COMM_F16 ? 1e-3 : 1e-6;
    check_elems("allreduce", c, buf, dt, n, want_reduce, op, salt, tol);
    free(buf);
}

static void test_allreduce_float(void) {
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < nsizes; k++) {
            allreduce_case(comms[b], RG_COMM_F32, RG_REDUCE_SUM, sizes[k], k);
            allreduce_case(comms[b], RG_COMM_F32, RG_REDUCE_AVG, sizes[k], k + 1);
            allreduce_case(comms[b], RG_COMM_F16, RG_REDUCE_SUM, sizes[k], k + 2);
            allreduce_case(comms[b], RG_COMM_F16, RG_REDUCE_AVG, sizes[k], k + 3);
        }
}

static void test_allreduce_integer(void) {
    rg_comm_dtype dts[] = {RG_COMM_I32, RG_COMM_I64, RG_COMM_U8};
    int64_t ns[] = {0, 1, 7, size + 1, 300007}; /* 1.2 MB of int32: the mpi comm's ring too */
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 3; d++)
            for (int k = 0; k < 5; k++) allreduce_case(comms[b], dts[d], RG_REDUCE_SUM, ns[k], k);
}

/* Random float data: the ring and MPI add in different orders, so compare with a tolerance. */
static void test_allreduce_random_f32_close_to_serial_sum(void) {
    int64_t n = 300007;
    float *buf = malloc(n * sizeof *buf), *want = calloc(n, sizeof *want);
    for (int b = 0; b < 2; b++) {
        for (int r = 0; r < size; r++) {
            for (int64_t i = 0; i < n; i++) {
                float v = (float)sin((double)(i + 1) * (r + 1) * 0.37) * 1e3f;
                if (r == rank) buf[i] = v;
                if (b == 0) want[i] += v;
            }
        }
        MT_OK(rg_comm_allreduce(comms[b], buf, n, RG_COMM_F32, RG_REDUCE_SUM));
        for (int64_t i = 0; i < n; i++)
            MT_CHECK(fabsf(buf[i] - want[i]) <= 1e-3f * (1 + fabsf(want[i])),
                     "element %lld: %g vs %g", (long long)i, buf[i], want[i]);
    }
    free(buf);
    free(want);
}

/* The mpi comm runs allreduces of 1 MiB and more on the ring (comm_mpi.c): its floats then carry
 * the ring's bits exactly, which MPI_Allreduce's other order of additions does not from 3 ranks
 * on (RG_MPI_RING=0; on 2 ranks both compute a + b). */
static void test_large_allreduce_takes_the_ring(void) {
    int64_t n = 300007; /* 1.2 MB */
    float *in = malloc(n * sizeof *in), *got[3];
    for (int64_t i = 0; i < n; i++) in[i] = (float)sin((double)(i + 1) * (rank + 1) * 0.37) * 1e3f;
    setenv("RG_MPI_RING", "0", 1); /* on every rank: a comm made now keeps MPI_Allreduce */
    rg_comm *plain;
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &plain));
    unsetenv("RG_MPI_RING");
    rg_comm *cs[3] = {comms[0], comms[1], plain};
    for (int b = 0; b < 3; b++) {
        got[b] = malloc(n * sizeof *got[b]);
        memcpy(got[b], in, n * sizeof *in);
        MT_OK(rg_comm_allreduce(cs[b], got[b], n, RG_COMM_F32, RG_REDUCE_SUM));
    }
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += got[0][i] != got[1][i];
    MT_CHECK(differ == 0, "%lld of %lld sums differ between the mpi comm and the ring comm",
             (long long)differ, (long long)n);
    for (int64_t i = 0; i < n; i++) differ += got[2][i] != got[1][i];
    if (size >= 3)
        MT_CHECK(differ > 0, "MPI_Allreduce (RG_MPI_RING=0) gave the ring's bits: the check above "
                             "cannot tell the two paths apart");
    rg_comm_free(plain);
    for (int b = 0; b < 3; b++) free(got[b]);
    free(in);
}

/* Reduce-scatters of 1 MiB and more (zero1's buckets) take the ring too, but only when the job
 * spans hosts (comm_mpi.c; dist/sim_cluster_collectives runs this on 3 simulated hosts). The
 * routing is read back from the comm, since Open MPI's reduce-scatter and the ring add in the same
 * order here: the values are checked against both. */
static void test_large_reduce_scatter_takes_the_ring_across_hosts(void) {
    int64_t n = 150001; /* per rank: 1.2 MB of input on 2 ranks */
    float *in = malloc((size_t)n * size * sizeof *in), *got[3];
    for (int64_t i = 0; i < n * size; i++)
        in[i] = (float)sin((double)(i + 1) * (rank + 1) * 0.29) * 1e3f;
    setenv("RG_MPI_RING", "0", 1);
    rg_comm *plain;
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &plain));
    unsetenv("RG_MPI_RING");
    bool hosts = rg_comm_local_size(comms[0]) < size;
    int64_t bytes = n * size * (int64_t)sizeof(float), mib = 1 << 20;
    MT_CHECK(rg_comm_mpi_takes_ring(comms[0], RG_COLL_REDUCE_SCATTER, bytes) == hosts,
             "a reduce-scatter of %lld bytes %s the ring, with the job on %s", (long long)bytes,
             hosts ? "does not take" : "takes", hosts ? "several hosts" : "one host");
    MT_CHECK(!rg_comm_mpi_takes_ring(comms[0], RG_COLL_REDUCE_SCATTER, mib - 1) &&
                 rg_comm_mpi_takes_ring(comms[0], RG_COLL_ALLREDUCE, mib) &&
                 !rg_comm_mpi_takes_ring(comms[0], RG_COLL_ALLREDUCE, mib - 1) &&
                 !rg_comm_mpi_takes_ring(comms[0], RG_COLL_ALLGATHER, 64 * mib) &&
                 !rg_comm_mpi_takes_ring(plain, RG_COLL_ALLREDUCE, 64 * mib) &&
                 !rg_comm_mpi_takes_ring(plain, RG_COLL_REDUCE_SCATTER, 64 * mib),
             "the mpi comm's routing by size, kind and RG_MPI_RING");
    rg_comm *cs[3] = {comms[0], comms[1], plain};
    for (int b = 0; b < 3; b++) {
        got[b] = malloc((size_t)n * sizeof *got[b]);
        MT_OK(rg_comm_reduce_scatter(cs[b], in, got[b], n, RG_COMM_F32, RG_REDUCE_SUM));
    }
    for (int b = 0; b < 3; b++) /* each block against the sum in double: within float rounding */
        for (int64_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < size; r++)
                want += (float)sin((double)(rank * n + i + 1) * (r + 1) * 0.29) * 1e3f;
            MT_CHECK(fabs(got[b][i] - want) <= 1e-3, "%s: block element %lld is %.9g, want %.9g",
                     b == 2 ? "MPI_Reduce_scatter" : rg_comm_backend_name(rg_comm_kind(cs[b])),
                     (long long)i, got[b][i], want);
        }
    rg_comm_free(plain);
    for (int b = 0; b < 3; b++) free(got[b]);
    free(in);
}

/* ---- broadcast ---- */

static double want_bcast(rg_comm_dtype dt, int64_t i, int root, int salt) {
    return dt_input(dt, root, i, salt);
}

static void test_broadcast_from_every_root(void) {
    rg_comm_dtype dts[] = {RG_COMM_F32, RG_COMM_I64, RG_COMM_U8};
    for (int b = 0; b < 2; b++)
        for (int root = 0; root < size; root++)
            for (int k = 0; k < nsizes; k++) {
                rg_comm_dtype dt = dts[k % 3];
                int64_t n = sizes[k];
                void *buf = dt_alloc(n, dt);
                for (int64_t i = 0; i < n; i++)
                    dt_put(buf, dt, i, rank == root ? dt_input(dt, root, i, k) : 99);
                MT_OK(rg_comm_broadcast(comms[b], buf, n, dt, root));
                check_elems("broadcast", comms[b], buf, dt, n, want_bcast, root, k, 0);
                free(buf);
            }
}

/* ---- allgather ---- */

static double want_gather(rg_comm_dtype dt, int64_t i, int count, int salt) {
    return dt_input(dt, (int)(i / count), i % count, salt);
}

static void allgather_case(rg_comm *c, rg_comm_dtype dt, int64_t n, bool in_place, int salt) {
    char *recv = dt_alloc(n * size, dt), *send = dt_alloc(n, dt);
    size_t esz = rg_comm_dtype_size(dt);
    for (int64_t i = 0; i < n * size; i++) dt_put(recv, dt, i, 99);
    char *mine = in_place ? recv + (size_t)rank * n * esz : send;
    for (int64_t i = 0; i < n; i++) dt_put(mine, dt, i, dt_input(dt, rank, i, salt));
    MT_OK(rg_comm_allgather(c, mine, recv, n, dt));
    if (n) check_elems("allgather", c, recv, dt, n * size, want_gather, (int)n, salt, 0);
    free(recv);
    free(send);
}

static void test_allgather(void) {
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < nsizes - 1; k++) { /* the 12 MiB case adds little here */
            allgather_case(comms[b], RG_COMM_F32, sizes[k], false, k);
            allgather_case(comms[b], k % 2 ? RG_COMM_F16 : RG_COMM_I32, sizes[k], true, k);
        }
}

/* ---- reduce-scatter ---- */

static void reduce_scatter_case(rg_comm *c, rg_comm_dtype dt, rg_reduce_op op, int64_t n,
                                int salt) {
    char *send = dt_alloc(n * size, dt), *recv = dt_alloc(n, dt);
    for (int64_t i = 0; i < n * size; i++) dt_put(send, dt, i, dt_input(dt, rank, i, salt));
    MT_OK(rg_comm_reduce_scatter(c, send, recv, n, dt, op));
    double tol = op == RG_REDUCE_SUM ? 0 : dt == RG_COMM_F16 ? 1e-3 : 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double got = dt_get(recv, dt, i), w = want_reduce(dt, rank * n + i, op, salt);
        MT_CHECK(fabs(got - w) <= tol * (1 + fabs(w)),
                 "reduce_scatter on %s, %lld per rank: element %lld is %g, want %g",
                 rg_comm_backend_name(rg_comm_kind(c)), (long long)n, (long long)i, got, w);
    }
    free(send);
    free(recv);
}

static void test_reduce_scatter(void) {
    int64_t ns[] = {0, 1, 2, 3, 7, size + 1, 262147};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 7; k++) {
            reduce_scatter_case(comms[b], RG_COMM_F32, RG_REDUCE_SUM, ns[k], k);
            reduce_scatter_case(comms[b], RG_COMM_F32, RG_REDUCE_AVG, ns[k], k + 1);
            reduce_scatter_case(comms[b], RG_COMM_F16, RG_REDUCE_SUM, ns[k], k + 2);
            reduce_scatter_case(comms[b], RG_COMM_I64, RG_REDUCE_SUM, ns[k], k + 3);
        }
}

/* ---- barrier and point-to-point ---- */

static void test_barrier_waits_for_the_last_rank(void) {
    for (int b = 0; b < 2; b++) {
        MT_OK(rg_comm_barrier(comms[b]));
        int64_t t0 = rg_trace_now();
        if (rank == size - 1) usleep(300 * 1000);
        MT_OK(rg_comm_barrier(comms[b]));
        double waited = (rg_trace_now() - t0) * 1e-9;
        MT_CHECK(waited >= 0.2,
                 "rank %d left the barrier after %.3f s, before the last rank "
                 "entered it (0.3 s)",
                 rank, waited);
    }
}

/* Every ordered pair (a, b): a sends n elements to b with a tag of its own; b checks them. */
static void test_send_recv_between_every_pair(void) {
    int64_t ns[] = {0, 1, 1000, 600001};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            int64_t n = ns[k];
            int32_t *buf = dt_alloc(n, RG_COMM_I32);
            for (int from = 0; from < size; from++)
                for (int to = 0; to < size; to++) {
                    if (from == to || (rank != from && rank != to)) continue;
                    int tag = from * 100 + to;
                    if (rank == from) {
                        for (int64_t i = 0; i < n; i++) buf[i] = (int32_t)(i * 3 + tag);
                        MT_OK(rg_comm_send(comms[b], buf, n, RG_COMM_I32, to, tag));
                    } else {
                        memset(buf, 0xff, n * sizeof *buf);
                        MT_OK(rg_comm_recv(comms[b], buf, n, RG_COMM_I32, from, tag));
                        for (int64_t i = 0; i < n; i++)
                            MT_CHECK(buf[i] == (int32_t)(i * 3 + tag), "from %d: element %lld",
                                     from, (long long)i);
                    }
                }
            free(buf);
        }
}

static void test_ranks_and_hosts(void) {
    /* Open MPI's launcher tells each rank its place on its host; ours must agree. */
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"),
               *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    MT_CHECK(lr && ls, "not started by Open MPI's mpirun");
    for (int b = 0; b < 2; b++) {
        MT_CHECK(rg_comm_rank(comms[b]) == rank && rg_comm_size(comms[b]) == size, "rank/size");
        MT_CHECK(rg_comm_local_rank(comms[b]) == atoi(lr), "local rank %d, launcher says %s",
                 rg_comm_local_rank(comms[b]), lr);
        MT_CHECK(rg_comm_local_size(comms[b]) == atoi(ls), "local size %d, launcher says %s",
                 rg_comm_local_size(comms[b]), ls);
    }
    MT_CHECK(rg_comm_kind(comms[0]) == RG_COMM_MPI && rg_comm_kind(comms[1]) == RG_COMM_RING,
             "kinds");
    MT_CHECK(rg_dist_launched(dist), "launched by mpirun");
}

int main(int argc, char **argv) {
    dist = rg_dist_init(&argc, &argv);
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    MT_CHECK(size >= 2, "run me under mpirun -np 2 or more");
    set_sizes();
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &comms[0]));
    MT_OK(rg_comm_new(dist, RG_COMM_RING, &comms[1]));

    MT_RUN(test_ranks_and_hosts);
    MT_RUN(test_allreduce_float);
    MT_RUN(test_allreduce_integer);
    MT_RUN(test_allreduce_random_f32_close_to_serial_sum);
    MT_RUN(test_large_allreduce_takes_the_ring);
    MT_RUN(test_large_reduce_scatter_takes_the_ring_across_hosts);
    MT_RUN(test_broadcast_from_every_root);
    MT_RUN(test_allgather);
    MT_RUN(test_reduce_scatter);
    MT_RUN(test_barrier_waits_for_the_last_rank);
    MT_RUN(test_send_recv_between_every_pair);

    rg_comm_free(comms[0]);
    rg_comm_free(comms[1]);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
