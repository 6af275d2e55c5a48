/* allreduce_bench — allreduce bandwidth through ringgrad's communicator, against raw
 * MPI_Allreduce on the same bytes in the same run.
 *
 *   scripts/rg-mpirun -np 2 build/bin/allreduce_bench [--min 4K] [--max 256M] [--factor 4]
 *                                                     [--rounds 5] [--budget 0.1]
 *                                                     [--methods raw,ring,ps] [--jsonl]
 *                                                     [--ps-chunk 64000]
 *
 * For each size (float32, SUM) it times these methods, interleaved round by round so that
 * noise from the machine hits them alike:
 *   raw   MPI_Allreduce on MPI_COMM_WORLD, called from the main thread: the baseline;
 *   rawsync  MPI_Barrier, then MPI_Allreduce: raw with the ranks lined up before every call, as
 *         the join (dist/join.c) lines them up before every collective of an mpi comm. Back to
 *         back, raw's calls drift apart and overlap one rank's copying with the other's summing;
 *         lined up, both do the same phase at once: a barrier alone cost 20-25% at 1-4 MiB on 2
 *         ranks of a 2-vCPU Zen 5 (docs/PERFORMANCE.md, tenth session);
 *   mpi   rg_comm_allreduce on an mpi comm: queue, comm thread, join, MPI_Allreduce (from 1 MiB
 *         the mpi comm runs our ring instead, dist/comm_mpi.c; RG_MPI_RING=0 for MPI's);
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
 *         anyway (rg_optim_set_grad_scale), so no pass of its own is timed here;
 *   ps    a parameter server's traffic with rank 0 as the server: every other rank sends its
 *         whole buffer to rank 0, which sums and sends the sum back to each (point to point, in
 *         chunks of --ps-chunk bytes, so that rank 0 sends chunk c back while chunk c+1 arrives).
 *         Rank 0's link carries (N-1) buffers each way, against 2(N-1)/N for a ring. The default
 *         chunk, 64,000 bytes, is under Open MPI's TCP eager limit (64 KiB): a bigger message
 *         goes by rendezvous, whose receiver must send an acknowledgement, and a worker's
 *         acknowledgement for the sum waits in its one TCP connection to rank 0 behind all the
 *         chunks it is still pushing, so push and pull no longer overlap (1 MiB chunks took
 *         2(N-1) buffer times instead of N-1 on the simulated 1 Gbit/s hosts);
 *   reducebcast  MPI_Reduce to rank 0, then MPI_Bcast: the same result through MPI's own
 *         (tree or pipelined) reduce and broadcast.
 * --methods raw,ring,ps picks methods (the first is the baseline of the ratios); --jsonl prints
 * one JSON line per size and method (bytes, ranks, method, time_s, algbw, busbw, iters) instead
 * of the table, for bench/lab_allreduce.sh.
 * A measurement is `iters` back-to-back calls (about --budget seconds), its time the slowest
 * rank's; the table shows the median over --rounds rounds as
 *   algbw = bytes / time                    what the caller sees, and
 *   busbw = algbw * 2(n-1)/n                what each link carries (NCCL-tests' definition),
 * and each method's busbw as a ratio of raw's: the median over rounds of the per-round ratio
 * (each round times every method back to back, so a burst of load hits a pair alike). To add a
 * column, add an entry to `ms` in main. Before timing, each method's result is checked once. */
#include <math.h>
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
#define MAX_METHODS 16

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

static void run_rawsync(void *ctx, float *buf, int64_t count) {
    MPI_Barrier(MPI_COMM_WORLD);
    run_raw(ctx, buf, count);
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

/* ---- the parameter-server pattern and MPI's reduce + broadcast ---- */

typedef struct {
    int rank, size;
    int64_t chunk;  /* elements per message */
    float *scratch; /* rank 0: the other ranks' buffers, (size - 1) x cap */
    int64_t cap;
    MPI_Request *reqs;
} ps_bench;

static void ps_prepare(void *ctx, int64_t count) {
    ps_bench *b = ctx;
    int64_t chunks = (count + b->chunk - 1) / b->chunk;
    if (b->cap >= count) return;
    free(b->scratch), free(b->reqs);
    b->scratch =
        b->rank == 0 ? malloc((size_t)(b->size - 1) * (size_t)count * sizeof(float)) : NULL;
    b->reqs = malloc((size_t)(2 * b->size * chunks + 1) * sizeof *b->reqs);
    if ((b->rank == 0 && !b->scratch) || !b->reqs) die_unless_ok(RG_ENOMEM);
    b->cap = count;
}

static void run_ps(void *ctx, float *buf, int64_t count) {
    ps_bench *b = ctx;
    const int64_t chunk = b->chunk;
    int w = b->size - 1, chunks = (int)((count + chunk - 1) / chunk);
    MPI_Request *r = b->reqs;
    if (b->rank == 0) { /* receive everything at once; sum and send back chunk by chunk */
        for (int c = 0; c < chunks; c++)
            for (int k = 0; k < w; k++) {
                int64_t off = c * chunk, n = count - off < chunk ? count - off : chunk;
                MPI_Irecv(b->scratch + k * count + off, (int)n, MPI_FLOAT, k + 1, 7, MPI_COMM_WORLD,
                          &r[c * w + k]);
            }
        MPI_Request *sends = r + chunks * w;
        for (int c = 0; c < chunks; c++) {
            int64_t off = c * chunk, n = count - off < chunk ? count - off : chunk;
            MPI_Waitall(w, &r[c * w], MPI_STATUSES_IGNORE);
            for (int k = 0; k < w; k++) {
                const float *x = b->scratch + k * count + off;
                for (int64_t i = 0; i < n; i++) buf[off + i] += x[i];
            }
            for (int k = 0; k < w; k++)
                MPI_Isend(buf + off, (int)n, MPI_FLOAT, k + 1, 8, MPI_COMM_WORLD,
                          &sends[c * w + k]);
        }
        MPI_Waitall(chunks * w, sends, MPI_STATUSES_IGNORE);
    } else { /* push every chunk; pull chunk c into its place once chunk c has gone */
        for (int c = 0; c < chunks; c++) {
            int64_t off = c * chunk, n = count - off < chunk ? count - off : chunk;
            MPI_Isend(buf + off, (int)n, MPI_FLOAT, 0, 7, MPI_COMM_WORLD, &r[c]);
        }
        for (int c = 0; c < chunks; c++) {
            int64_t off = c * chunk, n = count - off < chunk ? count - off : chunk;
            MPI_Wait(&r[c], MPI_STATUS_IGNORE);
            MPI_Irecv(buf + off, (int)n, MPI_FLOAT, 0, 8, MPI_COMM_WORLD, &r[chunks + c]);
        }
        MPI_Waitall(chunks, r + chunks, MPI_STATUSES_IGNORE);
    }
}

static void ps_clear(ps_bench *b) {
    free(b->scratch), free(b->reqs);
    b->scratch = NULL, b->reqs = NULL, b->cap = 0;
}

static void run_reduce_bcast(void *ctx, float *buf, int64_t count) {
    int rank = *(const int *)ctx;
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : buf, buf, (int)count, MPI_FLOAT, MPI_SUM, 0,
               MPI_COMM_WORLD);
    MPI_Bcast(buf, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
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
    b->ddp = rg_ddp_new(
        &list, b->comm,
        &(rg_ddp_opts){.bucket_mb = 25, .first_bucket_mb = 1, .defer_average = b->defer});
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
    const char *methods; /* comma-separated names, or NULL for all */
    int64_t ps_chunk;    /* bytes */
    bool jsonl;
} options;

static const char usage[] =
    "usage: allreduce_bench [--min 4K] [--max 256M] [--factor 4] [--rounds 5] [--budget 0.1]\n"
    "                       [--methods raw,ring,ps,...] [--jsonl] [--ps-chunk 64000]\n"
    "(under mpirun, 2 or more ranks; see the comment at the top of bench/allreduce_bench.c)\n";

static options parse_args(int argc, char **argv) {
    const char *prog = "allreduce_bench";
    options o = {4 << 10, 256 << 20, 4, 0.1, 5, NULL, 64000, false};
    bench_help(argc, argv, usage);
#define VALUE() bench_value(prog, argc, argv, &i, usage)
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--jsonl"))
            o.jsonl = true;
        else if (!strcmp(k, "--methods"))
            o.methods = VALUE();
        else if (!strcmp(k, "--ps-chunk"))
            o.ps_chunk = bench_parse_bytes(prog, VALUE());
        else if (!strcmp(k, "--min"))
            o.min = bench_parse_bytes(prog, VALUE());
        else if (!strcmp(k, "--max"))
            o.max = bench_parse_bytes(prog, VALUE());
        else if (!strcmp(k, "--factor"))
            o.factor = bench_num(prog, k, VALUE(), 1.01, 1024);
        else if (!strcmp(k, "--rounds"))
            o.rounds = (int)bench_int(prog, k, VALUE(), 1, MAX_ROUNDS);
        else if (!strcmp(k, "--budget"))
            o.budget = bench_num(prog, k, VALUE(), 1e-4, 3600);
        else
            bench_usage_error(prog, "unknown option", k, usage);
    }
#undef VALUE
    if (o.min < 4) o.min = 4;
    if (o.ps_chunk < 4) o.ps_chunk = 4;
    /* each size's buffer is one calloc of floats, and the sizes run from min up to max */
    if (o.max > ((int64_t)1 << 34) || o.min > o.max) {
        fprintf(stderr, "%s: need --min <= --max <= 16G (got %lld and %lld bytes)\n", prog,
                (long long)o.min, (long long)o.max);
        exit(2);
    }
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
    if (!buf) {
        fprintf(stderr, "allreduce_bench: out of memory for %lld bytes\n", (long long)bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
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
    double t[MAX_METHODS][MAX_ROUNDS];
    for (int r = 0; r < o->rounds; r++)
        for (int k = 0; k < nm; k++) t[k][r] = measure(&ms[k], buf, count, iters);
    if (rank == 0) {
        /* the ratio: the median over rounds of raw's time / this method's in the same round
         * (interleaved pairs: load that hits one round hits both); before the medians, which
         * sort t in place */
        double bus = 2.0 * (size - 1) / size, ratio[MAX_METHODS][MAX_ROUNDS];
        for (int k = 1; k < nm; k++)
            for (int r = 0; r < o->rounds; r++) ratio[k][r] = t[0][r] / t[k][r];
        if (o->jsonl) {
            for (int k = 0; k < nm; k++) {
                double sec = bench_median(t[k], o->rounds), alg = bytes / sec / 1e9;
                printf("{\"bytes\":%lld,\"ranks\":%d,\"method\":\"%s\",\"time_s\":%.9g,"
                       "\"algbw\":%.6g,\"busbw\":%.6g,\"iters\":%d,\"rounds\":%d}\n",
                       (long long)bytes, size, ms[k].name, sec, alg, alg * bus, iters, o->rounds);
            }
            fflush(stdout);
            free(buf);
            return;
        }
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

/* The methods of `all` named in the comma-separated list (every one if NULL), in the list's
 * order, into out; returns how many, 0 if a name is unknown. */
static int pick_methods(const method *all, int n_all, const char *list, method *out) {
    if (!list) {
        memcpy(out, all, (size_t)n_all * sizeof *all);
        return n_all;
    }
    int n = 0;
    for (const char *p = list; *p && n < MAX_METHODS;) {
        size_t len = strcspn(p, ",");
        int k = 0;
        while (k < n_all && (strlen(all[k].name) != len || strncmp(all[k].name, p, len))) k++;
        if (k == n_all) return 0;
        out[n++] = all[k];
        p += len + (p[len] == ',');
    }
    return n;
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
    ps_bench ps = {.rank = rank, .size = size, .chunk = o.ps_chunk / 4};
    const method all[] = {
        {.name = "raw", .run = run_raw},
        {.name = "rawsync", .run = run_rawsync},
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
        {.name = "ps", .run = run_ps, .ctx = &ps, .prepare = ps_prepare},
        {.name = "reducebcast", .run = run_reduce_bcast, .ctx = &rank},
    };
    _Static_assert(sizeof all / sizeof *all <= MAX_METHODS, "bench_size keeps MAX_METHODS times");
    method ms[MAX_METHODS];
    int nm = pick_methods(all, (int)(sizeof all / sizeof *all), o.methods, ms);
    if (nm == 0) {
        if (rank == 0)
            fprintf(stderr, "allreduce_bench: --methods '%s': no such method\n", o.methods);
        return 2;
    }
    if (rank == 0 && !o.jsonl) {
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
    ps_clear(&ps);
    rg_comm_free(mpi);
    rg_comm_free(ring);
    return rg_dist_finalize(d) == RG_OK ? 0 : 1;
}
