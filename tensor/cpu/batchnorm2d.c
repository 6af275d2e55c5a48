/* batchnorm2d.c — batch normalisation on the CPU (the formulas are in ops/batchnorm2d.c and
 * core/kernels.h).
 *
 * What it teaches: batch norm is memory-bound, so the kernels are counted in passes over x.
 * Training forward reads x twice (one pass for the per-channel sum and sum of squares, one that
 * normalises and writes y); backward reads x and dy twice (one pass for the two gradient sums,
 * one that writes dx). Each pass is one OpenMP loop over channels: a channel's N planes of HW
 * floats are contiguous runs, its sums stay in registers, and no thread ever writes another's
 * channel, so no reduction across threads is needed. Sums accumulate in double. */
#include "tensor/cpu/cpu.h"

/* Enough work per channel group to wake the threads. */
#define BN_PAR(n, c, hw) if ((n) * (c) * (hw) > RG_CPU_PAR_MIN && (c) > 1)

void rg_cpu_batchnorm_stats(int64_t n, int64_t c, int64_t hw, const float *x, float *stats) {
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw; /* (HW) */
            float s1 = 0.0f, s2 = 0.0f;             /* one plane in float: vectorises */
            for (int64_t j = 0; j < hw; j++) s1 += p[j], s2 += p[j] * p[j];
            s += s1, ss += s2;
        }
        stats[ch] = (float)s, stats[c + ch] = (float)ss;
    }
    stats[2 * c] = (float)(n * hw);
}

void rg_cpu_batchnorm_finalize(int64_t c, float momentum, const float *stats, float *meanvar,
                               float *running_mean, float *running_var, int64_t *num_batches) {
    for (int64_t ch = 0; ch < c; ch++)
        rg_bn_finalize_channel(c, ch, momentum, stats, meanvar, running_mean, running_var);
    if (num_batches) ++*num_batches;
}

void rg_cpu_batchnorm_apply(int64_t n, int64_t c, int64_t hw, const float *x, const float *mean,
                            const float *var, float eps, const float *weight, const float *bias,
                            float *y) {
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        float inv = rg_bn_invstd(var[ch], eps);
        float a = (weight ? weight[ch] : 1.0f) * inv; /* y = a x + b */
        float b = (bias ? bias[ch] : 0.0f) - mean[ch] * a;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw;
            float *q = y + (i * c + ch) * hw;
            for (int64_t j = 0; j < hw; j++) q[j] = a * p[j] + b;
        }
    }
}

void rg_cpu_batchnorm_backward_reduce(int64_t n, int64_t c, int64_t hw, const float *x,
                                      const float *dy, const float *mean, const float *var,
                                      float eps, float *sums) {
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        float m = mean[ch], inv = rg_bn_invstd(var[ch], eps);
        double sd = 0.0, sdx = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw, *g = dy + (i * c + ch) * hw;
            float s1 = 0.0f, s2 = 0.0f;
            for (int64_t j = 0; j < hw; j++) s1 += g[j], s2 += g[j] * (p[j] - m);
            sd += s1, sdx += s2;
        }
        sums[ch] = (float)sd, sums[c + ch] = (float)(sdx * inv); /* sum dy, sum dy*xhat */
    }
    sums[2 * c] = (float)(n * hw);
}

void rg_cpu_batchnorm_backward_data(int64_t n, int64_t c, int64_t hw, const float *x,
                                    const float *dy, const float *mean, const float *var,
                                    float eps, const float *weight, const float *sums, float beta,
                                    float *dx) {
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        float m = mean[ch], inv = rg_bn_invstd(var[ch], eps);
        float w_inv = (weight ? weight[ch] : 1.0f) * inv;
        float count = sums ? sums[2 * c] : 1.0f;
        float mean_dy = sums ? sums[ch] / count : 0.0f;
        float mean_dy_xhat = sums ? sums[c + ch] / count : 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw, *g = dy + (i * c + ch) * hw;
            float *d = dx + (i * c + ch) * hw;
            for (int64_t j = 0; j < hw; j++) {
                float v = rg_bn_dx(g[j], (p[j] - m) * inv, w_inv, mean_dy, mean_dy_xhat);
                d[j] = beta == 0.0f ? v : v + beta * d[j];
            }
        }
    }
}
