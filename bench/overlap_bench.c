/* overlap_bench — how much of the gradient communication the DDP reducer hides behind backward.
 *
 *   scripts/rg-mpirun -np 2 build/bin/overlap_bench [--steps 20] [--warmup 2] [--batch-size 128]
 *                                                   [--bucket-mb 25] [--threads 1] [--fp16]
 *   scripts/sim-cluster.sh run 2 --rate 1gbit -- -np 2 build/bin/overlap_bench ...
 *   (bench/overlap.sh runs it on the simulated 1 and 10 Gbit/s links and on shared memory.)
 *
 * It trains three copies of the CNN side by side, each wrapped in its own DDP reducer:
 *   overlap     buckets reduced by the comm thread while backward is still running;
 *   no-overlap  one allreduce of all gradients after backward (rg_ddp_opts.no_overlap);
 *   compute     no gradient sent, only a barrier in rg_ddp_wait (rg_ddp_opts.no_allreduce),
 * and takes their steps in turn (the order rotates every round), so the load from whatever else
 * runs on the machine falls on the three alike. Every step starts from a barrier, and a step's
 * time is the slowest rank's. From the medians:
 *
 *   hidden = (T_no_overlap - T_overlap) / (T_no_overlap - T_compute)
 *
 * the fraction of the communication time that overlap takes off the step (1: all of it; 0: none).
 * It also prints each phase's median (forward, backward, ddp_wait, optimizer; mean over ranks),
 * where the cost shows: in ddp_wait (communication not hidden) or in a slower backward (the comm
 * path taking CPU time from the compute thread), and the CPU time (user and system) the step used
 * on the main thread (`cpu_main`) and on the process's other threads (`cpu_comm`: the comm
 * thread, as the bench runs no loader and one compute thread). CPU times do not change with the
 * load of other programs; cpu_comm is what the communication costs in CPU, which can only be
 * hidden where a core is free to run it. softirq* and idle* are the whole machine's interrupt and
 * idle time during the step, summed over its cores (means: /proc/stat counts them at the tick):
 * the kernel's network processing for both simulated hosts runs as softirqs, charged to no
 * thread of ours.
 *
 * Every copy trains on the same fixed random batch, which costs what a real one does. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/args.h"
#include "bench/median.h"
#include "ringgrad.h"

enum { MODE_OVERLAP, MODE_NO_OVERLAP, MODE_COMPUTE, MODE_COUNT };
static const char *const mode_names[] = {"overlap", "no-overlap", "compute"};
_Static_assert(sizeof mode_names / sizeof *mode_names == MODE_COUNT, "a name per mode");

enum {
    PH_STEP,
    PH_FORWARD,
    PH_BACKWARD,
    PH_WAIT,
    PH_OPTIM,
    PH_CPU_MAIN,
    PH_CPU_OTHER,
    PH_SOFTIRQ, /* machine-wide, from /proc/stat: sampled at the tick, so reported as a mean */
    PH_IDLE,
    PH_COUNT
};
static const char *const phase_names[] = {"step",     "forward",   "backward",
                                          "ddp_wait", "optimizer", "cpu_main",
                                          "cpu_comm", "softirq*",  "idle*"};
_Static_assert(sizeof phase_names / sizeof *phase_names == PH_COUNT, "a name per phase");

typedef struct {
    int steps, warmup, batch, threads;
    double bucket_mb;
    bool fp16; /* gradients travel as float16 (rg_ddp_opts.compress_fp16) */
    const char *timeline;
} options;

typedef struct {
    rg_model *net;
    rg_optim *opt;
    rg_ddp *ddp;
} replica;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time, user and system, of the calling thread (RUSAGE_THREAD) or of the whole process
 * (RUSAGE_SELF), in seconds. */
static double cpu_s(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* The machine's softirq and idle time over all CPUs so far, in seconds (/proc/stat; 0 if absent).
 * The kernel's network processing for both simulated hosts runs as softirqs, on any core. */
static void machine_s(double *softirq, double *idle) {
    unsigned long long v[7] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                    &v[5], &v[6]) != 7)
        memset(v, 0, sizeof v);
    if (f) fclose(f);
    double tick = 1.0 / (double)sysconf(_SC_CLK_TCK);
    *softirq = (double)(v[5] + v[6]) * tick; /* irq + softirq */
    *idle = (double)(v[3] + v[4]) * tick;    /* idle + iowait */
}

static void die(const char *what) {
    fprintf(stderr, "overlap_bench: %s: %s\n", what, rg_last_error());
    exit(1);
}

static const char usage[] =
    "usage: overlap_bench [--steps 20] [--warmup 2] [--batch-size 128] [--threads 1]\n"
    "                     [--bucket-mb 25] [--fp16] [--timeline FILE]\n"
    "(under mpirun; see the comment at the top of bench/overlap_bench.c)\n";

static options parse_args(int argc, char **argv) {
    const char *prog = "overlap_bench";
    options o = {.steps = 20, .warmup = 2, .batch = 128, .threads = 1, .bucket_mb = 25};
    bench_help(argc, argv, usage);
#define VALUE() bench_value(prog, argc, argv, &i, usage)
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--fp16"))
            o.fp16 = true;
        else if (!strcmp(k, "--steps"))
            o.steps = (int)bench_int(prog, k, VALUE(), 1, 1000000);
        else if (!strcmp(k, "--warmup"))
            o.warmup = (int)bench_int(prog, k, VALUE(), 0, 1000000);
        else if (!strcmp(k, "--batch-size"))
            o.batch = (int)bench_int(prog, k, VALUE(), 1, 1 << 20);
        else if (!strcmp(k, "--threads"))
            o.threads = (int)bench_int(prog, k, VALUE(), 1, 1024);
        else if (!strcmp(k, "--bucket-mb"))
            o.bucket_mb = bench_num(prog, k, VALUE(), 0.001, 1 << 20);
        else if (!strcmp(k, "--timeline"))
            o.timeline = VALUE();
        else
            bench_usage_error(prog, "unknown option", k, usage);
    }
#undef VALUE
    return o;
}

static replica make_replica(rg_comm *comm, int mode, const options *o) {
    replica r = {.net = rg_model_cnn(42)};
    const rg_param_list *params = rg_model_params(r.net);
    r.opt = rg_adam_new(params, &(rg_adam_opts){.lr = 1e-3f});
    r.ddp = rg_ddp_new(params, comm,
                       &(rg_ddp_opts){.bucket_mb = o->bucket_mb,
                                      .compress_fp16 = o->fp16,
                                      .no_overlap = mode == MODE_NO_OVERLAP,
                                      .no_allreduce = mode == MODE_COMPUTE});
    if (!r.opt || !r.ddp) die("set-up");
    return r;
}

/* One training step of r; t[phase] gets the phases' seconds. */
static void step(replica *r, rg_tensor *x, rg_tensor *y, double t[PH_COUNT]) {
    rg_scope_begin();
    double si0, id0;
    machine_s(&si0, &id0);
    double p0 = cpu_s(RUSAGE_SELF), c0 = cpu_s(RUSAGE_THREAD), t0 = now_s();
    rg_trace_begin("forward", "compute");
    rg_tensor *loss = rg_cross_entropy(rg_model_forward(r->net, x, RG_TRAIN), y);
    rg_tensor_item(loss);
    rg_trace_end();
    double t1 = now_s();
    rg_trace_begin("backward", "compute");
    rg_backward(loss);
    rg_trace_end();
    double t2 = now_s();
    rg_trace_begin("ddp_wait", "comm");
    if (rg_ddp_wait(r->ddp) != RG_OK) die("rg_ddp_wait");
    rg_trace_end();
    double t3 = now_s();
    rg_trace_begin("optimizer", "compute");
    rg_optim_step(r->opt);
    rg_optim_zero_grad(r->opt);
    rg_trace_end();
    rg_scope_end();
    double t4 = now_s(), c4 = cpu_s(RUSAGE_THREAD), p4 = cpu_s(RUSAGE_SELF), si4, id4;
    machine_s(&si4, &id4);
    double ph[PH_COUNT] = {
        t4 - t0,   t1 - t0,  t2 - t1, t3 - t2, t4 - t3, c4 - c0, (p4 - p0) - (c4 - c0),
        si4 - si0, id4 - id0};
    memcpy(t, ph, sizeof ph);
}

/* times[(mode * steps + s) * PH_COUNT + phase] on every rank; rank 0 prints the medians: of the
 * slowest rank's time for whole steps, of the mean over ranks for phases. */
static void report(rg_comm *comm, const double *times, const options *o) {
    int size = rg_comm_size(comm), n = MODE_COUNT * o->steps * PH_COUNT;
    float *mine = malloc(n * sizeof *mine), *all = malloc((size_t)size * n * sizeof *all);
    for (int i = 0; i < n; i++) mine[i] = (float)(times[i] * 1e3); /* ms */
    if (rg_comm_allgather(comm, mine, all, n, RG_COMM_F32) != RG_OK) die("allgather");
    if (rg_comm_rank(comm) == 0) {
        double med[MODE_COUNT][PH_COUNT], *v = malloc(o->steps * sizeof *v);
        for (int m = 0; m < MODE_COUNT; m++) {
            for (int p = 0; p < PH_COUNT; p++) {
                for (int s = 0; s < o->steps; s++) {
                    int i = (m * o->steps + s) * PH_COUNT + p;
                    double agg = 0;
                    for (int r = 0; r < size; r++)
                        agg =
                            p == PH_STEP ? fmax(agg, all[r * n + i]) : agg + all[r * n + i] / size;
                    v[s] = agg;
                }
                if (p >= PH_SOFTIRQ) { /* tick-sampled: a mean, not a median */
                    double sum = 0;
                    for (int s = 0; s < o->steps; s++) sum += v[s];
                    med[m][p] = sum / o->steps;
                } else {
                    med[m][p] = bench_median(v, o->steps);
                }
            }
            printf("%-10s", mode_names[m]);
            for (int p = 0; p < PH_COUNT; p++) printf(" %9.1f", med[m][p]);
            printf("\n");
        }
        double comm_ms = med[MODE_NO_OVERLAP][PH_STEP] - med[MODE_COMPUTE][PH_STEP];
        double saved = med[MODE_NO_OVERLAP][PH_STEP] - med[MODE_OVERLAP][PH_STEP];
        printf("# communication %.1f ms per step (no-overlap - compute), overlap saves %.1f ms: ",
               comm_ms, saved);
        if (comm_ms > 0)
            printf("hidden = %.2f\n", saved / comm_ms);
        else /* one rank, or noise larger than the communication */
            printf("hidden = n/a (no communication time to hide)\n");
        printf("{\"ranks\":%d,\"batch_size\":%d,\"steps\":%d,\"bucket_mb\":%g,\"fp16\":%s,", size,
               o->batch, o->steps, o->bucket_mb, o->fp16 ? "true" : "false");
        static const char *const keys[] = {"overlap", "no_overlap", "compute"};
        _Static_assert(sizeof keys / sizeof *keys == MODE_COUNT, "a key per mode");
        static const int cols[] = {PH_STEP,      PH_BACKWARD, PH_WAIT,
                                   PH_CPU_OTHER, PH_SOFTIRQ,  PH_IDLE};
        static const char *const col_keys[] = {"step_ms",     "backward_ms", "ddp_wait_ms",
                                               "cpu_comm_ms", "softirq_ms",  "idle_ms"};
        for (int c = 0; c < (int)(sizeof cols / sizeof *cols); c++) {
            printf("\"%s\":{", col_keys[c]);
            for (int m = 0; m < MODE_COUNT; m++)
                printf("\"%s\":%.2f%s", keys[m], med[m][cols[c]], m + 1 < MODE_COUNT ? "," : "},");
        }
        printf("\"comm_ms\":%.2f,\"hidden\":%.3f}\n", comm_ms,
               comm_ms > 0 ? saved / comm_ms : -1.0);
        free(v);
    }
    free(mine);
    free(all);
}

int main(int argc, char **argv) {
    options o = parse_args(argc, argv);
    rg_dist *d = rg_dist_init(&argc, &argv);
    if (!d) die("rg_dist_init");
    rg_comm *comm = rg_dist_comm(d);
    rg_set_num_threads(o.threads);
    int rank = rg_comm_rank(comm);

    replica reps[MODE_COUNT];
    for (int m = 0; m < MODE_COUNT; m++) reps[m] = make_replica(comm, m, &o);
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(o.batch, 1, 28, 28), RG_CPU);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(o.batch), RG_CPU);
    if (!x || !y) die("batch");
    uint64_t off = 0;
    rg_tensor_uniform_(x, 0, 1, 1000 + (uint64_t)rank, &off);
    for (int i = 0; i < o.batch; i++) ((int64_t *)y->data)[i] = (i * 7 + rank) % 10;
    if (rank == 0) {
        printf(
            "# overlap_bench: %d ranks x %d thread(s), CNN, batch %d per rank, buckets %g MiB%s, "
            "%d steps per mode after %d warm-up, ms (medians)\n",
            rg_comm_size(comm), o.threads, o.batch, o.bucket_mb, o.fp16 ? " (fp16)" : "", o.steps,
            o.warmup);
        for (int b = 0; b < rg_ddp_num_buckets(reps[0].ddp); b++)
            printf("#   bucket %d: %d tensors, %zu bytes\n", b,
                   rg_ddp_bucket_params(reps[0].ddp, b), rg_ddp_bucket_bytes(reps[0].ddp, b));
        printf("%-10s", "mode");
        for (int p = 0; p < PH_COUNT; p++) printf(" %9s", phase_names[p]);
        printf("\n");
        fflush(stdout);
    }

    double *times = calloc((size_t)MODE_COUNT * o.steps * PH_COUNT, sizeof *times), t[PH_COUNT];
    for (int s = -o.warmup; s < o.steps; s++) {
        if (s == 0 && o.timeline) {
            rg_trace_name_thread("main");
            if (rg_timeline_start(comm) != RG_OK) die("timeline");
        }
        for (int k = 0; k < MODE_COUNT; k++) {
            int m = (k + (s < 0 ? 0 : s)) % MODE_COUNT; /* rotate which mode goes first */
            if (rg_comm_barrier(comm) != RG_OK) die("barrier");
            step(&reps[m], x, y, t);
            if (s >= 0) memcpy(&times[(m * o.steps + s) * PH_COUNT], t, sizeof t);
        }
    }
    if (o.timeline) {
        rg_trace_stop();
        if (rg_timeline_write(comm, o.timeline) != RG_OK) die("timeline");
    }
    report(comm, times, &o);

    free(times);
    rg_tensor_free(x);
    rg_tensor_free(y);
    for (int m = 0; m < MODE_COUNT; m++) {
        rg_ddp_free(reps[m].ddp);
        rg_optim_free(reps[m].opt);
        rg_model_free(reps[m].net);
    }
    return rg_dist_finalize(d) == RG_OK ? 0 : 1;
}
