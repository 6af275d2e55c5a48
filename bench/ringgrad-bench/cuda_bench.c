/* cuda_bench.c — `ringgrad-bench --device cuda` (see cuda_bench.h): options, the GPU, and the
 * gemm and conv parts; cuda_bench_train.c has the CNN step and the communication.
 *
 *   ringgrad-bench --device cuda [--only gemm|conv|cnn|resnet|comm] [--iters N] [--batch N]
 *                                [--model NAME] [--image-size S] [--max-mb N]
 *   mpirun -np G ringgrad-bench --device cuda        G GPUs, one rank each (comm needs G >= 2)
 *
 * Every rank runs every part on its own GPU; rank 0 prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_bench.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ringgrad-bench --device cuda [options]   (under mpirun: one rank per GPU)\n"
               "  --only gemm|conv|cnn|resnet|comm  run one part (default: all five)\n"
               "  --iters N                  timed repetitions per result, median (default 9)\n"
               "  --batch N                  images per conv shape and per CNN step (default 64),\n"
               "                             per ResNet step (default 32)\n"
               "  --model NAME               resnet: the model (default resnet50)\n"
               "  --image-size S             resnet: 3xSxS images (default 224)\n"
               "  --max-mb N                 comm: largest allreduce in MiB (default 256)\n"
               "  --help                     this text\n"
               "RG_CUDA_TF32=1 lets both ringgrad and the libraries use TF32 tensor cores.\n");
}

static bool parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "ringgrad-bench: %s needs an integer in [%d, %d], got '%s'\n", flag, lo, hi,
                v ? v : "");
        return false;
    }
    *out = (int)x;
    return true;
}

/* 0 to go on, else the exit code. */
static int parse(int argc, char **argv, rgbc_ctx *b, const char **only) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--device")) {
            ok = v && !strncmp(v, "cuda", 4), i++;
        } else if (!strcmp(a, "--only")) {
            *only = v, i++;
            ok = v && (!strcmp(v, "gemm") || !strcmp(v, "conv") || !strcmp(v, "cnn") ||
                       !strcmp(v, "resnet") || !strcmp(v, "comm"));
        } else if (!strcmp(a, "--iters")) {
            ok = parse_int(a, v, 1, 1000, &b->iters), i++;
        } else if (!strcmp(a, "--batch")) {
            ok = parse_int(a, v, 1, 4096, &b->batch), i++;
            b->resnet_batch = b->batch;
        } else if (!strcmp(a, "--model")) {
            ok = v != NULL, b->model = v, i++;
        } else if (!strcmp(a, "--image-size")) {
            ok = parse_int(a, v, 8, 4096, &b->image_size), i++;
        } else if (!strcmp(a, "--max-mb")) {
            ok = parse_int(a, v, 1, 16384, &b->max_mb), i++;
        } else {
            fprintf(stderr, "ringgrad-bench: unknown option '%s' with --device cuda\n", a);
            ok = false;
        }
        if (!ok) {
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* ---- timing ---- */

double rgbc_time_ms(rgbc_ctx *b, void (*fn)(void *), void *arg, int reps) {
    rg_cuda_timer_start(b->timer);
    for (int i = 0; i < reps; i++) fn(arg);
    rg_cuda_timer_stop(b->timer);
    return rg_cuda_timer_elapsed_ms(b->timer);
}

/* Calls per measurement so that one lasts about 5 ms. The first call is a warm-up and is not
 * timed: it pays for cuBLAS's kernel choice, a conv plan and cudnnFind, and sizing the
 * measurements from it gave the side that went first (ours) one call per measurement, whose
 * host-side gap after the start event then counted as GPU time (the first H200 run's 0.6 for the
 * backend's 1024^3 GEMM against the same cuBLAS call). */
static int reps_for(rgbc_ctx *b, void (*fn)(void *), void *arg) {
    rgbc_time_ms(b, fn, arg, 1);
    double ms = rgbc_time_ms(b, fn, arg, 1);
    int reps = ms > 0 ? (int)(5.0 / ms) : 100;
    return reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
}

/* Medians of ms per call of ours and theirs, measured interleaved. */
static void time_pair(rgbc_ctx *b, void (*ours)(void *), void (*theirs)(void *), void *arg,
                      double *ms_ours, double *ms_theirs) {
    int r1 = reps_for(b, ours, arg), r2 = reps_for(b, theirs, arg);
    double *t1 = malloc(sizeof(double) * (size_t)b->iters),
           *t2 = malloc(sizeof(double) * (size_t)b->iters);
    if (!t1 || !t2) abort();
    for (int i = 0; i < b->iters; i++) {
        t1[i] = rgbc_time_ms(b, ours, arg, r1) / r1;
        t2[i] = rgbc_time_ms(b, theirs, arg, r2) / r2;
    }
    *ms_ours = rgb_median(t1, b->iters), *ms_theirs = rgb_median(t2, b->iters);
    free(t1), free(t2);
}

/* ---- gemm ---- */

/* One timed call: gemm c = a bm (m,n,k), or conv pass `pass` of shape s with a, bm, c = x, w, y. */
typedef struct {
    rgbc_ctx *b;
    rgbc_vendor *v;
    int64_t m, n, k;
    float *a, *bm, *c;
    rg_conv2d_shape s;
    rgbc_pass pass;
} job;

static void gemm_ours(void *p) {
    job *j = p;
    j->b->gpu->gemm(false, false, j->m, j->n, j->k, 1.0f, j->a, j->k, j->bm, j->n, 0.0f, j->c,
                    j->n);
}

static void gemm_theirs(void *p) {
    job *j = p;
    rgbc_vendor_gemm(j->v, j->m, j->n, j->k, j->a, j->bm, j->c);
}

static float *random_device(rgbc_ctx *b, int64_t n, uint64_t seed) {
    float *p = b->gpu->alloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "ringgrad-bench: out of GPU memory for %lld floats\n", (long long)n);
        exit(1);
    }
    b->gpu->uniform(n, -1.0f, 1.0f, seed, 0, p);
    return p;
}

static void run_gemm(rgbc_ctx *b, rgbc_vendor *v) {
    static const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                                        {8192, 8192, 8192}, {65536, 128, 128},  {128, 128, 9216},
                                        {128, 9216, 128}};
    if (b->print)
        printf("\ngemm: C (m,n) = A (m,k) B (k,n), float32, TFLOP/s (median of %d)\n"
               "%-20s %10s %10s %8s\n",
               b->iters, "m x n x k", "ringgrad", "cuBLAS", "ratio");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        job j = {.b = b, .v = v, .m = shapes[i][0], .n = shapes[i][1], .k = shapes[i][2]};
        j.a = random_device(b, j.m * j.k, 1), j.bm = random_device(b, j.k * j.n, 2);
        j.c = random_device(b, j.m * j.n, 3);
        double ours, theirs, flop = 2.0 * (double)j.m * (double)j.n * (double)j.k;
        time_pair(b, gemm_ours, gemm_theirs, &j, &ours, &theirs);
        char name[64];
        snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)j.m, (long long)j.n,
                 (long long)j.k);
        if (b->print)
            printf("%-20s %10.2f %10.2f %8.3f\n", name, flop / ours * 1e-9, flop / theirs * 1e-9,
                   theirs / ours);
        b->gpu->free(j.a, (size_t)(j.m * j.k) * 4);
        b->gpu->free(j.bm, (size_t)(j.k * j.n) * 4);
        b->gpu->free(j.c, (size_t)(j.m * j.n) * 4);
    }
}

/* ---- conv ---- */

static void conv_ours(void *p) {
    job *j = p;
    const rg_backend *g = j->b->gpu;
    if (j->pass == RGBC_FWD)
        g->conv2d_forward(&j->s, j->a, j->bm, NULL, j->c);
    else if (j->pass == RGBC_BWD_DATA)
        g->conv2d_backward_data(&j->s, j->c, j->bm, 0.0f, j->a);
    else
        g->conv2d_backward_filter(&j->s, j->a, j->c, 0.0f, j->bm, NULL);
}

static void conv_theirs(void *p) {
    job *j = p;
    rgbc_vendor_conv(j->v, j->pass, j->a, j->bm, j->c);
}

typedef struct {
    const char *name;
    int c, hw, k, rs, stride, pad;
} conv_layer;

static const conv_layer layers[] = {
    {"cnn.conv1", 1, 28, 32, 3, 1, 0},     {"cnn.conv2", 32, 26, 64, 3, 1, 0},
    {"r18.conv1", 3, 224, 64, 7, 2, 3},    {"r18.layer1", 64, 56, 64, 3, 1, 1},
    {"r18.layer2", 128, 28, 128, 3, 1, 1}, {"r18.layer3", 256, 14, 256, 3, 1, 1},
    {"r18.layer4", 512, 7, 512, 3, 1, 1},  {"r50.1x1", 256, 56, 64, 1, 1, 0},
};

static void run_conv(rgbc_ctx *b, rgbc_vendor *v) {
    static const char *const pass_names[] = {"forward", "bwd-data", "bwd-filter"};
    if (b->print)
        printf("\nconv2d, batch %d, float32, TFLOP/s (median of %d); cuDNN with the algorithm "
               "cudnnFind* measured fastest\n%-12s %-10s %10s %10s %8s %5s\n",
               b->batch, b->iters, "layer", "pass", "ringgrad", "cuDNN", "ratio", "algo");
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        const conv_layer *l = &layers[i];
        int64_t p = (l->hw + 2 * l->pad - l->rs) / l->stride + 1;
        job j = {.b = b, .v = v};
        j.s = (rg_conv2d_shape){.n = b->batch,
                                .c = l->c,
                                .h = l->hw,
                                .w = l->hw,
                                .k = l->k,
                                .r = l->rs,
                                .s = l->rs,
                                .p = p,
                                .q = p,
                                .stride_h = l->stride,
                                .stride_w = l->stride,
                                .pad_h = l->pad,
                                .pad_w = l->pad};
        int64_t nx = j.s.n * j.s.c * j.s.h * j.s.w, nw = j.s.k * j.s.c * j.s.r * j.s.s,
                ny = j.s.n * j.s.k * p * p;
        j.a = random_device(b, nx, 4), j.bm = random_device(b, nw, 5),
        j.c = random_device(b, ny, 6);
        bool planned = rgbc_vendor_conv_plan(v, &j.s, j.a, j.bm, j.c);
        double flop = 2.0 * (double)ny * (double)(j.s.c * j.s.r * j.s.s);
        for (int pass = 0; planned && pass < RGBC_PASS_COUNT; pass++) {
            j.pass = (rgbc_pass)pass;
            double ours, theirs;
            time_pair(b, conv_ours, conv_theirs, &j, &ours, &theirs);
            if (b->print)
                printf("%-12s %-10s %10.2f %10.2f %8.3f %5d\n", l->name, pass_names[pass],
                       flop / ours * 1e-9, flop / theirs * 1e-9, theirs / ours,
                       rgbc_vendor_conv_algo(v, j.pass));
        }
        if (!planned && b->print) printf("%-12s cuDNN found no usable algorithm\n", l->name);
        b->gpu->free(j.a, (size_t)nx * 4), b->gpu->free(j.bm, (size_t)nw * 4);
        b->gpu->free(j.c, (size_t)ny * 4);
    }
}

/* ---- the program ---- */

static bool wants(const char *only, const char *part) {
    return !only || !strcmp(only, part);
}

static int no_device(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r || !strcmp(r, "0"))
        fprintf(stderr, "ringgrad-bench: --device cuda: no CUDA device (%s)\n",
                rg_cuda_compiled() ? "this build has the CUDA backend, but the driver found no GPU"
                                   : "this build has no CUDA backend; rebuild with -DRG_CUDA=ON");
    return 1;
}

static void print_header(rgbc_ctx *b) {
    char name[256];
    if (rg_cuda_device_name(b->dev.index, name, sizeof name) != RG_OK)
        snprintf(name, sizeof name, "?");
    const char *tf32 = getenv("RG_CUDA_TF32");
    printf("ringgrad-bench --device cuda: %s, %d rank%s (one GPU each), %s math\n", name, b->size,
           b->size == 1 ? "" : "s", tf32 && *tf32 && strcmp(tf32, "0") ? "TF32" : "FP32");
}

int rg_bench_cuda(int argc, char **argv) {
    rgbc_ctx b = {.iters = 9,
                  .batch = 64,
                  .max_mb = 256,
                  .model = "resnet50",
                  .image_size = 224,
                  .resnet_batch = 32};
    const char *only = NULL;
    int code = parse(argc, argv, &b, &only);
    if (code) return code < 0 ? 0 : code;
    if (rg_cuda_device_count() == 0) return no_device();
    b.dist = rg_dist_init_opts(&argc, &argv, &(rg_dist_opts){.comm = "mpi"});
    if (!b.dist) {
        fprintf(stderr, "ringgrad-bench: %s\n", rg_last_error());
        return 1;
    }
    b.rank = rg_dist_rank(b.dist), b.size = rg_dist_size(b.dist), b.print = b.rank == 0;
    if (rg_cuda_set_device(rg_dist_local_rank(b.dist), &b.dev) != RG_OK ||
        rg_cuda_timer_new(b.dev, &b.timer) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: rank %d: %s\n", b.rank, rg_last_error());
        RG_IGNORE(rg_dist_finalize(b.dist)); /* the error above is the one to report */
        return 1;
    }
    b.gpu = rg_backend_for(b.dev);
    if (b.print) print_header(&b);
    rgbc_vendor *v = rgbc_vendor_new(b.dev.index);
    if (wants(only, "gemm")) run_gemm(&b, v);
    if (wants(only, "conv")) run_conv(&b, v);
    rgbc_vendor_free(v);
    if (wants(only, "cnn")) rgbc_run_cnn(&b);
    if (wants(only, "resnet")) rgbc_run_resnet(&b);
    if (wants(only, "comm")) rgbc_run_comm(&b);
    rg_cuda_timer_free(b.timer);
    return rg_dist_finalize(b.dist) == RG_OK ? 0 : 1;
}
