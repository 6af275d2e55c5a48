/* cluster_bench — what a network gives MPI: ping-pong, two-way exchange and allreduce.
 *
 *   scripts/sim-cluster.sh run 2 --rate 1gbit -- -np 2 build/bin/cluster_bench
 *   scripts/rg-mpirun -np 2 build/bin/cluster_bench          (one host: shared memory)
 *
 * Ping-pong: rank 0 sends a message to rank 1, which sends it back; half the round trip is the
 * one-way time, and bytes / one-way time the bandwidth (one direction busy at a time, as in OSU's
 * osu_latency). Exchange: ranks 0 and 1 send each other a message at once (MPI_Sendrecv), the
 * bandwidth per direction of a full-duplex link. Allreduce: all ranks sum a float vector; besides
 * the time it prints NCCL's "bus bandwidth" 2(W-1)/W * bytes / time, the rate each link must carry
 * for a ring allreduce, comparable with the link rate for any world size W.
 * Every figure is the median of --reps timed repetitions (after one warm-up). A benchmark, not a
 * test: it asserts nothing and its numbers depend on the machine. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Median one-way time (s) of a ping-pong of `bytes` between ranks 0 and 1. Others wait. */
static double pingpong(char *buf, int bytes, int reps, int rank) {
    double t[64];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (TCP connection, slow start) */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        if (r >= 0) t[r] = (MPI_Wtime() - t0) / 2;
    }
    return median(t, reps);
}

/* Median time (s) for ranks 0 and 1 to swap `bytes` at once (MPI_Sendrecv), both directions busy:
 * what a 2-rank allreduce needs from a full-duplex link. */
static double exchange(char *buf, int bytes, int reps, int rank) {
    double t[64];
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank < 2)
            MPI_Sendrecv(buf, bytes, MPI_BYTE, 1 - rank, 2, buf + bytes, bytes, MPI_BYTE, 1 - rank,
                         2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (r >= 0) t[r] = MPI_Wtime() - t0;
    }
    return median(t, reps);
}

/* Median time (s) of an allreduce (sum) of n floats; the slowest rank's time counts. */
static double allreduce(float *x, int n, int reps) {
    double t[64];
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) t[r] = dt;
    }
    return median(t, reps);
}

int main(int argc, char **argv) {
    static const char usage[] = "usage: cluster_bench [--reps 9] (under mpirun, 2 or more ranks)\n";
    int rank, world, reps = 9;
    bench_help(argc, argv, usage);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps"))
            bench_usage_error("cluster_bench", "unknown option", argv[i], usage);
        reps = (int)bench_int("cluster_bench", "--reps",
                              bench_value("cluster_bench", argc, argv, &i, usage), 1, 64);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world < 2) {
        if (rank == 0) fprintf(stderr, "cluster_bench: needs 2 or more ranks\n");
        MPI_Finalize();
        return 2;
    }
    const int max_bytes = 64 << 20;
    char *buf = calloc(2 * (size_t)max_bytes, 1); /* two halves for exchange() */
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    char names[2][MPI_MAX_PROCESSOR_NAME] = {{0}};
    int len;
    MPI_Get_processor_name(names[rank == 1], &len);
    if (rank == 1)
        MPI_Send(names[1], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    else if (rank == 0)
        MPI_Recv(names[1], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (rank == 0)
        printf("cluster_bench: %d ranks, rank 0 on %s, rank 1 on %s, median of %d\n\n"
               "ping-pong %12s %12s %10s   exchange %10s\n",
               world, names[0], names[1], reps, "bytes", "one-way us", "Gbit/s", "Gbit/s");
    for (int bytes = 8; bytes <= max_bytes; bytes *= (bytes < 4096 ? 8 : 4)) {
        const double t = pingpong(buf, bytes, reps, rank);
        const double tx = exchange(buf, bytes, reps, rank);
        if (rank == 0)
            printf("          %12d %12.1f %10.3f   %19.3f\n", bytes, 1e6 * t, 8e-9 * bytes / t,
                   8e-9 * bytes / tx);
    }
    if (rank == 0) printf("\nallreduce %12s %12s %10s\n", "bytes", "ms", "busbw Gb/s");
    const int counts[] = {1000, 256 * 1000, 1200 * 1000, 6400 * 1000, 16 << 20};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        const double t = allreduce((float *)buf, counts[i], reps);
        const double bytes = 4.0 * counts[i];
        if (rank == 0)
            printf("          %12.0f %12.2f %10.3f\n", bytes, 1e3 * t,
                   8e-9 * 2.0 * (world - 1) / world * bytes / t);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
