/* collectives_bench — reduce-scatter, allgather and broadcast through ringgrad's communicators,
 * against the raw MPI calls on the same bytes in the same run (allreduce_bench does allreduce).
 *
 *   scripts/rg-mpirun -np N build/bin/collectives_bench [--min 1M] [--max 16M] [--factor 4]
 *                                                      [--rounds 5] [--iters 3]
 *   scripts/sim-cluster.sh run N --rate 1gbit -- -np N build/bin/collectives_bench
 *
 * Per size (float32; the size is the whole buffer: the reduce-scatter's input, the allgather's
 * output, the broadcast's buffer) and per collective, these methods, interleaved round by round:
 *   reduce-scatter  block: MPI_Reduce_scatter_block;  vector: MPI_Reduce_scatter with equal
 *                   counts (the same operation: Open MPI 4.1 runs the block form as a reduce to
 *                   one rank and a scatter, docs/PERFORMANCE.md, twenty-first session);
 *                   mpi, ring: rg_comm_reduce_scatter on an mpi / a ring comm
 *   allgather       raw: MPI_Allgather in place; mpi, ring: rg_comm_allgather
 *   broadcast       raw: MPI_Bcast from rank 0; mpi, ring: rg_comm_broadcast
 * A measurement is --iters back-to-back calls, its time the slowest rank's; the table shows the
 * median over --rounds rounds in ms per call, and each method's time as a ratio of the first
 * method's (the raw MPI call: above 1 is slower). Before timing, each method's result is checked
 * once against the serial answer. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/bytes.h"
#include "bench/median.h"
#include "ringgrad.h"

#define MAX_ROUNDS 64
#define NMETHODS 4

typedef enum { REDUCE_SCATTER, ALLGATHER, BROADCAST, NCOLL } coll;
static const char *const coll_names[NCOLL] = {"reduce-scatter", "allgather", "broadcast"};
static const char *const method_names[NCOLL][NMETHODS] = {
    {"block", "vector", "mpi", "ring"}, {"raw", "mpi", "ring", NULL}, {"raw", "mpi", "ring", NULL}};

typedef struct {
    int64_t min, max, factor;
    int rounds, iters;
} options;

static int rank, size;
static rg_comm *mpi_comm, *ring_comm;
static int *counts; /* MPI_Reduce_scatter's recvcounts */

/* Rank r's input: element i of rank r's buffer. Small integers, so sums are exact. */
static float input(int r, int64_t i) {
    return (float)((i * 7 + r * 3) % 17);
}

/* Runs method m of collective k once on n elements of buf (and the reduce-scatter's out). */
static void run(coll k, int m, float *buf, float *out, int64_t n) {
    int64_t shard = n / size;
    rg_comm *c = NULL;
    switch (k) {
    case REDUCE_SCATTER:
        if (m == 0) {
            MPI_Reduce_scatter_block(buf, out, (int)shard, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            return;
        }
        if (m == 1) {
            for (int r = 0; r < size; r++) counts[r] = (int)shard;
            MPI_Reduce_scatter(buf, out, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            return;
        }
        c = m == 2 ? mpi_comm : ring_comm;
        RG_CHECK(rg_comm_reduce_scatter(c, buf, out, shard, RG_COMM_F32, RG_REDUCE_SUM) == RG_OK,
                 "%s", rg_last_error());
        return;
    case ALLGATHER:
        if (m == 0) {
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, buf, (int)shard, MPI_FLOAT, MPI_COMM_WORLD);
            return;
        }
        c = m == 1 ? mpi_comm : ring_comm;
        RG_CHECK(rg_comm_allgather(c, buf + rank * shard, buf, shard, RG_COMM_F32) == RG_OK, "%s",
                 rg_last_error());
        return;
    case BROADCAST:
        if (m == 0) {
            MPI_Bcast(buf, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
            return;
        }
        c = m == 1 ? mpi_comm : ring_comm;
        RG_CHECK(rg_comm_broadcast(c, buf, n, RG_COMM_F32, 0) == RG_OK, "%s", rg_last_error());
        return;
    default:
        RG_CHECK(0, "bad collective %d", (int)k);
    }
}

/* Fills buf with this rank's input, runs the method once and checks the result. */
static void check(coll k, int m, float *buf, float *out, int64_t n) {
    int64_t shard = n / size;
    for (int64_t i = 0; i < n; i++) buf[i] = input(rank, i);
    run(k, m, buf, out, n);
    for (int64_t i = 0; i < (k == REDUCE_SCATTER ? shard : n); i++) {
        float want = 0;
        if (k == REDUCE_SCATTER)
            for (int r = 0; r < size; r++) want += input(r, rank * shard + i);
        else
            want = input(k == ALLGATHER ? (int)(i / shard) : 0, i);
        float got = k == REDUCE_SCATTER ? out[i] : buf[i];
        RG_CHECK(got == want, "%s %s, %lld elements: element %lld is %g, want %g", coll_names[k],
                 method_names[k][m], (long long)n, (long long)i, (double)got, (double)want);
    }
}

/* Seconds per call for `iters` back-to-back calls, the slowest rank's. */
static double timed(coll k, int m, float *buf, float *out, int64_t n, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) run(k, m, buf, out, n);
    double mine = (MPI_Wtime() - t0) / iters, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static const char usage[] =
    "usage: collectives_bench [--min 1M] [--max 16M] [--factor 4] [--rounds 5] [--iters 3]\n"
    "(under mpirun; see the comment at the top of bench/collectives_bench.c)\n";

static options parse_args(int argc, char **argv) {
    const char *prog = "collectives_bench";
    options o = {.min = 1 << 20, .max = 16 << 20, .factor = 4, .rounds = 5, .iters = 3};
    bench_help(argc, argv, usage);
#define VALUE() bench_value(prog, argc, argv, &i, usage)
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--min"))
            o.min = bench_parse_bytes(prog, VALUE());
        else if (!strcmp(k, "--max"))
            o.max = bench_parse_bytes(prog, VALUE());
        else if (!strcmp(k, "--factor"))
            o.factor = bench_int(prog, k, VALUE(), 2, 1024);
        else if (!strcmp(k, "--rounds"))
            o.rounds = (int)bench_int(prog, k, VALUE(), 1, MAX_ROUNDS);
        else if (!strcmp(k, "--iters"))
            o.iters = (int)bench_int(prog, k, VALUE(), 1, 1000000);
        else
            bench_usage_error(prog, "unknown option", k, usage);
    }
#undef VALUE
    if (o.min > o.max) {
        fprintf(stderr, "%s: need --min <= --max\n", prog);
        exit(2);
    }
    return o;
}

int main(int argc, char **argv) {
    options o = parse_args(argc, argv);
    rg_dist *d = rg_dist_init(&argc, &argv);
    RG_CHECK(d, "collectives_bench: %s", rg_last_error());
    rank = rg_dist_rank(d), size = rg_dist_size(d);
    if (!rg_dist_launched(d)) {
        fprintf(stderr, "collectives_bench: run me under scripts/rg-mpirun -np N\n");
        return 2;
    }
    RG_CHECK(rg_comm_new(d, RG_COMM_MPI, &mpi_comm) == RG_OK, "%s", rg_last_error());
    RG_CHECK(rg_comm_new(d, RG_COMM_RING, &ring_comm) == RG_OK, "%s", rg_last_error());
    counts = malloc((size_t)size * sizeof *counts);
    RG_CHECK(counts, "collectives_bench: out of memory");
    if (rank == 0)
        printf("# %d ranks, float32, ms per call (median of %d rounds of %d calls, the slowest "
               "rank's), and / the first method's\n",
               size, o.rounds, o.iters);
    for (int64_t bytes = o.min; bytes <= o.max; bytes *= o.factor) {
        int64_t n = bytes / (int64_t)sizeof(float) / size * size; /* a whole shard per rank */
        RG_CHECK(n >= size && n <= (int64_t)1 << 30,
                 "collectives_bench: %lld bytes: need at least "
                 "one float per rank and at most 2^30",
                 (long long)bytes);
        float *buf = malloc((size_t)n * sizeof *buf),
              *out = malloc((size_t)(n / size) * sizeof *out);
        RG_CHECK(buf && out, "collectives_bench: out of memory");
        for (int k = 0; k < NCOLL; k++) {
            double t[NMETHODS][MAX_ROUNDS], ratio[NMETHODS][MAX_ROUNDS];
            int nm = method_names[k][3] ? 4 : 3;
            for (int m = 0; m < nm; m++) check((coll)k, m, buf, out, n);
            for (int r = 0; r < o.rounds; r++) {
                for (int m = 0; m < nm; m++) t[m][r] = timed((coll)k, m, buf, out, n, o.iters);
                for (int m = 0; m < nm; m++) ratio[m][r] = t[m][r] / t[0][r];
            }
            if (rank != 0) continue;
            printf("%10lld bytes  %-15s", (long long)bytes, coll_names[k]);
            for (int m = 0; m < nm; m++)
                printf(" | %-6s %8.2f ms %5.2fx", method_names[k][m],
                       1e3 * bench_median(t[m], o.rounds), bench_median(ratio[m], o.rounds));
            printf("\n");
        }
        free(buf);
        free(out);
    }
    free(counts);
    rg_comm_free(mpi_comm);
    rg_comm_free(ring_comm);
    return rg_dist_finalize(d) == RG_OK ? 0 : 1;
}
