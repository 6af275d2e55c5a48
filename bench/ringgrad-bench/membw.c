/* membw.c — the memory-bound kernels against a streaming copy over the same bytes.
 *
 * ReLU, dropout, max-pooling, BatchNorm and the optimizer steps do a few operations per element
 * they load, so their speed limit is memory bandwidth. Each is timed at the size it has in the CNN
 * step (batch 128; BatchNorm: in ResNet-20's) next to a copy that moves the same number of bytes,
 * reads plus writes, over the same footprint: the backend's y = 1*x + 0*y (axpby), a plain
 * streaming loop compiled for the same instruction set and split between the threads like the
 * kernels' loops. The ratio copy time / kernel time is the kernel's fraction of the streaming speed
 * (100%: as fast as a copy). Interleaved, medians; --clock cpu for one thread on a shared machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ringgrad.h"
#include "tensor/backend_impl.h" /* kernels are timed through the backend table */

#define N_ACT ((int64_t)128 * 64 * 24 * 24) /* conv2's output: ReLU, max-pool input */
#define N_DROP ((int64_t)128 * 9216)        /* the first dropout's input */
#define N_PAR ((int64_t)9216 * 128)         /* fc1.weight, for the optimizer steps */

typedef struct {
    float *a, *b, *c, *d, *e;
    int32_t *am;
    rg_pool2d_shape pool;
    uint64_t step;
} bufs;

typedef struct {
    const char *what;
    double bytes; /* read + written */
    void (*run)(bufs *);
} mem_op;

static void op_relu_fwd(bufs *x) {
    rg_cpu_backend.relu_forward(N_ACT, x->a, x->b);
}
static void op_relu_bwd(bufs *x) {
    rg_cpu_backend.relu_backward(N_ACT, x->a, x->b, 0.0f, x->c);
}
/* Dropout as in training: forward stores the mask (one bit an element, in am), backward reads it;
 * and backward drawing the mask again, what a call without one does. */
static void op_drop_fwd(bufs *x) {
    rg_cpu_backend.dropout_forward(N_DROP, 0.25f, 7, x->step++ * N_DROP, x->a, x->b,
                                   (uint32_t *)x->am);
}
static void op_drop_bwd(bufs *x) {
    rg_cpu_backend.dropout_backward(N_DROP, 0.25f, 7, 0, (const uint32_t *)x->am, x->a, 0.0f, x->b);
}
static void op_drop_bwd_redraw(bufs *x) {
    rg_cpu_backend.dropout_backward(N_DROP, 0.25f, 7, x->step++ * N_DROP, NULL, x->a, 0.0f, x->b);
}
static void op_pool_fwd(bufs *x) {
    rg_cpu_backend.maxpool2d_forward(&x->pool, x->a, x->b, x->am);
}
static void op_pool_bwd(bufs *x) {
    rg_cpu_backend.maxpool2d_backward(&x->pool, x->b, x->am, 0.0f, x->c);
}
static void op_adam(bufs *x) {
    rg_adam_hparams h = {.lr = 1e-3f,
                         .beta1 = 0.9f,
                         .beta2 = 0.999f,
                         .eps = 1e-8f,
                         .bias_correction1 = 0.1f,
                         .bias_correction2 = 0.001f};
    rg_cpu_backend.adam_step(N_PAR, &h, x->c, x->a, x->d, x->e);
}
/* BatchNorm in training mode at ResNet-20's sizes on 28x28 images, batch 128: stage 1 (16
 * channels of 28x28) and stage 3 (64 of 7x7); and at ResNet-50's last two stages at 64 px, batch
 * 32 (1024 channels of 4x4, 2048 of 2x2), which the CPU walks as rows of channels. Forward is the
 * statistics pass over x, the per-channel finalisation and the normalising pass (x -> y); backward
 * the pass for the two gradient sums (x, dy) and the one that writes dx. The bytes counted are the
 * least an implementation that computes the statistics in one pass must move: forward reads x twice
 * and writes y (12 bytes an element), backward reads x and dy twice and writes dx (20 bytes); only
 * a tensor that stayed in cache between the two passes could do with less (on small planes both
 * keep each run of channels in cache for its second read: batchnorm_train_forward and
 * batchnorm_backward). */
typedef struct {
    int64_t n, c, hw;
} bn_size;
static const bn_size BN_STAGE1 = {128, 16, 28 * 28}, BN_STAGE3 = {128, 64, 7 * 7};
static const bn_size BN_R50_4X4 = {32, 1024, 4 * 4}, BN_R50_2X2 = {32, 2048, 2 * 2};
enum { BN_MAXC = 2048 };
static struct {
    float stats[3 * BN_MAXC + 1], meanvar[2 * BN_MAXC + 1], sums[2 * BN_MAXC + 1];
    float rmean[BN_MAXC], rvar[BN_MAXC], weight[BN_MAXC], bias[BN_MAXC];
    float dweight[BN_MAXC], dbias[BN_MAXC];
    int64_t batches;
} bn;

static void bn_forward(bufs *x, bn_size s) { /* x: a, y: b; the call training makes */
    rg_cpu_backend.batchnorm_train_forward(s.n, s.c, s.hw, x->a, 0.1f, 1e-5f, bn.weight, bn.bias,
                                           NULL, false, bn.stats, bn.meanvar, bn.rmean, bn.rvar,
                                           &bn.batches, x->b);
}
static void bn_backward(bufs *x, bn_size s) { /* x: a, dy: c, dx: b; the call training makes */
    rg_cpu_backend.batchnorm_backward(s.n, s.c, s.hw, x->a, x->c, NULL, bn.meanvar,
                                      bn.meanvar + s.c, 1e-5f, bn.weight, bn.sums, 0.0f, bn.dweight,
                                      0.0f, bn.dbias, 0.0f, x->b);
}
static void op_bn1_fwd(bufs *x) {
    bn_forward(x, BN_STAGE1);
}
static void op_bn1_bwd(bufs *x) {
    bn_backward(x, BN_STAGE1);
}
static void op_bn3_fwd(bufs *x) {
    bn_forward(x, BN_STAGE3);
}
static void op_bn3_bwd(bufs *x) {
    bn_backward(x, BN_STAGE3);
}
static void op_bn4x4_fwd(bufs *x) {
    bn_forward(x, BN_R50_4X4);
}
static void op_bn4x4_bwd(bufs *x) {
    bn_backward(x, BN_R50_4X4);
}
static void op_bn2x2_fwd(bufs *x) {
    bn_forward(x, BN_R50_2X2);
}
static void op_bn2x2_bwd(bufs *x) {
    bn_backward(x, BN_R50_2X2);
}
#define BN_NUMEL(s) ((double)(s).n * (double)(s).c * (double)(s).hw)

static void op_sgd(bufs *x) {
    rg_sgd_tensor t = {.n = N_PAR,
                       .param = x->c,
                       .grad = x->a,
                       .momentum_buf = x->d,
                       .h = {.lr = 1e-3f, .momentum = 0.9f}};
    rg_cpu_backend.sgd_step_many(1, &t);
}

/* A streaming copy of `bytes` bytes (a multiple of 4), through the kernels' own loop. */
static void copy_bytes(char *dst, const char *src, size_t bytes) {
    rg_cpu_backend.axpby((int64_t)(bytes / 4), 1.0f, (const float *)src, 0.0f, (float *)dst);
}

void rgb_run_membw(const rgb_opts *o) {
    const mem_op ops[] = {
        {"relu forward", 8.0 * N_ACT, op_relu_fwd},
        {"relu backward", 12.0 * N_ACT, op_relu_bwd},
        {"dropout forward", 8.125 * N_DROP, op_drop_fwd},
        {"dropout backward", 8.125 * N_DROP, op_drop_bwd},
        {"dropout bwd, redrawn", 8.0 * N_DROP, op_drop_bwd_redraw},
        {"maxpool forward", 4.0 * (N_ACT + N_ACT / 2), op_pool_fwd},
        {"maxpool backward", 4.0 * (N_ACT + N_ACT / 2), op_pool_bwd},
        {"adam step", 28.0 * N_PAR, op_adam},
        {"sgd step (momentum)", 20.0 * N_PAR, op_sgd},
        {"bn fwd 16x28x28", 12.0 * BN_NUMEL(BN_STAGE1), op_bn1_fwd},
        {"bn bwd 16x28x28", 20.0 * BN_NUMEL(BN_STAGE1), op_bn1_bwd},
        {"bn fwd 64x7x7", 12.0 * BN_NUMEL(BN_STAGE3), op_bn3_fwd},
        {"bn bwd 64x7x7", 20.0 * BN_NUMEL(BN_STAGE3), op_bn3_bwd},
        {"bn fwd 1024x4x4", 12.0 * BN_NUMEL(BN_R50_4X4), op_bn4x4_fwd},
        {"bn bwd 1024x4x4", 20.0 * BN_NUMEL(BN_R50_4X4), op_bn4x4_bwd},
        {"bn fwd 2048x2x2", 12.0 * BN_NUMEL(BN_R50_2X2), op_bn2x2_fwd},
        {"bn bwd 2048x2x2", 20.0 * BN_NUMEL(BN_R50_2X2), op_bn2x2_bwd},
    };
    for (int ch = 0; ch < BN_MAXC; ch++) bn.weight[ch] = 1.0f + 0.01f * (float)ch, bn.rvar[ch] = 1;
    bufs x = {.a = rgb_random(N_ACT, 1),
              .b = rgb_random(N_ACT, 2),
              .c = rgb_random(N_ACT, 3),
              .d = rgb_random(N_PAR, 4),
              .e = rgb_random(N_PAR, 5)};
    for (int64_t i = 0; i < N_PAR; i++) x.e[i] *= x.e[i]; /* Adam's v >= 0 */
    x.am = calloc((size_t)N_ACT / 4, sizeof *x.am);
    x.pool = (rg_pool2d_shape){.n = 128,
                               .c = 64,
                               .h = 24,
                               .w = 24,
                               .p = 12,
                               .q = 12,
                               .kernel_h = 2,
                               .kernel_w = 2,
                               .stride_h = 2,
                               .stride_w = 2};
    size_t maxcopy = 28 * (size_t)N_ACT / 2 + 64;
    char *src = malloc(maxcopy), *dst = malloc(maxcopy);
    double *tc = calloc((size_t)o->iters, sizeof *tc), *to = calloc((size_t)o->iters, sizeof *to);
    RG_CHECK(x.am && src && dst && tc && to, "membw: out of memory");
    memset(src, 1, maxcopy), memset(dst, 2, maxcopy);
    printf("\nMemory-bound kernels against a copy of the same bytes (read + written), median of "
           "%d interleaved runs; kernels: %s\n",
           o->iters, rg_cpu_isa());
    printf("%-8s %-22s %8s %10s %10s %12s\n", "threads", "kernel", "MB", "kernel GB/s", "copy GB/s",
           "kernel/copy");
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = rg_set_num_threads(o->threads[ti]);
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            size_t half = (size_t)(ops[k].bytes / 2) / 4 * 4;
            ops[k].run(&x), copy_bytes(dst, src, half); /* warm up */
            for (int it = 0; it < o->iters; it++) {
                double t0 = rgb_now();
                copy_bytes(dst, src, half);
                double t1 = rgb_now();
                ops[k].run(&x);
                tc[it] = t1 - t0, to[it] = rgb_now() - t1;
            }
            double c = rgb_median(tc, o->iters), t = rgb_median(to, o->iters);
            printf("%-8d %-22s %8.1f %10.1f %10.1f %11.0f%%\n", nt, ops[k].what,
                   ops[k].bytes * 1e-6, ops[k].bytes / t * 1e-9, ops[k].bytes / c * 1e-9,
                   100.0 * c / t);
            if (o->raw)
                printf("raw membw threads=%d op=\"%s\" kernel_ms=%.3f copy_ms=%.3f\n", nt,
                       ops[k].what, t * 1e3, c * 1e3);
        }
    }
    free(tc), free(to), free(src), free(dst), free(x.am);
    rgb_free(x.a), rgb_free(x.b), rgb_free(x.c), rgb_free(x.d), rgb_free(x.e);
}
