/* batchnorm2d.c — batch normalisation on the CPU (the formulas are in ops/batchnorm2d.c and
 * core/kernels.h).
 *
 * What it teaches: batch norm is memory-bound, so the kernels are counted in passes over x.
 * Training forward reads x twice (one pass for the per-channel sum and sum of squares, one that
 * normalises and writes y); backward reads x and dy twice (one pass for the two gradient sums,
 * one that writes dx). Each pass is one OpenMP loop over channels: a channel's N planes of HW
 * floats are contiguous runs, its sums stay in registers, and no thread ever writes another's
 * channel (the element-wise passes go plane by plane in memory order instead), so no reduction
 * across threads is needed, and the result does not depend on the
 * number of threads. Sums accumulate in float lanes over blocks of planes, then in double. */
#include <omp.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

/* The sums run in BN_LANES float lanes (one SIMD register or two, whatever the instruction set)
 * over a block of whole planes of about BN_BLOCK elements, then in double: a horizontal sum per
 * block, not per plane, which at 7x7 planes (49 floats) cost more than the plane's loads. */
#define BN_LANES 16
#define BN_BLOCK 1024

/* Within a plane the sums run in four sets of BN_LANES lanes, which consecutive vectors take in
 * turn, held in registers as GCC vectors (split into the instruction set's own widths), and are
 * added into the channel's lanes at the plane's end. With the channel's lanes updated vector by
 * vector, the compiler stored them back after every vector and each add waited for the last: the
 * statistics pass read x at 44-47 GB/s at one thread, against 78-83 now (16 channels of 28x28,
 * batch 128, Zen 5, AVX-512; a copy of the same tensor: 107-122). */
typedef float bn_vec __attribute__((vector_size(BN_LANES * sizeof(float))));

/* The vector at p (any alignment); a statement expression, not a function: a function returning
 * a 64-byte vector would change the ABI of the copies built without AVX-512. */
#define BN_VEC(p)                                                                                  \
    ({                                                                                             \
        bn_vec t_;                                                                                 \
        memcpy(&t_, (p), sizeof t_);                                                               \
        t_;                                                                                        \
    })

/* lanes[0, BN_LANES) += the vector v */
#define BN_ADD_TO(lanes, v)                                                                        \
    do {                                                                                           \
        bn_vec s_ = BN_VEC(lanes) + (v);                                                           \
        memcpy((lanes), &s_, sizeof s_);                                                           \
    } while (0)

/* rg_k_relu_grad(m, v) on vectors: v where m > 0 or NaN (where m <= 0 is false), else +0.0f */
typedef int32_t bn_ivec __attribute__((vector_size(BN_LANES * sizeof(int32_t))));
#define BN_RELU_GRAD(m, v) ((bn_vec)((bn_ivec)(v) & ~((m) <= (bn_vec){0})))

/* Adds the sums of F and of G over the whole vectors of a plane of len floats into the lanes a
 * and b, in four sets at a time, and is the number of elements that covered (the caller adds the
 * tail). F and G are expressions in v = LOAD, the plane's vector at element o_ (BN_VEC(p + o_)). */
#define BN_PLANE_SUMS(LOAD, len, a, b, F, G)                                                       \
    ({                                                                                             \
        bn_vec a0_ = {0}, a1_ = {0}, a2_ = {0}, a3_ = {0}, b0_ = {0}, b1_ = {0}, b2_ = {0},        \
               b3_ = {0}, v;                                                                       \
        int64_t o_ = 0;                                                                            \
        for (; o_ + 4 * BN_LANES <= (len); o_ += BN_LANES) {                                       \
            v = (LOAD), a0_ += (F), b0_ += (G), o_ += BN_LANES;                                    \
            v = (LOAD), a1_ += (F), b1_ += (G), o_ += BN_LANES;                                    \
            v = (LOAD), a2_ += (F), b2_ += (G), o_ += BN_LANES;                                    \
            v = (LOAD), a3_ += (F), b3_ += (G);                                                    \
        }                                                                                          \
        if (o_ + BN_LANES <= (len)) v = (LOAD), a0_ += (F), b0_ += (G), o_ += BN_LANES;            \
        if (o_ + BN_LANES <= (len)) v = (LOAD), a1_ += (F), b1_ += (G), o_ += BN_LANES;            \
        if (o_ + BN_LANES <= (len)) v = (LOAD), a2_ += (F), b2_ += (G), o_ += BN_LANES;            \
        BN_ADD_TO((a), (a0_ + a1_) + (a2_ + a3_));                                                 \
        BN_ADD_TO((b), (b0_ + b1_) + (b2_ + b3_));                                                 \
        o_;                                                                                        \
    })

/* The element-wise passes (apply, backward data) walk the planes in memory order, image by
 * image, over chunks of BN_CHUNK channels whose coefficients are computed first. */
#define BN_CHUNK 256

static int64_t planes_per_block(int64_t hw) {
    return hw >= BN_BLOCK ? 1 : BN_BLOCK / hw;
}

/* The lanes' sum, in double; the lanes restart from 0. */
static double lanes_flush(float *s) {
    double t = 0.0;
    for (int l = 0; l < BN_LANES; l++) t += s[l], s[l] = 0.0f;
    return t;
}

/* The reductions (statistics, backward sums) take up to BN_RCHUNK channels at a time, walking
 * their planes image by image (memory order) with each channel's lanes kept apart: every
 * channel's sum is the same whatever the chunk, so the result does not depend on the threads;
 * the chunk shrinks so that every thread gets channels. */
#define BN_RCHUNK 32

static int64_t reduce_chunk(int64_t n, int64_t c, int64_t hw) {
    int64_t threads = n * c * hw > RG_CPU_PAR_MIN ? omp_get_max_threads() : 1;
    int64_t chunk = (c + threads - 1) / threads;
    return chunk < 1 ? 1 : chunk > BN_RCHUNK ? BN_RCHUNK : chunk;
}

/* Enough work per channel group to wake the threads. */
#define BN_PAR(n, c, hw) if ((n) * (c) * (hw) > RG_CPU_PAR_MIN && (c) > 1)

void rg_cpu_batchnorm_stats(int64_t n, int64_t c, int64_t hw, const float *x, float *stats) {
    int64_t block = planes_per_block(hw), chunk = reduce_chunk(n, c, hw);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t c0 = 0; c0 < c; c0 += chunk) {
        int64_t cn = c - c0 < chunk ? c - c0 : chunk;
        float s1[BN_RCHUNK][BN_LANES] = {{0}}, s2[BN_RCHUNK][BN_LANES] = {{0}};
        double s[BN_RCHUNK] = {0}, ss[BN_RCHUNK] = {0};
        for (int64_t i = 0; i < n; i++) {
            for (int64_t k = 0; k < cn; k++) {
                const float *p = x + (i * c + c0 + k) * hw; /* (HW) */
                int64_t j = BN_PLANE_SUMS(BN_VEC(p + o_), hw, s1[k], s2[k], v, v * v);
                for (; j < hw; j++) s[k] += p[j], ss[k] += (double)p[j] * p[j]; /* the tail */
            }
            if ((i + 1) % block == 0 || i + 1 == n)
                for (int64_t k = 0; k < cn; k++)
                    s[k] += lanes_flush(s1[k]), ss[k] += lanes_flush(s2[k]);
        }
        for (int64_t k = 0; k < cn; k++)
            stats[c0 + k] = (float)s[k], stats[c + c0 + k] = (float)ss[k];
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
                            const float *residual, bool relu, float *y) {
    for (int64_t c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int64_t cn = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK;
        float a[BN_CHUNK], b[BN_CHUNK]; /* y = a x + b */
        for (int64_t k = 0; k < cn; k++) {
            int64_t ch = c0 + k;
            a[k] = (weight ? weight[ch] : 1.0f) * rg_bn_invstd(var[ch], eps);
            b[k] = (bias ? bias[ch] : 0.0f) - mean[ch] * a[k];
        }
#pragma omp parallel for collapse(2) BN_PAR(n, cn, hw) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < cn; k++) {
                int64_t at = (i * c + c0 + k) * hw;
                const float *p = x + at, *r = residual ? residual + at : NULL;
                float *q = y + at, ak = a[k], bk = b[k];
                if (r) /* a fused residual add and ReLU (rg_batch_norm2d_add_relu) */
                    for (int64_t j = 0; j < hw; j++) {
                        float v = (ak * p[j] + bk) + r[j];
                        q[j] = relu ? rg_k_relu(v) : v;
                    }
                else if (relu) /* a fused ReLU (rg_batch_norm2d_relu): one pass instead of two */
                    for (int64_t j = 0; j < hw; j++) q[j] = rg_k_relu(ak * p[j] + bk);
                else
                    for (int64_t j = 0; j < hw; j++) q[j] = ak * p[j] + bk;
            }
    }
}

void rg_cpu_batchnorm_backward_reduce(int64_t n, int64_t c, int64_t hw, const float *x,
                                      const float *dy, const float *relu_y, const float *mean,
                                      const float *var, float eps, float *sums, float beta_w,
                                      float *dweight, float beta_b, float *dbias) {
    int64_t block = planes_per_block(hw), chunk = reduce_chunk(n, c, hw);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t c0 = 0; c0 < c; c0 += chunk) {
        int64_t cn = c - c0 < chunk ? c - c0 : chunk;
        float s1[BN_RCHUNK][BN_LANES] = {{0}}, s2[BN_RCHUNK][BN_LANES] = {{0}};
        double sd[BN_RCHUNK] = {0}, sdx[BN_RCHUNK] = {0};
        for (int64_t i = 0; i < n; i++) {
            for (int64_t k = 0; k < cn; k++) {
                int64_t at = (i * c + c0 + k) * hw;
                const float *p = x + at, *g = dy + at, *ry = relu_y ? relu_y + at : NULL;
                float m = mean[c0 + k];
                int64_t j = ry ? BN_PLANE_SUMS(BN_RELU_GRAD(BN_VEC(ry + o_), BN_VEC(g + o_)), hw,
                                               s1[k], s2[k], v, v * (BN_VEC(p + o_) - m))
                               : BN_PLANE_SUMS(BN_VEC(g + o_), hw, s1[k], s2[k], v,
                                               v * (BN_VEC(p + o_) - m));
                for (; j < hw; j++) { /* the tail */
                    float gj = ry ? rg_k_relu_grad(ry[j], g[j]) : g[j];
                    sd[k] += gj, sdx[k] += (double)gj * (p[j] - m);
                }
            }
            if ((i + 1) % block == 0 || i + 1 == n)
                for (int64_t k = 0; k < cn; k++)
                    sd[k] += lanes_flush(s1[k]), sdx[k] += lanes_flush(s2[k]);
        }
        for (int64_t k = 0; k < cn; k++) { /* sum dy, sum dy*xhat */
            sums[c0 + k] = (float)sd[k];
            sums[c + c0 + k] = (float)(sdx[k] * rg_bn_invstd(var[c0 + k], eps));
        }
    }
    sums[2 * c] = (float)(n * hw);
    for (int64_t ch = 0; ch < c; ch++) {
        if (dweight) dweight[ch] = rg_bn_grad_param(sums[c + ch], beta_w, dweight[ch]);
        if (dbias) dbias[ch] = rg_bn_grad_param(sums[ch], beta_b, dbias[ch]);
    }
}

/* One plane's dx: d = beta * d + rg_bn_dx(dy, xhat, ...), dy masked by ry where ry is not NULL.
 * Inlined with constants for ry == NULL and beta == 0, so that each loop vectorises. */
static inline __attribute__((always_inline)) void dx_plane(int64_t hw, const float *p,
                                                           const float *g, const float *ry,
                                                           float mk, float ik, float wk, float a,
                                                           float b, float beta, float *d) {
    for (int64_t j = 0; j < hw; j++) {
        float gj = ry ? rg_k_relu_grad(ry[j], g[j]) : g[j];
        float r = rg_bn_dx(gj, (p[j] - mk) * ik, wk, a, b);
        d[j] = beta == 0.0f ? r : r + beta * d[j];
    }
}

void rg_cpu_batchnorm_backward_data(int64_t n, int64_t c, int64_t hw, const float *x,
                                    const float *dy, const float *relu_y, const float *mean,
                                    const float *var, float eps, const float *weight,
                                    const float *sums, float beta, float *dx) {
    for (int64_t c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int64_t cn = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK;
        float m[BN_CHUNK], inv[BN_CHUNK], w_inv[BN_CHUNK], mdy[BN_CHUNK], mdyx[BN_CHUNK];
        for (int64_t k = 0; k < cn; k++) {
            int64_t ch = c0 + k;
            float count = sums ? sums[2 * c] : 1.0f;
            m[k] = mean[ch], inv[k] = rg_bn_invstd(var[ch], eps);
            w_inv[k] = (weight ? weight[ch] : 1.0f) * inv[k];
            mdy[k] = sums ? sums[ch] / count : 0.0f;
            mdyx[k] = sums ? sums[c + ch] / count : 0.0f;
        }
#pragma omp parallel for collapse(2) BN_PAR(n, cn, hw) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < cn; k++) {
                int64_t at = (i * c + c0 + k) * hw;
                const float *p = x + at, *g = dy + at;
                float *d = dx + at;
                float mk = m[k], ik = inv[k], wk = w_inv[k], a = mdy[k], b = mdyx[k];
                if (relu_y && beta == 0.0f)
                    dx_plane(hw, p, g, relu_y + at, mk, ik, wk, a, b, 0.0f, d);
                else if (relu_y)
                    dx_plane(hw, p, g, relu_y + at, mk, ik, wk, a, b, beta, d);
                else if (beta == 0.0f)
                    dx_plane(hw, p, g, NULL, mk, ik, wk, a, b, 0.0f, d);
                else
                    dx_plane(hw, p, g, NULL, mk, ik, wk, a, b, beta, d);
            }
    }
}
