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
 * number of threads. Sums accumulate in float lanes over blocks of planes, then in double.
 * Planes of fewer than 32 floats go as rows of many channels instead ("small planes" below), and
 * there training's forward reads x from memory once: each run of channels is normalised right
 * after its statistics, while it is still in cache ("training's forward in one call"); training's
 * backward does the same with x and dy ("training's backward in one call"). */
#include <omp.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

/* The sums run in BN_LANES float lanes over a block of whole planes of about BN_BLOCK elements,
 * then in double: a horizontal sum per block, not per plane, which at 7x7 planes (49 floats) cost
 * more than the plane's loads. BN_LANES is the same in every copy (so every instruction set adds
 * the same floats in the same order); the code works in the copy's own vectors of BN_NATIVE
 * lanes, one or several per set of BN_LANES. */
#define BN_LANES 16
#define BN_BLOCK 1024
#if defined(__AVX512F__)
#define BN_NATIVE 16
#elif defined(__AVX__)
#define BN_NATIVE 8
#else
#define BN_NATIVE 4
#endif

/* Within a plane the sums run in four sets of BN_LANES lanes, which consecutive BN_LANES-float
 * pieces take in turn, held in registers as GCC vectors, and are added into the channel's lanes
 * at the plane's end. With the channel's lanes updated vector by vector, the compiler stored them
 * back after every vector and each add waited for the last: the statistics pass read x at 44-47
 * GB/s at one thread, against 78-83 now (16 channels of 28x28, batch 128, Zen 5, AVX-512; a copy
 * of the same tensor: 107-122). The vectors are the instruction set's own width: 16-float GCC
 * vectors in the AVX2 copy went through the stack element by element (GCC has no register for
 * them there), and its 64x7x7 forward ran at 12% of a copy. */
typedef float bn_vec __attribute__((vector_size(BN_NATIVE * sizeof(float))));

/* The vector at p (any alignment); a statement expression, not a function: a function returning
 * a vector would change the ABI between the copies. */
#define BN_VEC(p)                                                                                  \
    ({                                                                                             \
        bn_vec t_;                                                                                 \
        memcpy(&t_, (p), sizeof t_);                                                               \
        t_;                                                                                        \
    })

/* lanes[0, BN_NATIVE) += the vector v */
#define BN_ADD_TO(lanes, v)                                                                        \
    do {                                                                                           \
        bn_vec s_ = BN_VEC(lanes) + (v);                                                           \
        memcpy((lanes), &s_, sizeof s_);                                                           \
    } while (0)

/* rg_k_relu_grad(m, v) on vectors: v where m > 0 or NaN (where m <= 0 is false), else +0.0f */
typedef int32_t bn_ivec __attribute__((vector_size(BN_NATIVE * sizeof(int32_t))));
#define BN_RELU_GRAD(m, v) ((bn_vec)((bn_ivec)(v) & ~((m) <= (bn_vec){0})))

/* Adds the sums of F and of G over the whole BN_LANES pieces of a plane of len floats into the
 * lanes a and b, in four sets at a time, and is the number of elements that covered (the caller
 * adds the tail). F and G are expressions in v = LOAD, the plane's vector at element o_
 * (BN_VEC(p + o_)). With BN_NATIVE < BN_LANES each part of the lanes runs the plane by itself:
 * lane l adds the same floats in the same order in every copy. */
#define BN_PLANE_SUMS(LOAD, len, a, b, F, G)                                                       \
    ({                                                                                             \
        const int64_t pieces_ = (len) / BN_LANES;                                                  \
        for (int part_ = 0; part_ < BN_LANES / BN_NATIVE; part_++) {                               \
            bn_vec a0_ = {0}, a1_ = {0}, a2_ = {0}, a3_ = {0}, b0_ = {0}, b1_ = {0}, b2_ = {0},    \
                   b3_ = {0}, v;                                                                   \
            int64_t m_ = 0, o_ = part_ * BN_NATIVE;                                                \
            for (; m_ + 4 <= pieces_; m_ += 4) {                                                   \
                v = (LOAD), a0_ += (F), b0_ += (G), o_ += BN_LANES;                                \
                v = (LOAD), a1_ += (F), b1_ += (G), o_ += BN_LANES;                                \
                v = (LOAD), a2_ += (F), b2_ += (G), o_ += BN_LANES;                                \
                v = (LOAD), a3_ += (F), b3_ += (G), o_ += BN_LANES;                                \
            }                                                                                      \
            if (m_ < pieces_) v = (LOAD), a0_ += (F), b0_ += (G), o_ += BN_LANES, m_++;            \
            if (m_ < pieces_) v = (LOAD), a1_ += (F), b1_ += (G), o_ += BN_LANES, m_++;            \
            if (m_ < pieces_) v = (LOAD), a2_ += (F), b2_ += (G), o_ += BN_LANES, m_++;            \
            BN_ADD_TO((a) + part_ * BN_NATIVE, (a0_ + a1_) + (a2_ + a3_));                         \
            BN_ADD_TO((b) + part_ * BN_NATIVE, (b0_ + b1_) + (b2_ + b3_));                         \
        }                                                                                          \
        pieces_ *BN_LANES;                                                                         \
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

/* Channel ch's normalisation as y = a x + b: a = weight * invstd, b = bias - mean * a. */
typedef struct {
    float a, b;
} bn_affine;

static inline bn_affine affine_of(int64_t ch, const float *mean, const float *var, float eps,
                                  const float *weight, const float *bias) {
    float a = (weight ? weight[ch] : 1.0f) * rg_bn_invstd(var[ch], eps);
    return (bn_affine){a, (bias ? bias[ch] : 0.0f) - mean[ch] * a};
}

/* Channel ch's coefficients of rg_bn_dx: the mean and invstd that make xhat, weight * invstd,
 * and the two batch means of the gradient sums (0 without sums: evaluation). */
typedef struct {
    float m, inv, w_inv, mdy, mdyx;
} bn_dx_coef;

static inline bn_dx_coef dx_coef_of(int64_t c, int64_t ch, const float *mean, const float *var,
                                    float eps, const float *weight, const float *sums) {
    float count = sums ? sums[2 * c] : 1.0f, inv = rg_bn_invstd(var[ch], eps);
    return (bn_dx_coef){mean[ch], inv, (weight ? weight[ch] : 1.0f) * inv,
                        sums ? sums[ch] / count : 0.0f, sums ? sums[c + ch] / count : 0.0f};
}

/* ---- small planes ----
 *
 * Below SMALL_HW floats a plane (ResNet's last stages at 64 px: 4x4 and 2x2 planes of 512-2048
 * channels) the loops above run a few iterations a plane, in scalar tails, and reload the
 * channel's coefficients each time: 2x2 planes went at 7-12% of a copy's speed, 4x4 at 37-66%.
 * There, an image's planes of a run of channels (c0 ... c0 + cn - 1, cn * hw <= SMALL_RUN floats)
 * are one contiguous row, and each pass walks whole rows: the reductions add row after row into
 * one float accumulator per element (folded into each channel's double every small_block
 * images, in the same order whatever the run, so the result still does not depend on the
 * threads), and the element-wise passes read each channel's coefficients from copies spread over
 * the row (expanded once per run and thread).
 * The reductions (the statistics, and so training's forward in one call, and backward's sums)
 * take rows up to SMALL_HW_REDUCE floats a plane. At 7x7 (64 channels, batch 128, Zen 3, one
 * thread, callgrind) the statistics ran 1.22 instructions a float as rows against 3.0 as planes,
 * and the forward 0.29 ns a float instead of 0.36-0.39 with x in cache (the same with x in L3,
 * where the short runs of 7x7 planes bound it); backward's sums likewise, 0.23-0.29 ns against
 * 0.24-0.37. Backward's dx stays on planes there: as rows it ran 1.42 instructions a float
 * against 3.03 and was still 1.1-1.5x slower, six loads a vector (x, dy and four rows of
 * coefficients) against two. */
#define SMALL_HW 32
#define SMALL_HW_REDUCE 64
#define SMALL_RUN 1024
#define BN_FIN 256 /* channels finalised a block (finalize_run) */

/* Images a block of the small-plane reductions: each float accumulator adds one value an image,
 * and at most as many as a lane of the planes' reductions (BN_BLOCK / BN_LANES = 64) or a
 * block's planes, whichever is more. Folding is a chain of double adds per channel; at 7x7 planes
 * a fold every 20 images (planes_per_block) took an eighth of the forward. */
static int64_t small_block(int64_t hw) {
    int64_t planes = planes_per_block(hw);
    return planes > BN_BLOCK / BN_LANES ? planes : BN_BLOCK / BN_LANES;
}

/* Channels a run for the reductions: at most `most` channels (SMALL_RUN floats, or less), in
 * runs that the threads share evenly: 64 channels of 7x7 in runs of 10 left one thread 4 runs
 * and the other 3 (at most 10 channels a run: 8, 4 each). */
static int64_t even_runs(int64_t n, int64_t c, int64_t hw, int64_t most) {
    int64_t threads = n * c * hw > RG_CPU_PAR_MIN ? omp_get_max_threads() : 1;
    if (most < 1) most = 1;
    int64_t runs = (c + most - 1) / most;
    runs = (runs + threads - 1) / threads * threads; /* a whole number of runs a thread */
    int64_t cpr = (c + runs - 1) / runs;
    return cpr < 1 ? 1 : cpr;
}

static int64_t small_run_channels(int64_t n, int64_t c, int64_t hw) {
    return even_runs(n, c, hw, SMALL_RUN / hw);
}

/* The per-channel loops below run with hw a constant for ResNet's 2x2 and 4x4 planes, where the
 * compiler vectorises them across channels (at 2x2 and batch 32 the scalar loops took a third
 * of the statistics pass); the same sums in the same order either way. */
#define BN_SMALL_HW_CASES(call, hw)                                                                \
    do {                                                                                           \
        if ((hw) == 4)                                                                             \
            call(4);                                                                               \
        else if ((hw) == 16)                                                                       \
            call(16);                                                                              \
        else                                                                                       \
            call(hw);                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void fold_hw(int64_t cn, int64_t hw, const float *acc,
                                                          double *s) {
    for (int64_t k = 0; k < cn; k++) {
        double t[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t j = 0;
        for (; j + 4 <= hw; j += 4)
            for (int l = 0; l < 4; l++) t[l] += acc[k * hw + j + l];
        for (int l = 0; j + l < hw; l++) t[l] += acc[k * hw + j + l];
        s[k] += (t[0] + t[1]) + (t[2] + t[3]);
    }
}

/* s[k] += the sum of acc[k*hw ... k*hw + hw - 1] for the cn channels of a run; then acc = 0
 * unless it was the last block */
static void small_fold(int64_t cn, int64_t hw, float *acc, double *s, bool last) {
#define FOLD(h) fold_hw(cn, h, acc, s)
    BN_SMALL_HW_CASES(FOLD, hw);
#undef FOLD
    if (!last) memset(acc, 0, (size_t)(cn * hw) * sizeof(float));
}

static inline __attribute__((always_inline)) void spread_hw(int64_t cn, int64_t hw, const float *v,
                                                            float *row) {
    for (int64_t k = 0; k < cn; k++)
        for (int64_t j = 0; j < hw; j++) row[k * hw + j] = v[k];
}

/* row[k*hw + j] = v[k]: the cn values of a run's channels spread over its row */
static void small_spread(int64_t cn, int64_t hw, const float *v, float *row) {
#define SPREAD(h) spread_hw(cn, h, v, row)
    BN_SMALL_HW_CASES(SPREAD, hw);
#undef SPREAD
}

/* Rows of at most this many floats (a run's channels of one image: 8 channels of 7x7 in
 * ResNet-20's last stage, 392 floats) have the next pass's four rows prefetched: each is a
 * separate stretch of 1.5 KB, c * hw floats from the one before, too short for the hardware's
 * prefetchers to ramp up. The forward of 128 x 64 x 7x7 (`ringgrad-bench --only membw`, Zen 5,
 * five alternated runs each) went from a median 64% to 69% of a copy at one thread and 61% to 63%
 * at two (58% to 68% in three runs before); ResNet-50's 4x4 and 2x2 rows (1,024 floats) lost with
 * it (85% to 76% at one thread), and the backward's reduction (two rows a pass, x and dy) gained
 * nothing (84-85% either way), so neither has it. */
#define PREFETCH_ROW_MAX 512

/* batchnorm_stats on small planes; the shifts are already in stats[2C+1 ...]. */
static void stats_small_run(int64_t n, int64_t c, int64_t hw, const float *x, int64_t c0,
                            int64_t cn, float *stats) {
    int64_t block = small_block(hw), len = cn * hw;
    float a1[SMALL_RUN], a2[SMALL_RUN], kr[SMALL_RUN]; /* kr: the shifts, spread */
    double s[SMALL_RUN], ss[SMALL_RUN];
    /* only what the run uses is cleared: at 2x2 planes and batch 32, clearing all of them took
     * a tenth of the pass */
    memset(a1, 0, (size_t)len * sizeof *a1), memset(a2, 0, (size_t)len * sizeof *a2);
    memset(s, 0, (size_t)cn * sizeof *s), memset(ss, 0, (size_t)cn * sizeof *ss);
    small_spread(cn, hw, stats + 2 * c + 1 + c0, kr);
    for (int64_t i0 = 0; i0 < n; i0 += block) { /* blocks of images, each then folded */
        int64_t i1 = n - i0 < block ? n : i0 + block, i = i0;
        for (; i + 3 < i1; i += 4) { /* four rows a pass over the accumulators */
            const float *p = x + (i * c + c0) * hw, *q = p + c * hw; /* (cn, HW) each */
            const float *u = q + c * hw, *v = u + c * hw;
            if (len <= PREFETCH_ROW_MAX && i + 7 < n) /* the next pass's four rows */
                for (int64_t r = 4; r < 8; r++)
                    for (int64_t j = 0; j < len; j += 16) __builtin_prefetch(p + r * c * hw + j);
            for (int64_t j = 0; j < len; j++) {
                float d = p[j] - kr[j], e = q[j] - kr[j], f = u[j] - kr[j], g = v[j] - kr[j];
                a1[j] += (d + e) + (f + g), a2[j] += (d * d + e * e) + (f * f + g * g);
            }
        }
        for (; i < i1; i++) {
            const float *p = x + (i * c + c0) * hw;
            for (int64_t j = 0; j < len; j++) {
                float d = p[j] - kr[j];
                a1[j] += d, a2[j] += d * d;
            }
        }
        small_fold(cn, hw, a1, s, i1 == n), small_fold(cn, hw, a2, ss, i1 == n);
    }
    for (int64_t k = 0; k < cn; k++) stats[c0 + k] = (float)s[k], stats[c + c0 + k] = (float)ss[k];
}

/* sums[ch] = sum dy, sums[c + ch] = sum dy*xhat (dy masked by relu_y where given) for the run of
 * channels c0 ... c0 + cn - 1 on small planes: batchnorm_backward_reduce's reduction. */
static void backward_reduce_small_run(int64_t n, int64_t c, int64_t hw, const float *x,
                                      const float *dy, const float *relu_y, const float *mean,
                                      const float *var, float eps, int64_t c0, int64_t cn,
                                      float *sums) {
    int64_t block = small_block(hw), len = cn * hw;
    float a1[SMALL_RUN], a2[SMALL_RUN], m[SMALL_RUN];
    double sd[SMALL_RUN], sdx[SMALL_RUN];
    memset(a1, 0, (size_t)len * sizeof *a1), memset(a2, 0, (size_t)len * sizeof *a2);
    memset(sd, 0, (size_t)cn * sizeof *sd), memset(sdx, 0, (size_t)cn * sizeof *sdx);
    small_spread(cn, hw, mean + c0, m);
    for (int64_t i0 = 0; i0 < n; i0 += block) { /* blocks of images, each then folded */
        int64_t i1 = n - i0 < block ? n : i0 + block, i = i0;
        for (; i + 1 < i1; i += 2) { /* two rows a pass over the accumulators */
            int64_t at = (i * c + c0) * hw, next = c * hw;
            const float *p = x + at, *g = dy + at, *ry = relu_y ? relu_y + at : NULL;
            if (ry) {
                for (int64_t j = 0; j < len; j++) {
                    float g0 = rg_k_relu_grad(ry[j], g[j]);
                    float g1 = rg_k_relu_grad(ry[next + j], g[next + j]);
                    a1[j] += g0 + g1, a2[j] += g0 * (p[j] - m[j]) + g1 * (p[next + j] - m[j]);
                }
            } else {
                for (int64_t j = 0; j < len; j++) {
                    float g0 = g[j], g1 = g[next + j];
                    a1[j] += g0 + g1, a2[j] += g0 * (p[j] - m[j]) + g1 * (p[next + j] - m[j]);
                }
            }
        }
        if (i < i1) {
            int64_t at = (i * c + c0) * hw;
            const float *p = x + at, *g = dy + at, *ry = relu_y ? relu_y + at : NULL;
            for (int64_t j = 0; j < len; j++) {
                float gj = ry ? rg_k_relu_grad(ry[j], g[j]) : g[j];
                a1[j] += gj, a2[j] += gj * (p[j] - m[j]);
            }
        }
        small_fold(cn, hw, a1, sd, i1 == n), small_fold(cn, hw, a2, sdx, i1 == n);
    }
    for (int64_t k = 0; k < cn; k++) {
        sums[c0 + k] = (float)sd[k];
        sums[c + c0 + k] = (float)(sdx[k] * rg_bn_invstd(var[c0 + k], eps));
    }
}

/* The shifts K (stats[2C+1 ...]) and the count (stats[2C]) of batchnorm_stats. */
static void stats_begin(int64_t n, int64_t c, int64_t hw, const float *x, const float *shift,
                        float *stats) {
    float *kc = stats + 2 * c + 1; /* each channel's shift K */
    for (int64_t ch = 0; ch < c; ch++) /* an empty batch has no first value: 0 */
        kc[ch] = shift ? shift[ch] : n > 0 && hw > 0 ? x[ch * hw] : 0.0f;
    stats[2 * c] = (float)(n * hw);
}

void rg_cpu_batchnorm_stats(int64_t n, int64_t c, int64_t hw, const float *x, const float *shift,
                            float *stats) {
    stats_begin(n, c, hw, x, shift, stats);
    if (hw < SMALL_HW_REDUCE) {
        int64_t cpr = small_run_channels(n, c, hw);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
        for (int64_t c0 = 0; c0 < c; c0 += cpr)
            stats_small_run(n, c, hw, x, c0, c - c0 < cpr ? c - c0 : cpr, stats);
        return;
    }
    const float *kc = stats + 2 * c + 1;
    int64_t block = planes_per_block(hw), chunk = reduce_chunk(n, c, hw);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t c0 = 0; c0 < c; c0 += chunk) {
        int64_t cn = c - c0 < chunk ? c - c0 : chunk;
        float s1[BN_RCHUNK][BN_LANES] = {{0}}, s2[BN_RCHUNK][BN_LANES] = {{0}};
        double s[BN_RCHUNK] = {0}, ss[BN_RCHUNK] = {0};
        for (int64_t i = 0; i < n; i++) {
            for (int64_t k = 0; k < cn; k++) {
                const float *p = x + (i * c + c0 + k) * hw; /* (HW) */
                float kk = kc[c0 + k];
                bn_vec kv = (bn_vec){0} + kk;
                int64_t j = BN_PLANE_SUMS(BN_VEC(p + o_) - kv, hw, s1[k], s2[k], v, v * v);
                for (; j < hw; j++) { /* the tail */
                    float d = p[j] - kk;
                    s[k] += d, ss[k] += (double)d * d;
                }
            }
            if ((i + 1) % block == 0 || i + 1 == n)
                for (int64_t k = 0; k < cn; k++)
                    s[k] += lanes_flush(s1[k]), ss[k] += lanes_flush(s2[k]);
        }
        for (int64_t k = 0; k < cn; k++)
            stats[c0 + k] = (float)s[k], stats[c + c0 + k] = (float)ss[k];
    }
}

/* rg_bn_finalize_channel (core/kernels.h) for the channels c0 ... c0 + cn - 1, as loops the
 * compiler vectorises: the scalar calls' three double divisions a channel were a fifth of the
 * 2x2 forward (32 x 2048 x 2x2: 5-8 of 35 us). The same operations per channel; contraction into
 * FMAs is off here, so that a channel's bits do not depend on whether it falls in the vector
 * loop or its scalar remainder (which differs between the one-call forward's runs and the
 * three-call path). */
#if defined(__clang__) /* clang contracts within one expression only, alike in both loops */
#define BN_NO_CONTRACT __attribute__((noinline))
#else
#define BN_NO_CONTRACT __attribute__((noinline, optimize("fp-contract=off")))
#endif
BN_NO_CONTRACT static void finalize_run(int64_t c, int64_t c0, int64_t cn, float momentum,
                                        const float *restrict stats, float *restrict meanvar,
                                        float *restrict rmean, float *restrict rvar) {
    const double count = stats[2 * c];
    const float *s = stats + c0, *ss = stats + c + c0, *k = stats + 2 * c + 1 + c0;
    float *mo = meanvar + c0, *vo = meanvar + c + c0;
    double mean[BN_FIN], var[BN_FIN];
    for (int64_t j0 = 0; j0 < cn; j0 += BN_FIN) {
        int64_t len = cn - j0 < BN_FIN ? cn - j0 : BN_FIN;
        for (int64_t j = 0; j < len; j++) {
            double d = s[j0 + j] / count, v = ss[j0 + j] / count - d * d;
            mean[j] = k[j0 + j] + d, var[j] = v > 0.0 ? v : 0.0;
        }
        for (int64_t j = 0; j < len; j++) mo[j0 + j] = (float)mean[j];
        for (int64_t j = 0; j < len; j++) vo[j0 + j] = (float)var[j];
        if (rmean)
            for (int64_t j = 0; j < len; j++)
                rmean[c0 + j0 + j] =
                    (float)((1.0 - momentum) * rmean[c0 + j0 + j] + momentum * mean[j]);
        if (rvar)
            for (int64_t j = 0; j < len; j++) {
                double unbiased = count > 1.0 ? var[j] * count / (count - 1.0) : var[j];
                rvar[c0 + j0 + j] =
                    (float)((1.0 - momentum) * rvar[c0 + j0 + j] + momentum * unbiased);
            }
    }
    if (c0 == 0 && cn > 0) meanvar[2 * c] = (float)count;
}

void rg_cpu_batchnorm_finalize(int64_t c, float momentum, const float *stats, float *meanvar,
                               float *running_mean, float *running_var, int64_t *num_batches) {
    finalize_run(c, 0, c, momentum, stats, meanvar, running_mean, running_var);
    if (num_batches) ++*num_batches;
}

/* The coefficients y = a x + b of a run's channels c0 ... c0 + cn - 1, spread over its row. */
static void affine_row(int64_t hw, int64_t c0, int64_t cn, const float *mean, const float *var,
                       float eps, const float *weight, const float *bias, float *a, float *b) {
    float ak[SMALL_RUN], bk[SMALL_RUN];
    for (int64_t k = 0; k < cn; k++) {
        bn_affine ab = affine_of(c0 + k, mean, var, eps, weight, bias);
        ak[k] = ab.a, bk[k] = ab.b;
    }
    small_spread(cn, hw, ak, a), small_spread(cn, hw, bk, b);
}

/* q = a p + b over a row of len floats, then + res (where not NULL), then the ReLU */
static inline __attribute__((always_inline)) void apply_row(int64_t len, const float *p,
                                                            const float *a, const float *b,
                                                            const float *res, bool relu, float *q) {
    if (res) {
        for (int64_t j = 0; j < len; j++) {
            float v = (a[j] * p[j] + b[j]) + res[j];
            q[j] = relu ? rg_k_relu(v) : v;
        }
    } else if (relu) {
        for (int64_t j = 0; j < len; j++) q[j] = rg_k_relu(a[j] * p[j] + b[j]);
    } else {
        for (int64_t j = 0; j < len; j++) q[j] = a[j] * p[j] + b[j];
    }
}

/* batchnorm_apply on small planes: each thread takes (run, image) pairs in order and expands the
 * coefficients of a run's channels when it reaches a new run. */
static void apply_small(int64_t n, int64_t c, int64_t hw, const float *x, const float *mean,
                        const float *var, float eps, const float *weight, const float *bias,
                        const float *residual, bool relu, float *y) {
    int64_t cpr = SMALL_RUN / hw, runs = (c + cpr - 1) / cpr;
#pragma omp parallel if (n * c * hw > RG_CPU_PAR_MIN)
    {
        float a[SMALL_RUN], b[SMALL_RUN]; /* y = a x + b, element by element of a row */
        int64_t have = -1;
#pragma omp for collapse(2) schedule(static)
        for (int64_t r = 0; r < runs; r++)
            for (int64_t i = 0; i < n; i++) {
                int64_t c0 = r * cpr, cn = c - c0 < cpr ? c - c0 : cpr, at = (i * c + c0) * hw;
                if (r != have) affine_row(hw, c0, cn, mean, var, eps, weight, bias, a, b);
                have = r;
                apply_row(cn * hw, x + at, a, b, residual ? residual + at : NULL, relu, y + at);
            }
    }
}

void rg_cpu_batchnorm_apply(int64_t n, int64_t c, int64_t hw, const float *x, const float *mean,
                            const float *var, float eps, const float *weight, const float *bias,
                            const float *residual, bool relu, float *y) {
    if (hw < SMALL_HW) {
        apply_small(n, c, hw, x, mean, var, eps, weight, bias, residual, relu, y);
        return;
    }
    for (int64_t c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int64_t cn = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK;
        bn_affine ab[BN_CHUNK];
        for (int64_t k = 0; k < cn; k++) ab[k] = affine_of(c0 + k, mean, var, eps, weight, bias);
#pragma omp parallel for collapse(2) BN_PAR(n, cn, hw) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < cn; k++) {
                int64_t at = (i * c + c0 + k) * hw;
                const float *p = x + at, *r = residual ? residual + at : NULL;
                float *q = y + at, ak = ab[k].a, bk = ab[k].b;
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

/* ---- training's forward in one call ----
 *
 * batchnorm_train_forward is batchnorm_stats (no shift), _finalize and _apply, bit for bit. On
 * small planes it takes a run of channels at a time through all three, so that the run's rows
 * (n * cn * hw floats, kept under FUSE_FLOATS) are still in the core's cache when they are
 * normalised: x is read from farther away once instead of twice. Planes of SMALL_HW_REDUCE floats
 * and more go through the three passes: there a chunk of channels is short runs of hw floats, one
 * per image, c * hw floats apart, which the prefetchers followed worse than the passes' walk in
 * memory order, and the chunked version was 5-30% slower (docs/PERFORMANCE.md, eighteenth
 * session). */
#define FUSE_FLOATS 65536

/* Channels a run of the one-call passes: at most SMALL_RUN floats a row, and few enough that the
 * run's rows of the `tensors` inputs read twice (x; x and dy) stay under FUSE_FLOATS floats
 * together; in runs the threads share evenly (even_runs). */
static int64_t fused_run_channels(int64_t n, int64_t c, int64_t hw, int tensors) {
    int64_t cpr = SMALL_RUN / hw, fit = FUSE_FLOATS / (tensors * n * hw);
    return even_runs(n, c, hw, fit < cpr ? fit : cpr);
}

void rg_cpu_batchnorm_train_forward(int64_t n, int64_t c, int64_t hw, const float *x,
                                    float momentum, float eps, const float *weight,
                                    const float *bias, const float *residual, bool relu,
                                    float *stats, float *meanvar, float *running_mean,
                                    float *running_var, int64_t *num_batches, float *y) {
    if (hw >= SMALL_HW_REDUCE || n <= 0) {
        rg_cpu_batchnorm_stats(n, c, hw, x, NULL, stats);
        rg_cpu_batchnorm_finalize(c, momentum, stats, meanvar, running_mean, running_var,
                                  num_batches);
        rg_cpu_batchnorm_apply(n, c, hw, x, meanvar, meanvar + c, eps, weight, bias, residual, relu,
                               y);
        return;
    }
    stats_begin(n, c, hw, x, NULL, stats);
    int64_t cpr = fused_run_channels(n, c, hw, 1);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t c0 = 0; c0 < c; c0 += cpr) {
        int64_t cn = c - c0 < cpr ? c - c0 : cpr;
        stats_small_run(n, c, hw, x, c0, cn, stats);
        finalize_run(c, c0, cn, momentum, stats, meanvar, running_mean, running_var);
        float a[SMALL_RUN], b[SMALL_RUN];
        affine_row(hw, c0, cn, meanvar, meanvar + c, eps, weight, bias, a, b);
        for (int64_t i = 0; i < n; i++) {
            int64_t at = (i * c + c0) * hw;
            apply_row(cn * hw, x + at, a, b, residual ? residual + at : NULL, relu, y + at);
        }
    }
    if (num_batches) ++*num_batches;
}

/* The same reduction on planes of at least SMALL_HW_REDUCE floats. */
static void backward_reduce_planes(int64_t n, int64_t c, int64_t hw, const float *x,
                                   const float *dy, const float *relu_y, const float *mean,
                                   const float *var, float eps, float *sums) {
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
}

void rg_cpu_batchnorm_backward_reduce(int64_t n, int64_t c, int64_t hw, const float *x,
                                      const float *dy, const float *relu_y, const float *mean,
                                      const float *var, float eps, float *sums, float beta_w,
                                      float *dweight, float beta_b, float *dbias) {
    if (hw < SMALL_HW_REDUCE) {
        int64_t cpr = small_run_channels(n, c, hw);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
        for (int64_t c0 = 0; c0 < c; c0 += cpr)
            backward_reduce_small_run(n, c, hw, x, dy, relu_y, mean, var, eps, c0,
                                      c - c0 < cpr ? c - c0 : cpr, sums);
    } else
        backward_reduce_planes(n, c, hw, x, dy, relu_y, mean, var, eps, sums);
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

/* batchnorm_backward_data on small planes, as apply_small, with the coefficients expanded over a
 * run's row. rg_bn_dx's w_invstd (dy - mean_dy - xhat mean_dy_xhat) is rearranged as
 * a dy + (b (x - mean) + k), with a = w_invstd, b = -w_invstd invstd mean_dy_xhat and
 * k = -w_invstd mean_dy: four rows of coefficients to load beside x and dy instead of five, which
 * made the loop 5-8% faster (the loads bound it at 2x2 and 4x4). x - mean stays a difference of
 * neighbours, as in xhat, where b x + (k - b mean) would cancel two large terms in channels far
 * from zero. The result is not rg_bn_dx's to the bit, but it is the same here at any thread
 * count and in both calls that use it. */
typedef struct {
    float m[SMALL_RUN], a[SMALL_RUN], b[SMALL_RUN], k[SMALL_RUN];
} dx_coeffs;

static inline __attribute__((always_inline)) void dx_row(int64_t len, const float *p,
                                                         const float *g, const float *ry,
                                                         const dx_coeffs *k, float beta, float *d) {
    for (int64_t j = 0; j < len; j++) {
        float gj = ry ? rg_k_relu_grad(ry[j], g[j]) : g[j];
        float r = k->a[j] * gj + (k->b[j] * (p[j] - k->m[j]) + k->k[j]);
        d[j] = beta == 0.0f ? r : r + beta * d[j];
    }
}

/* The coefficients of the run of channels c0 ... c0 + cn - 1, spread over its row. */
static void dx_coeffs_run(int64_t c, int64_t hw, int64_t c0, int64_t cn, const float *mean,
                          const float *var, float eps, const float *weight, const float *sums,
                          dx_coeffs *k) {
    float a[SMALL_RUN], b[SMALL_RUN], kk[SMALL_RUN]; /* the channels' own, then spread */
    for (int64_t ch = 0; ch < cn; ch++) {
        bn_dx_coef co = dx_coef_of(c, c0 + ch, mean, var, eps, weight, sums);
        a[ch] = co.w_inv, b[ch] = -co.w_inv * co.inv * co.mdyx, kk[ch] = -co.w_inv * co.mdy;
    }
    small_spread(cn, hw, mean + c0, k->m);
    small_spread(cn, hw, a, k->a), small_spread(cn, hw, b, k->b), small_spread(cn, hw, kk, k->k);
}

/* dx_row with its constant cases: each loop vectorises */
static void dx_row_any(int64_t len, const float *p, const float *g, const float *ry,
                       const dx_coeffs *k, float beta, float *d) {
    if (ry && beta == 0.0f)
        dx_row(len, p, g, ry, k, 0.0f, d);
    else if (ry)
        dx_row(len, p, g, ry, k, beta, d);
    else if (beta == 0.0f)
        dx_row(len, p, g, NULL, k, 0.0f, d);
    else
        dx_row(len, p, g, NULL, k, beta, d);
}

static void backward_data_small(int64_t n, int64_t c, int64_t hw, const float *x, const float *dy,
                                const float *relu_y, const float *mean, const float *var, float eps,
                                const float *weight, const float *sums, float beta, float *dx) {
    int64_t cpr = SMALL_RUN / hw, runs = (c + cpr - 1) / cpr;
#pragma omp parallel if (n * c * hw > RG_CPU_PAR_MIN)
    {
        dx_coeffs coeffs; /* 16 KB of the thread's stack (28 with dx_coeffs_run's) */
        int64_t have = -1;
#pragma omp for collapse(2) schedule(static)
        for (int64_t r = 0; r < runs; r++)
            for (int64_t i = 0; i < n; i++) {
                int64_t c0 = r * cpr, cn = c - c0 < cpr ? c - c0 : cpr, at = (i * c + c0) * hw;
                if (r != have) dx_coeffs_run(c, hw, c0, cn, mean, var, eps, weight, sums, &coeffs);
                have = r;
                dx_row_any(cn * hw, x + at, dy + at, relu_y ? relu_y + at : NULL, &coeffs, beta,
                           dx + at);
            }
    }
}

void rg_cpu_batchnorm_backward_data(int64_t n, int64_t c, int64_t hw, const float *x,
                                    const float *dy, const float *relu_y, const float *mean,
                                    const float *var, float eps, const float *weight,
                                    const float *sums, float beta, float *dx) {
    if (hw < SMALL_HW) {
        backward_data_small(n, c, hw, x, dy, relu_y, mean, var, eps, weight, sums, beta, dx);
        return;
    }
    for (int64_t c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int64_t cn = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK;
        bn_dx_coef co[BN_CHUNK];
        for (int64_t k = 0; k < cn; k++)
            co[k] = dx_coef_of(c, c0 + k, mean, var, eps, weight, sums);
#pragma omp parallel for collapse(2) BN_PAR(n, cn, hw) schedule(static)
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < cn; k++) {
                int64_t at = (i * c + c0 + k) * hw;
                const float *p = x + at, *g = dy + at;
                float *d = dx + at;
                float mk = co[k].m, ik = co[k].inv, wk = co[k].w_inv, a = co[k].mdy, b = co[k].mdyx;
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

/* ---- training's backward in one call ----
 *
 * batchnorm_backward is batchnorm_backward_reduce and batchnorm_backward_data (with the sums the
 * first wrote), bit for bit: training's backward without SyncBatchNorm, whose allreduce of the
 * sums must come between the two. As training's forward, on small planes it takes a run of
 * channels at a time through both passes, so that the run's rows of x and dy (n * cn * hw floats
 * each, kept under FUSE_FLOATS together) are still in the core's cache for their second read.
 * Planes of SMALL_HW to SMALL_HW_REDUCE floats take the two calls: sums as rows, dx as planes. */
void rg_cpu_batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float *x, const float *dy,
                               const float *relu_y, const float *mean, const float *var, float eps,
                               const float *weight, float *sums, float beta_w, float *dweight,
                               float beta_b, float *dbias, float beta, float *dx) {
    if (hw >= SMALL_HW || n <= 0) {
        rg_cpu_batchnorm_backward_reduce(n, c, hw, x, dy, relu_y, mean, var, eps, sums, beta_w,
                                         dweight, beta_b, dbias);
        rg_cpu_batchnorm_backward_data(n, c, hw, x, dy, relu_y, mean, var, eps, weight, sums, beta,
                                       dx);
        return;
    }
    sums[2 * c] = (float)(n * hw);
    int64_t cpr = fused_run_channels(n, c, hw, 2);
#pragma omp parallel for BN_PAR(n, c, hw) schedule(static)
    for (int64_t c0 = 0; c0 < c; c0 += cpr) {
        int64_t cn = c - c0 < cpr ? c - c0 : cpr;
        backward_reduce_small_run(n, c, hw, x, dy, relu_y, mean, var, eps, c0, cn, sums);
        for (int64_t ch = c0; ch < c0 + cn; ch++) {
            if (dweight) dweight[ch] = rg_bn_grad_param(sums[c + ch], beta_w, dweight[ch]);
            if (dbias) dbias[ch] = rg_bn_grad_param(sums[ch], beta_b, dbias[ch]);
        }
        dx_coeffs coeffs; /* 16 KB of the thread's stack (28 with dx_coeffs_run's) */
        dx_coeffs_run(c, hw, c0, cn, mean, var, eps, weight, sums, &coeffs);
        for (int64_t i = 0; i < n; i++) {
            int64_t at = (i * c + c0) * hw;
            dx_row_any(cn * hw, x + at, dy + at, relu_y ? relu_y + at : NULL, &coeffs, beta,
                       dx + at);
        }
    }
}
