/* kernels.h — per-element math shared by the CPU backend and the CUDA backend.
 *
 * Every formula that an elementwise kernel applies lives here once, as a static inline RG_HOSTDEV
 * function: the CPU loop and the CUDA kernel call the same code. It also holds Philox-4x32-10, the
 * counter-based random generator behind dropout and initialisation: element i of a stream draws
 * from counter (offset + i), so the numbers do not depend on thread count or launch shape, and the
 * CPU and the GPU produce the same dropout mask. */
#ifndef RG_KERNELS_H
#define RG_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hostdev.h"
#include "core/sanitize.h"

/* ---- Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) ----
 * Pure arithmetic on values: no sanitizer checks in sanitizer builds (RG_UNCHECKED). */

typedef struct {
    uint32_t v[4];
} rg_philox4;

static RG_HOSTDEV RG_UNCHECKED uint32_t rg_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Philox-4x32-10 proper: four random 32-bit words for the 128-bit counter ctr under the 64-bit
 * key. Ten rounds of two multiplications; the key is bumped by the Weyl constants between rounds.
 * Matches the known-answer vectors of Random123 (tests/tensor/test_kernels.c). */
static RG_HOSTDEV RG_UNCHECKED rg_philox4 rg_philox4x32(const uint32_t ctr[4],
                                                        const uint32_t key[2]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = rg_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = rg_mulhilo32(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    rg_philox4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Four random 32-bit words for the 64-bit counter `ctr` (the upper two counter words are zero)
 * under the 64-bit key `seed`: the form every stream in ringgrad uses. */
static RG_HOSTDEV RG_UNCHECKED rg_philox4 rg_philox(uint64_t seed, uint64_t ctr) {
    const uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), 0u, 0u};
    const uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    return rg_philox4x32(c, k);
}

/* Philox counters that cover stream positions [offset, offset + n) (n > 0) when each counter
 * covers 2^shift consecutive positions: RG_UNIFORM_SHIFT for the uniform stream below,
 * RG_DROPOUT_SHIFT for dropout's decisions. */
static RG_HOSTDEV int64_t rg_stream_counters(int64_t n, uint64_t offset, int shift) {
    return (int64_t)(((offset + (uint64_t)n - 1) >> shift) - (offset >> shift) + 1);
}

/* Uniform in [0, 1) with 24 random bits, from stream element i (four elements per counter). */
#define RG_UNIFORM_SHIFT 2
static RG_HOSTDEV RG_UNCHECKED float rg_uniform_of_word(uint32_t w) {
    return (float)(w >> 8) * (1.0f / 16777216.0f); /* the word's top 24 bits */
}
static RG_HOSTDEV RG_UNCHECKED float rg_philox_uniform(uint64_t seed, uint64_t i) {
    rg_philox4 r = rg_philox(seed, i >> RG_UNIFORM_SHIFT);
    return rg_uniform_of_word(r.v[i & 3]);
}

/* Standard normal by Box-Muller from elements 2i and 2i+1: words 0 and 1 of counter i / 2 for an
 * even i, words 2 and 3 for an odd one. */
static RG_HOSTDEV RG_UNCHECKED float rg_box_muller(float u1, float u2) {
    float r = sqrtf(-2.0f * logf(1.0f - u1)); /* 1 - u1 is in (0, 1] */
    return r * cosf(6.28318530717958647692f * u2);
}
static RG_HOSTDEV RG_UNCHECKED float rg_philox_normal(uint64_t seed, uint64_t i) {
    return rg_box_muller(rg_philox_uniform(seed, 2 * i), rg_philox_uniform(seed, 2 * i + 1));
}

/* ---- activations --------------------------------------------------------------------------- */

/* relu(x) = max(x, 0), NaN in NaN out (as PyTorch: a NaN must not turn into a plausible 0) */
static RG_HOSTDEV float rg_k_relu(float x) { return x < 0.0f ? 0.0f : x; }
/* d relu / dx = 0 if x <= 0 else 1 (0 at x = 0, and NaN passes dy through, as PyTorch's
 * threshold_backward) */
static RG_HOSTDEV float rg_k_relu_grad(float x, float dy) { return x <= 0.0f ? 0.0f : dy; }

/* ---- batch normalisation (PyTorch's BatchNorm2d) ------------------------------------------ */

/* 1 / sqrt(var + eps) */
static RG_HOSTDEV float rg_bn_invstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }

/* Channel c of a statistics buffer (3C+1: sum and sum of squares about the shift K, count, K;
 * see batchnorm_stats in tensor/backend_impl.h) into mean and biased variance (meanvar: 2C+1,
 * mean, variance, count), and the running statistics' update with PyTorch's momentum rule, which
 * uses the unbiased variance: running = (1-m) running + m (mean | var n/(n-1)). The difference of
 * squares is taken in double; a negative rounding residue is clamped to 0. */
static RG_HOSTDEV void rg_bn_finalize_channel(int64_t c, int64_t ch, float momentum,
                                              const float *stats, float *meanvar, float *rmean,
                                              float *rvar) {
    double count = stats[2 * c], d = stats[ch] / count, mean = stats[2 * c + 1 + ch] + d;
    double var = stats[c + ch] / count - d * d; /* about the shift K: d = mean - K */
    var = var > 0.0 ? var : 0.0;
    meanvar[ch] = (float)mean, meanvar[c + ch] = (float)var;
    if (ch == 0) meanvar[2 * c] = (float)count;
    if (rmean) rmean[ch] = (float)((1.0 - momentum) * rmean[ch] + momentum * mean);
    if (rvar) {
        double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
        rvar[ch] = (float)((1.0 - momentum) * rvar[ch] + momentum * unbiased);
    }
}

/* An affine parameter's gradient from its channel's sum: beta*old + sum, not reading old when
 * beta is 0 (a fresh gradient may hold anything). */
static RG_HOSTDEV float rg_bn_grad_param(float sum, float beta, float old) {
    return beta == 0.0f ? sum : beta * old + sum;
}

/* dx of one element: w*invstd*(dy - mean_dy - xhat*mean_dy_xhat) */
static RG_HOSTDEV float rg_bn_dx(float dy, float xhat, float w_invstd, float mean_dy,
                                 float mean_dy_xhat) {
    return w_invstd * (dy - mean_dy - xhat * mean_dy_xhat);
}

/* ---- dropout: y = keep(i) ? x / (1 - p) : 0, keep(i) = u(seed, offset + i) >= p ---------------
 * Dropout draws two decisions from each 32-bit Philox word, so one counter covers eight stream
 * positions: position i reads the 16-bit half i % 2 (0: the low half) of word (i / 2) % 4 of
 * counter i / 8, as the uniform u = half * 2^-16. A 24-bit uniform per element made the CPU's
 * forward pass Philox-bound (ten rounds per four elements); sixteen bits halve the rounds and
 * quantise p to 2^-16 (the kept fraction is exactly (65536 - ceil(p * 65536)) / 65536). The
 * compare is exact in float: half * 2^-16 has at most 16 significant bits. */
#define RG_DROPOUT_SHIFT 3
#define RG_DROPOUT_PER_COUNTER (1 << RG_DROPOUT_SHIFT)

/* The 16-bit uniform of stream position i, from r = rg_philox(seed, i / 8). */
static RG_HOSTDEV uint32_t rg_dropout_half(rg_philox4 r, uint64_t i) {
    return (r.v[(i >> 1) & 3] >> (16 * (i & 1))) & 0xFFFFu;
}

/* Whether a drawn half keeps its element. */
static RG_HOSTDEV bool rg_dropout_keeps(float p, uint32_t half) {
    return (float)half * (1.0f / 65536.0f) >= p;
}

/* What a kept element is multiplied by: 1/(1-p); p == 1 drops everything. */
static RG_HOSTDEV float rg_dropout_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

static RG_HOSTDEV bool rg_dropout_keep(float p, uint64_t seed, uint64_t i) {
    return rg_dropout_keeps(p, rg_dropout_half(rg_philox(seed, i >> RG_DROPOUT_SHIFT), i));
}

/* The mask dropout's forward may store for its backward, as bits: bit b of the mask (bit b % 32 of
 * 32-bit word b / 32) is keep(8 * (offset / 8) + b), position b % 8 of the (b / 8)-th Philox
 * counter covering the n elements, so element i is bit i + offset % 8, and each counter's eight
 * keeps are one byte. Bits of positions outside [offset, offset + n) are 0. This many words: */
static RG_HOSTDEV int64_t rg_dropout_mask_words(int64_t n, uint64_t offset) {
    return n <= 0 ? 0 : (rg_stream_counters(n, offset, RG_DROPOUT_SHIFT) + 3) / 4;
}

/* ---- optimizer updates (exactly torch.optim's single-tensor rules) -------------------------- */

typedef struct {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step; /* the momentum buffer is empty: torch sets buf = d_p on the first step */
    float grad_scale; /* g = grad_scale * grad (DDP's 1/N folded in); 0 is read as 1 */
} rg_sgd_hparams;

/* The factor applied to a gradient as the update reads it; 0 (a zeroed hparams) means none. */
static RG_HOSTDEV float rg_k_grad_scale(float s) { return s != 0.0f ? s : 1.0f; }

/* g *= grad_scale;  d = g + wd*p;  buf = first ? d : mu*buf + (1-dampening)*d;
 * d = nesterov ? d + mu*buf : buf;  p -= lr*d */
static RG_HOSTDEV void rg_sgd_update(const rg_sgd_hparams *h, float *p, float g, float *buf) {
    float d = rg_k_grad_scale(h->grad_scale) * g;
    if (h->weight_decay != 0.0f) d += h->weight_decay * *p;
    if (h->momentum != 0.0f) {
        float b = h->first_step ? d : h->momentum * *buf + (1.0f - h->dampening) * d;
        *buf = b;
        d = h->nesterov ? d + h->momentum * b : b;
    }
    *p -= h->lr * d;
}

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    bool decoupled;          /* AdamW: p *= 1 - lr*wd before the step; Adam: g += wd*p */
    float bias_correction1;  /* 1 - beta1^t */
    float bias_correction2;  /* 1 - beta2^t */
    float grad_scale;        /* g = grad_scale * grad (DDP's 1/N folded in); 0 is read as 1 */
} rg_adam_hparams;

/* g *= grad_scale;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
static RG_HOSTDEV void rg_adam_update(const rg_adam_hparams *h, float *p, float g, float *m,
                                      float *v) {
    g *= rg_k_grad_scale(h->grad_scale);
    if (h->weight_decay != 0.0f) {
        if (h->decoupled) *p *= 1.0f - h->lr * h->weight_decay;
        else g += h->weight_decay * *p;
    }
    float mt = *m + (1.0f - h->beta1) * (g - *m); /* torch: m.lerp_(g, 1 - beta1) */
    float vt = h->beta2 * *v + (1.0f - h->beta2) * g * g;
    *m = mt, *v = vt;
    float denom = sqrtf(vt) / sqrtf(h->bias_correction2) + h->eps;
    *p -= (h->lr / h->bias_correction1) * (mt / denom);
}

/* ---- float16 for gradient compression on the wire (round to nearest even) ------------------
 * NaNs come out quiet with their payload's top bits, as IEEE 754 asks of a conversion and as
 * x86's F16C instructions (the CPU backend's fast path) do, so that every backend and ISA gives
 * the same bits (a signalling NaN kept its signalling bit here until the first GPU run showed the
 * two paths differ). */

static RG_HOSTDEV uint16_t rg_f32_to_f16(float f) {
    union { float f; uint32_t u; } c = {f};
    uint32_t x = c.u, sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7FFFFFFFu;
    if (absx > 0x7F800000u) /* nan: quiet, with the payload's top 9 bits (as x86's F16C) */
        return (uint16_t)(sign | 0x7E00u | ((absx >> 13) & 0x3FFu));
    if (absx == 0x7F800000u) return (uint16_t)(sign | 0x7C00u); /* inf */
    if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520: inf */
    if (absx < 0x38800000u) {                                    /* subnormal or zero in f16 */
        if (absx < 0x33000000u) return (uint16_t)sign;           /* below half the smallest */
        uint32_t e = absx >> 23, m = (absx & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((absx - 0x38000000u) >> 13);
    uint32_t rem = absx & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

static RG_HOSTDEV float rg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, x;
    if (e == 0x1Fu)
        x = sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u); /* nan: quiet */
    else if (e != 0) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (m == 0) x = sign;
    else { /* subnormal: normalise */
        e = 113;
        while (!(m & 0x400u)) m <<= 1, e--;
        x = sign | (e << 23) | ((m & 0x3FFu) << 13);
    }
    union { uint32_t u; float f; } c = {x};
    return c.f;
}

#endif
