/* cnn.c — the Fashion-MNIST CNN's training step against its GEMM floor.
 *
 * The step is built here from ops, and mirrors the model in models/ (conv1 Conv2d(1,32,3) ->
 * ReLU -> conv2 Conv2d(32,64,3) -> ReLU -> MaxPool2d(2) -> Dropout(0.25) -> Flatten -> fc1
 * Linear(9216,128) -> ReLU -> Dropout(0.5) -> fc2 Linear(128,10) -> cross-entropy, then Adam on
 * every parameter). If the two drift apart, this one is the copy to fix.
 *
 * The GEMM floor is the time of the matrix products an im2col implementation of the step needs,
 * timed alone through cblas_sgemm over the whole batch (the largest and fastest form; at several
 * threads one slice of C per thread, rgb_sgemm in util.c, as the library does): conv2
 * forward, weight gradient and input gradient; conv1 forward and weight gradient (its input needs
 * no gradient); fc1 forward and both gradients. A step that reaches 100% of the floor would do
 * everything else (im2col, ReLU, pooling, dropout, loss, Adam) for free. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ringgrad.h"
#include "tensor/backend_impl.h" /* kernels are timed through the backend table */

#define BATCH 128
#define NPARAM 8
/* FLOP of one image's step, counting the matrix products only (the floor's GEMMs below, per
 * image): conv2 forward, weight and input gradients 3 x 2*64*288*576 = 63.70 M; conv1 forward and
 * weight gradient 2 x 2*32*9*676 = 0.78 M; fc1 forward and both gradients 3 x 2*9216*128 =
 * 7.08 M; in all 71.56 MFLOP (fc2's 7.7 kFLOP left out). The "of FMA peak" column counts
 * those, what a direct convolution multiplies; the "FMAs run" column counts what the step
 * multiplies: conv2's three passes run Winograd's F(2x2, 3x3) (tensor/cpu/conv2d_winograd.c: 3x3,
 * stride 1, 32 and 64 channels) unless RG_CONV_WINOGRAD=0, 16 products per 2x2 output tile and
 * channel pair: 16*144*32*64*2 = 9.44 M in the forward and the filter pass each, and
 * 16*169*64*32*2 = 11.08 M in the data pass (its 26x26 output); 37.83 MFLOP in all. */
#define CNN_MFLOP 71.56
#define CNN_WINOGRAD_MFLOP (CNN_MFLOP - 3 * 21.23 + 2 * 9.44 + 11.08)

/* MFLOP per image the step multiplies (see above). */
static double cnn_mflop_run(void) {
    const char *v = getenv("RG_CONV_WINOGRAD");
    return v && strcmp(v, "0") == 0 ? CNN_MFLOP : CNN_WINOGRAD_MFLOP;
}

typedef struct {
    rg_tensor *p[NPARAM], *m[NPARAM], *v[NPARAM]; /* parameters and Adam's moments */
    rg_tensor *x, *labels;                        /* one fixed batch */
    int64_t step;
    uint64_t drop_offset;
} cnn;

static void cnn_init(cnn *net) {
    static const int64_t shapes[NPARAM][4] = {{32, 1, 3, 3}, {32},  {64, 32, 3, 3}, {64},
                                              {128, 9216},   {128}, {10, 128},      {10}};
    static const int ndims[NPARAM] = {4, 1, 4, 1, 2, 1, 2, 1};
    static const double fan_in[NPARAM] = {9, 9, 288, 288, 9216, 9216, 128, 128};
    uint64_t off = 0;
    for (int i = 0; i < NPARAM; i++) {
        net->p[i] = rg_tensor_new(RG_F32, ndims[i], shapes[i], RG_CPU);
        net->m[i] = rg_tensor_new(RG_F32, ndims[i], shapes[i], RG_CPU);
        net->v[i] = rg_tensor_new(RG_F32, ndims[i], shapes[i], RG_CPU);
        RG_CHECK(net->p[i] && net->m[i] && net->v[i], "cnn bench: %s", rg_last_error());
        float bound = (float)(1.0 / sqrt(fan_in[i])); /* PyTorch's default initialisation range */
        rg_tensor_uniform_(net->p[i], -bound, bound, 42, &off);
        rg_tensor_set_requires_grad(net->p[i], true);
    }
    net->x = rg_tensor_new(RG_F32, RG_SHAPE(BATCH, 1, 28, 28), RG_CPU);
    net->labels = rg_tensor_new(RG_I64, RG_SHAPE(BATCH), RG_CPU);
    RG_CHECK(net->x && net->labels, "cnn bench: %s", rg_last_error());
    rg_tensor_uniform_(net->x, 0.0f, 1.0f, 7, &off);
    int64_t *lab = net->labels->data;
    for (int i = 0; i < BATCH; i++) lab[i] = (i * 7) % 10;
    net->step = 0, net->drop_offset = 0;
}

static void cnn_free(cnn *net) {
    for (int i = 0; i < NPARAM; i++) {
        rg_tensor_free(net->p[i]);
        rg_tensor_free(net->m[i]);
        rg_tensor_free(net->v[i]);
    }
    rg_tensor_free(net->x);
    rg_tensor_free(net->labels);
}

/* relu(conv(x)), then max_pool2d(., 2) when pool, as the model's Sequential runs them: fused
 * into one op, unless RG_FUSE=0 (nothing fused) or RG_FUSE=relu (the pool apart) */
static rg_tensor *conv_relu(rg_tensor *x, rg_tensor *w, rg_tensor *b, bool pool) {
    const char *fuse = getenv("RG_FUSE");
    bool none = fuse && strcmp(fuse, "0") == 0, relu_only = fuse && strcmp(fuse, "relu") == 0;
    if (pool && !none && !relu_only) return rg_conv2d_relu_maxpool2d(x, w, b, 1, 0, 2, 2, 0);
    rg_tensor *y = none ? rg_relu(rg_conv2d(x, w, b, 1, 0)) : rg_conv2d_relu(x, w, b, 1, 0);
    return pool ? rg_max_pool2d(y, 2, 2, 0) : y;
}

/* One training step: forward, loss, backward, Adam (lr 1e-3), zero the gradients. */
static float cnn_step(cnn *net) {
    rg_tensor **p = net->p;
    /* the rg_trace_* marks are for --ops (optable.c); one relaxed load each when not recording */
    rg_trace_begin("step", "step");
    rg_scope_begin();
    rg_trace_begin("conv1 + relu", "forward op");
    rg_tensor *h = conv_relu(net->x, p[0], p[1], false); /* (N,32,26,26) */
    rg_trace_end();
    rg_trace_begin("conv2 + relu + pool", "forward op");
    h = conv_relu(h, p[2], p[3], true); /* (N,64,24,24), pooled to (N,64,12,12) */
    rg_trace_end();
    rg_trace_begin("dropout", "forward op");
    h = rg_flatten(rg_dropout(h, 0.25f, true, 1234, &net->drop_offset)); /* (N,9216) */
    rg_trace_end();
    rg_trace_begin("fc1", "forward op");
    h = rg_linear(h, p[4], p[5]); /* (N,128) */
    rg_trace_end();
    rg_trace_begin("relu", "forward op");
    h = rg_relu(h);
    rg_trace_end();
    rg_trace_begin("dropout", "forward op");
    h = rg_dropout(h, 0.5f, true, 1234, &net->drop_offset);
    rg_trace_end();
    rg_trace_begin("fc2 + cross_entropy", "forward op");
    rg_tensor *loss = rg_cross_entropy(rg_linear(h, p[6], p[7]), net->labels);
    rg_trace_end();
    rg_trace_begin("backward", "step part");
    rg_backward(loss);
    rg_trace_end();
    float l = rg_tensor_item(loss);
    net->step++;
    rg_adam_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    hp.bias_correction1 = 1.0f - powf(hp.beta1, (float)net->step);
    hp.bias_correction2 = 1.0f - powf(hp.beta2, (float)net->step);
    rg_trace_begin("adam, zero_grad", "step part");
    for (int i = 0; i < NPARAM; i++) {
        rg_cpu_backend.adam_step(p[i]->numel, &hp, p[i]->data, p[i]->grad->data, net->m[i]->data,
                                 net->v[i]->data);
        rg_zero_grad(p[i]);
    }
    rg_trace_end();
    /* the frees as a part of their own: under ASan every block goes to free() */
    rg_trace_begin("scope end (frees)", "step part");
    rg_scope_end();
    rg_trace_end();
    rg_trace_end();
    return l;
}

/* ---- the GEMM floor ---- */

typedef struct {
    const char *what;
    bool ta, tb;
    int64_t m, n, k;
    float *a, *b, *c;
} floor_gemm;

#define NFLOOR 8

/* The floor's shapes; its matrices too when alloc is set. */
static void floor_init(floor_gemm *g, bool alloc) {
    const int64_t n2 = (int64_t)BATCH * 24 * 24, n1 = (int64_t)BATCH * 26 * 26;
    floor_gemm list[NFLOOR] = {
        {"conv2 forward  W (64,288) col (288,N*576)", false, false, 64, n2, 288, NULL, NULL, NULL},
        {"conv2 dweight  dY (64,N*576) col^T", false, true, 64, 288, n2, NULL, NULL, NULL},
        {"conv2 dinput   W^T (288,64) dY (64,N*576)", true, false, 288, n2, 64, NULL, NULL, NULL},
        {"conv1 forward  W (32,9) col (9,N*676)", false, false, 32, n1, 9, NULL, NULL, NULL},
        {"conv1 dweight  dY (32,N*676) col^T", false, true, 32, 9, n1, NULL, NULL, NULL},
        {"fc1 forward    x (N,9216) W^T", false, true, BATCH, 128, 9216, NULL, NULL, NULL},
        {"fc1 dinput     dY (N,128) W (128,9216)", false, false, BATCH, 9216, 128, NULL, NULL,
         NULL},
        {"fc1 dweight    dY^T (128,N) x (N,9216)", true, false, 128, 9216, BATCH, NULL, NULL, NULL},
    };
    for (int i = 0; i < NFLOOR; i++) {
        g[i] = list[i];
        if (!alloc) continue;
        g[i].a = rgb_random(g[i].m * g[i].k, 100 + (uint64_t)i);
        g[i].b = rgb_random(g[i].k * g[i].n, 200 + (uint64_t)i);
        g[i].c = rgb_random(g[i].m * g[i].n, 300 + (uint64_t)i);
    }
}

static double floor_flops(const floor_gemm *g) {
    double f = 0;
    for (int i = 0; i < NFLOOR; i++) f += 2.0 * (double)g[i].m * (double)g[i].n * (double)g[i].k;
    return f;
}

/* Runs every floor GEMM once; per-GEMM seconds into t[i]; returns the total. */
static double floor_run(floor_gemm *g, double *t) {
    double total = 0;
    for (int i = 0; i < NFLOOR; i++) {
        double t0 = rgb_now();
        rgb_sgemm(g[i].ta, g[i].tb, g[i].m, g[i].n, g[i].k, g[i].a, g[i].b, g[i].c);
        t[i] = rgb_now() - t0;
        total += t[i];
    }
    return total;
}

static void floor_free(floor_gemm *g) {
    for (int i = 0; i < NFLOOR; i++) rgb_free(g[i].a), rgb_free(g[i].b), rgb_free(g[i].c);
}

void rgb_run_cnn(const rgb_opts *o) {
    cnn net;
    floor_gemm g[NFLOOR];
    cnn_init(&net);
    floor_init(g, !o->step_only); /* --step-only (perf runs): no set-up beyond the step's */
    double *ts = calloc((size_t)o->iters, sizeof *ts), *tf = calloc((size_t)o->iters, sizeof *tf);
    double *tg = calloc((size_t)o->iters * NFLOOR, sizeof *tg), tgi[NFLOOR];
    double *tp = calloc((size_t)o->iters, sizeof *tp);
    rgb_op_table *ops = o->ops ? calloc(1, sizeof *ops) : NULL;
    int nts[RGB_MAX_THREAD_COUNTS];
    RG_CHECK(ts && tf && tg && tp && (ops || !o->ops), "cnn bench: out of memory");
    printf("\nCNN training step (batch %d, Adam), median of %d interleaved runs; %.2f GFLOP of "
           "GEMM in the floor (%.2f MFLOP per image); kernels %s, FMA peak of that set\n",
           BATCH, o->iters, floor_flops(g) * 1e-9, floor_flops(g) / BATCH * 1e-6, rg_cpu_isa());
    printf("%-8s %12s %10s %14s %10s %16s %9s %12s %10s\n", "threads", "ringgrad ms", "img/s",
           "GEMM floor ms", "img/s", "ringgrad/floor", "GFLOP/s", "of FMA peak", "FMAs run");
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = nts[ti] = rg_set_num_threads(o->threads[ti]);
        cnn_step(&net); /* warm up caches and the allocator */
        if (!o->step_only) floor_run(g, tgi);
        float loss = 0;
        for (int it = 0; it < o->iters; it++) {
            double t0 = rgb_now();
            loss = cnn_step(&net);
            ts[it] = rgb_now() - t0;
            if (o->step_only) continue;
            tf[it] = floor_run(g, tgi);
            for (int i = 0; i < NFLOOR; i++) tg[i * o->iters + it] = tgi[i];
            tp[it] = rgb_peak_gflops(rg_cpu_isa(), nt, 4000000); /* the peak, interleaved */
        }
        RG_CHECK(isfinite(loss), "cnn bench: the loss is %g", (double)loss);
        /* --ops: the same number of steps again, traced, right after the timed ones (recording
         * must not slow those). Not alternating the thread counts step by step: a two-thread step
         * right after one-thread steps ran 1.6-1.75x faster than one thread where steps in a row
         * at two threads gave 1.9x (the second core's caches cold after its idle steps), so each
         * count gets a block, as in the timing above. */
        if (ops) {
            rgb_ops_begin();
            for (int it = 0; it < o->iters; it++) cnn_step(&net);
            rgb_ops_end(ops, ti);
        }
        if (o->step_only) {
            double step = rgb_median(ts, o->iters);
            printf("%-8d %12.1f %10.0f   (step only)\n", nt, step * 1e3, BATCH / step);
            continue;
        }
        double step = rgb_median(ts, o->iters), fl = rgb_median(tf, o->iters);
        double peak = rgb_median(tp, o->iters), gflops = floor_flops(g) / step * 1e-9;
        double run = gflops * cnn_mflop_run() / (floor_flops(g) / BATCH * 1e-6);
        printf("%-8d %12.1f %10.0f %14.1f %10.0f %15.0f%% %9.1f %11.0f%% %9.0f%%\n", nt, step * 1e3,
               BATCH / step, fl * 1e3, BATCH / fl, 100.0 * fl / step, gflops, 100.0 * gflops / peak,
               100.0 * run / peak);
        if (o->raw)
            printf("raw cnn threads=%d step_ms=%.3f floor_ms=%.3f peak_gflops=%.2f "
                   "mflop_run=%.2f isa=%s\n",
                   nt, step * 1e3, fl * 1e3, peak, cnn_mflop_run(), rg_cpu_isa());
        for (int i = 0; i < NFLOOR; i++) {
            double t = rgb_median(tg + i * o->iters, o->iters);
            printf("    floor %-44s %7.2f ms %6.1f GFLOP/s\n", g[i].what, t * 1e3,
                   2.0 * (double)g[i].m * (double)g[i].n * (double)g[i].k / t * 1e-9);
        }
    }
    if (ops) rgb_ops_print(ops, nts, o->nthreads);
    free(ts), free(tf), free(tg), free(tp), free(ops);
    if (!o->step_only) floor_free(g);
    cnn_free(&net);
}
