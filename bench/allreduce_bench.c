/* allreduce_bench — allreduce bandwidth through ringgrad's communicator, against raw
 * MPI_Allreduce on the same bytes in the same run.
 *
 *   scripts/rg-mpirun -np 2 build/bin/allreduce_bench [--min 4K] [--max 256M] [--factor 4]
 *                                                     [--rounds 5] [--budget 0.1]
 *
 * For each size (float32, SUM) it times these methods, interleaved round by round so that
 * noise from the machine hits them alike:
 *   raw   MPI_Allreduce on MPI_COMM_WORLD, called from the main thread: the baseline;
 *   mpi   rg_comm_allreduce on an mpi comm: queue, comm thread, join, MPI_Allreduce;
 *   ring  rg_comm_allreduce on a ring comm: queue, comm thread, join, our ring;
 *   avg   as mpi, with RG_REDUCE_AVG: the 1/N scale after the sum is one more pass over the
 *         buffer, which DDP pays too;
 *   ddp   the DDP reducer's path (rg_ddp_wait) on an mpi comm: the same bytes as the gradients
 *         of a fake model, tensors of at most 4 MiB (a weight and its bias per "layer"), cut
 *         into buckets as the trainer does (first bucket 1 MiB, then 25 MiB), each bucket one
 *         async allreduce with AVG, launched in order and then waited for;
 *   ddpring  the same on a ring comm (ringgrad-train --comm ring), whose AVG scales only the
 *         block each rank owns before the allgather, 1/N of the buffer;
 *   ddpsum, ddpsumring  the reducer with defer_average (what ringgrad-train runs): buckets are
 *         summed and the 1/N is left to the optimizer's kernel, which reads every gradient
 *         anyway (rg_optim_set_grad_scale), so no pass of its own is timed here.
 * A measurement is `iters` back-to-back calls (about --budget seconds), its time the slowest
 * rank's; the table shows the median over --rounds rounds as
 *   algbw = bytes / time                    what the caller sees, and
 *   busbw = algbw * 2(n-1)/n                what each link carries (NCCL-tests' definition),
 * and each method's busbw as a ratio of raw's: the median over rounds of the per-round ratio
 * (each round times every method back to back, so a burst of load hits a pair alike). To add a column, add an entry to `ms` in main.
 * Before timing, each method's result is checked once. */
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/median.h"
#include "ringgrad.h"

#define MAX_ROUNDS 64

typedef struct {
    const char *name;
    void (*run)(void *ctx, float *buf, int64_t count);
    void *ctx;
    /* Optional, for a method that reduces memory of its own (ddp): set up for count elements,
     * copy buf into that memory, copy the result back out. */
    void (*prepare)(void *ctx, int64_t count);
    void (*load)(void *ctx, const float *buf);
    void (*store)(void *ctx, float *buf);
    bool average; /* the result is the mean over ranks, not the sum */
} method;

static void run_raw(void *ctx, float *buf, int64_t count) {
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static void die_unless_ok(rg_status s) {
    if (s == RG_OK) return;
    fprintf(stderr, "allreduce_bench: %s\n", rg_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void run_comm(void *ctx, float *buf, int64_t count) {
    die_unless_ok(rg_comm_allreduce(ctx, buf, count, RG_COMM_F32, RG_REDUCE_SUM));
}
static void run_comm_avg(void *ctx, float *buf, int64_t count) {
    die_unless_ok(rg_comm_allreduce(ctx, buf, count, RG_COMM_F32, RG_REDUCE_AVG));
}

/* ---- the ddp method: a fake model's gradients through the DDP reducer ---- */

#define DDP_TENSOR_MAX ((int64_t)1 << 20) /* elements: 4 MiB */

typedef struct {
    rg_comm *comm;
    int64_t count; /* what the reducer below was built for */
    rg_tensor **params;
    rg_named_tensor *items;
    char (*names)[32];
    int n;
    rg_ddp *ddp;
    bool defer; /* defer_average: sums, the 1/N left to the optimizer */
} ddp_bench;

static void ddp_bench_clear(ddp_bench *b) {
    rg_ddp_free(b->ddp);
    for (int i = 0; i < b->n; i++) rg_tensor_free(b->params[i]);
    free(b->params), free(b->items), free(b->names);
    *b = (ddp_bench){.comm = b->comm, .defer = b->defer};
}

/* Layers of a weight of up to DDP_TENSOR_MAX - 128 elements and a bias of 128 (fewer at the end).
 */
static void ddp_prepare(void *ctx, int64_t count) {
    ddp_bench *b = ctx;
    if (b->ddp && b->count == count) return;
    ddp_bench_clear(b);
    int cap = (int)(2 * (count / DDP_TENSOR_MAX + 1));
    b->params = calloc(cap, sizeof *b->params);
    b->items = calloc(cap, sizeof *b->items);
    b->names = calloc(cap, sizeof *b->names);
    for (int64_t left = count; left > 0; b->n++) {
        int64_t bias = 128, n = b->n % 2 ? bias : DDP_TENSOR_MAX - bias;
        if (n > left) n = left;
        b->params[b->n] = rg_tensor_new(RG_F32, RG_SHAPE(n), RG_CPU);
        if (!b->params[b->n]) die_unless_ok(RG_ENOMEM);
        rg_tensor_set_requires_grad(b->params[b->n], true);
        snprintf(b->names[b->n], sizeof b->names[b->n], "layer%d.%s", b->n / 2,
                 b->n % 2 ? "bias" : "weight");
        b->items[b->n] = (rg_named_tensor){.name = b->names[b->n], .tensor = b->params[b->n]};
        left -= n;
    }
    rg_param_list list = {b->items, b->n};
    b->ddp = rg_ddp_new(&list, b->comm, &(rg_ddp_opts){.bucket_mb = 25, .first_bucket_mb = 1,
                                                        .defer_average = b->defer});
    if (!b->ddp) die_unless_ok(RG_EPEER);
    b->count = count;
}

static void ddp_load(void *ctx, const float *buf) {
    ddp_bench *b = ctx;
    for (int i = 0; i < b->n; i++) {
        rg_tensor_copy_from_host(b->params[i]->grad, buf);
        buf += b->params[i]->numel;
    }
}

static void ddp_store(void *ctx, float *buf) {
    ddp_bench *b = ctx;
    for (int i = 0; i < b->n; i++) {
        rg_tensor_copy_to_host(b->params[i]->grad, buf);
        buf += b->params[i]->numel;
    }
}

/* No backward ran, so rg_ddp_wait launches every bucket, in order, and waits for them. */
static void run_ddp(void *ctx, float *buf, int64_t count) {
    die_unless_ok(rg_ddp_wait(((ddp_bench *)ctx)->ddp));
}

typedef struct {
    int64_t min, max;
    double factor, budget;
    int rounds;
} options;

static int64_t parse_bytes(const char *s) {
    char *end;
    double v = strtod(s, &end);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    return (int64_t)(v * (double)((int64_t)1 << shift));
}

static options parse_args(int argc, char **argv) {
    options o = {4 << 10, 256 << 20, 4, 0.1, 5};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--min"))
            o.min = parse_bytes(argv[i + 1]);
        else if (!strcmp(argv[i], "--max"))
            o.max = parse_bytes(argv[i + 1]);
        else if (!strcmp(argv[i], "--factor"))
            o.factor = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            o.rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--budget"))
            o.budget = atof(argv[i + 1]);
        else
            fprintf(stderr, "allreduce_bench: ignoring %s\n", argv[i]);
    }
    if (o.rounds < 1) o.rounds = 1;
    if (o.rounds > MAX_ROUNDS) o.rounds = MAX_ROUNDS;
    if (o.factor < 1.01) o.factor = 2;
    if (o.min < 4) o.min = 4;
    return o;
}

/* Seconds per call of m over `iters` calls, as the slowest rank saw it. */
static double measure(const method *m, float *buf, int64_t count, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) m->run(m->ctx, buf, count);
    double t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

/* Rank r contributes r + 1 everywhere; the sum is n(n+1)/2, the mean (n+1)/2. */
static void check(const method *m, float *buf, int64_t count, int rank, int size) {
    for (int64_t i = 0; i < count; i++) buf[i] = (float)(rank + 1);
    if (m->load) m->load(m->ctx, buf);
    m->run(m->ctx, buf, count);
    if (m->store) m->store(m->ctx, buf);
    float want = m->average ? (float)(size + 1) / 2 : (float)size * (size + 1) / 2;
    for (int64_t i = 0; i < count; i++) {
        if (fabsf(buf[i] - want) > 1e-6f * want) {
            fprintf(stderr, "allreduce_bench: %s: element %lld of %lld is %g, want %g\n", m->name,
                    (long long)i, (long long)count, buf[i], want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    memset(buf, 0, (size_t)count * sizeof *buf); /* zeros stay zeros: no overflow, no denormals */
    if (m->load) m->load(m->ctx, buf);
}

static void bench_size(const method *ms, int nm, int64_t bytes, const options *o, int rank,
                       int size) {
    int64_t count = bytes / 4;
    float *buf = calloc(count, sizeof *buf);
    for (int k = 0; k < nm; k++) {
        if (ms[k].prepare) ms[k].prepare(ms[k].ctx, count);
        check(&ms[k], buf, count, rank, size);
    }
    /* Calls per measurement: about o->budget seconds of the baseline's best of three calls,
     * agreed by all ranks. */
    double best = INFINITY;
    for (int i = 0; i < 3; i++) best = fmin(best, measure(&ms[0], buf, count, 1));
    int iters = (int)fmin(1000, fmax(1, o->budget / best));
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double t[8][MAX_ROUNDS];
    for (int r = 0; r < o->rounds; r++)
        for (int k = 0; k < nm; k++) t[k][r] = measure(&ms[k], buf, count, iters);
    if (rank == 0) {
        /* the ratio: the median over rounds of raw's time / this method's in the same round
         * (interleaved pairs: load that hits one round hits both); before the medians, which
         * sort t in place */
        double bus = 2.0 * (size - 1) / size, ratio[8][MAX_ROUNDS];
        for (int k = 1; k < nm; k++)
            for (int r = 0; r < o->rounds; r++) ratio[k][r] = t[0][r] / t[k][r];
        printf("%10lld %6d", (long long)bytes, iters);
        for (int k = 0; k < nm; k++) {
            double alg = bytes / bench_median(t[k], o->rounds) / 1e9;
            printf(" | %7.3f %7.3f", alg, alg * bus);
            if (k > 0) printf(" %5.2f", bench_median(ratio[k], o->rounds));
        }
        printf("\n");
        fflush(stdout);
    }
    free(buf);
}

int main(int argc, char **argv) {
    options o = parse_args(argc, argv);
    rg_dist *d = rg_dist_init(&argc, &argv);
    if (!d || !rg_dist_launched(d)) {
        fprintf(stderr, "allreduce_bench: run me under scripts/rg-mpirun -np N (%s)\n",
                d ? "not launched by mpirun" : rg_last_error());
        return 1;
    }
    int rank = rg_dist_rank(d), size = rg_dist_size(d);
    rg_comm *mpi, *ring;
    if (rg_comm_new(d, RG_COMM_MPI, &mpi) != RG_OK ||
        rg_comm_new(d, RG_COMM_RING, &ring) != RG_OK) {
        fprintf(stderr, "allreduce_bench: %s\n", rg_last_error());
        return 1;
    }
    ddp_bench ddp = {.comm = mpi}, ddp_ring = {.comm = ring};
    ddp_bench ddp_sum = {.comm = mpi, .defer = true}, ddp_sum_ring = {.comm = ring, .defer = true};
    const method ms[] = {
        {.name = "raw", .run = run_raw},
        {.name = "mpi", .run = run_comm, .ctx = mpi},
        {.name = "ring", .run = run_comm, .ctx = ring},
        {.name = "avg", .run = run_comm_avg, .ctx = mpi, .average = true},
        {.name = "ddp",
         .run = run_ddp,
         .ctx = &ddp,
         .prepare = ddp_prepare,
         .load = ddp_load,
         .store = ddp_store,
         .average = true},
        {.name = "ddpring",
         .run = run_ddp,
         .ctx = &ddp_ring,
         .prepare = ddp_prepare,
         .load = ddp_load,
         .store = ddp_store,
         .average = true},
        {.name = "ddpsum",
         .run = run_ddp,
         .ctx = &ddp_sum,
         .prepare = ddp_prepare,
         .load = ddp_load,
         .store = ddp_store},
        {.name = "ddpsumring",
         .run = run_ddp,
         .ctx = &ddp_sum_ring,
         .prepare = ddp_prepare,
         .load = ddp_load,
         .store = ddp_store},
    };
    int nm = (int)(sizeof ms / sizeof *ms);
    _Static_assert(sizeof ms / sizeof *ms <= 8, "bench_size keeps times for 8 methods");
    if (rank == 0) {
        printf("# allreduce float32 SUM, %d ranks, median of %d rounds, GB/s. Per method: algbw, "
               "busbw = algbw * 2(n-1)/n, and busbw / raw busbw\n",
               size, o.rounds);
        printf("%10s %6s", "bytes", "iters");
        for (int k = 0; k < nm; k++) printf(" | %7s %7s%s", ms[k].name, "busbw", k ? " ratio" : "");
        printf("\n");
    }
    for (double b = (double)o.min; b <= (double)o.max * 1.0001; b *= o.factor)
        bench_size(ms, nm, ((int64_t)b + 3) / 4 * 4, &o, rank, size);
    ddp_bench_clear(&ddp);
    ddp_bench_clear(&ddp_ring);
    ddp_bench_clear(&ddp_sum);
    ddp_bench_clear(&ddp_sum_ring);
    rg_comm_free(mpi);
    rg_comm_free(ring);
    return rg_dist_finalize(d) == RG_OK ? 0 : 1;
}
