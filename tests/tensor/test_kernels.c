/* Tests for core/kernels.h, the per-element math shared by the CPU and CUDA backends: Philox
 * against Random123's known answers, the uniform and normal streams, float16 conversion against
 * the compiler's _Float16, and one step of SGD and Adam worked out by hand. */
#include "rgtest.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

/* ---- Philox-4x32-10 ---------------------------------------------------------------------- */

typedef struct {
    uint32_t ctr[4], key[2], out[4];
} philox_kat;

/* Known-answer vectors from Random123 (kat_vectors: philox4x32 10 rounds). */
static const philox_kat kats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

Test(tensor_kernels, philox4x32_matches_random123_known_answers) {
    for (int k = 0; k < 3; k++) {
        rg_philox4 r = rg_philox4x32(kats[k].ctr, kats[k].key);
        for (int w = 0; w < 4; w++)
            cr_assert_eq(r.v[w], kats[k].out[w], "vector %d word %d: %08x, want %08x", k, w, r.v[w],
                         kats[k].out[w]);
    }
}

Test(tensor_kernels, philox_wrapper_is_the_core_with_a_64_bit_counter) {
    for (uint64_t t = 0; t < 1000; t++) {
        uint64_t seed = rg_philox(1, t).v[0] * 0x9E3779B97F4A7C15ull + t;
        uint64_t ctr = ((uint64_t)rg_philox(2, t).v[1] << 32) | rg_philox(2, t).v[2];
        const uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0};
        const uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        rg_philox4 a = rg_philox(seed, ctr), b = rg_philox4x32(c, k);
        cr_assert(memcmp(&a, &b, sizeof a) == 0, "seed %llx counter %llx", (unsigned long long)seed,
                  (unsigned long long)ctr);
    }
    /* The stream existing callers (dropout masks, initialisers) drew before the 4-word core was
     * split out, recorded from that version: the split changed no number. */
    rg_philox4 r = rg_philox(0, 97 * 0x100000001ull);
    const uint32_t want[4] = {0x26560201, 0x18724a20, 0xb559fe2c, 0x0876fea1};
    for (int w = 0; w < 4; w++) cr_assert_eq(r.v[w], want[w], "word %d: %08x", w, r.v[w]);
}

Test(tensor_kernels, uniform_is_in_0_1_with_the_right_mean_and_variance) {
    int64_t n = 1 << 20;
    double s = 0, s2 = 0;
    float lo = 1, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        float u = rg_philox_uniform(42, (uint64_t)i);
        cr_assert(u >= 0.0f && u < 1.0f, "element %lld: %.9g", (long long)i, u);
        lo = fminf(lo, u), hi = fmaxf(hi, u);
        s += u, s2 += (double)u * u;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    /* sd of the mean: sqrt(1/12 / n) = 2.8e-4; of the variance: sqrt(1/180 / n) = 7.3e-5 */
    cr_assert(fabs(mean - 0.5) < 6 * 2.8e-4, "mean %.6f", mean);
    cr_assert(fabs(var - 1.0 / 12) < 6 * 7.3e-5, "variance %.6f, want %.6f", var, 1.0 / 12);
    cr_assert(lo < 1e-4 && hi > 1 - 1e-4, "range [%g, %g]", lo, hi);
    /* uniform draws use all four words of a counter, each once */
    cr_assert_eq(rg_philox_uniform(42, 6), (float)(rg_philox(42, 1).v[2] >> 8) / 16777216.0f);
}

/* Dropout's decisions: position 8c + 2w + h reads the 16-bit half h of word w of counter c, as the
 * uniform half * 2^-16, so every half of every word is used once and the kept fraction is exactly
 * (65536 - ceil(p * 2^16)) / 65536 over whole counters' worth of halves. */
Test(tensor_kernels, dropout_reads_each_16_bit_half_once) {
    const float ps[] = {0.1f, 0.5f, 1.0f / 3.0f};
    for (int k = 0; k < 3; k++) {
        uint32_t threshold = (uint32_t)ceil((double)ps[k] * 65536.0);
        for (uint64_t c = 0; c < 4096; c++) {
            rg_philox4 r = rg_philox(17, c);
            for (uint64_t j = 0; j < 8; j++) {
                uint32_t half = (r.v[j / 2] >> (j % 2 ? 16 : 0)) & 0xFFFFu;
                cr_assert_eq(rg_dropout_keep(ps[k], 17, 8 * c + j), half >= threshold,
                             "p %g counter %llu position %llu", (double)ps[k],
                             (unsigned long long)c, (unsigned long long)j);
            }
        }
    }
    /* every threshold: a full sweep of the 65536 halves keeps 65536 - threshold of them */
    int64_t kept = 0;
    for (uint32_t h = 0; h < 65536; h++) kept += rg_dropout_keeps(0.1f, h);
    cr_assert_eq(kept, 65536 - (int64_t)ceil((double)0.1f * 65536.0), "kept %lld", (long long)kept);
}

Test(tensor_kernels, normal_has_mean_0_and_std_1) {
    int64_t n = 1 << 20;
    double s = 0, s2 = 0, s4 = 0;
    for (int64_t i = 0; i < n; i++) {
        double z = rg_philox_normal(7, (uint64_t)i);
        cr_assert(isfinite(z), "element %lld", (long long)i);
        s += z, s2 += z * z, s4 += z * z * z * z;
    }
    double mean = s / n, var = s2 / n - mean * mean, kurt = s4 / n;
    cr_assert(fabs(mean) < 6 / sqrt((double)n), "mean %.6f", mean);
    cr_assert(fabs(var - 1) < 6 * sqrt(2.0 / n), "variance %.6f", var);
    cr_assert(fabs(kurt - 3) < 6 * sqrt(96.0 / n), "fourth moment %.4f, want 3", kurt);
}

Test(tensor_kernels, tensor_fills_use_the_streams_and_advance_the_offset) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(1001), RG_CPU);
    uint64_t off = 8;
    rg_tensor_uniform_(t, -3, 5, 9, &off);
    cr_assert_eq(off, 8 + 1004, "uniform moves the offset by whole counters");
    const float *p = rg_tensor_f32(t);
    for (int i = 0; i < 1001; i++) {
        cr_assert(p[i] >= -3 && p[i] < 5, "element %d: %g", i, p[i]);
        cr_assert_float_eq(p[i], -3 + 8 * rg_philox_uniform(9, 8 + (uint64_t)i), 1e-6);
    }
    rg_tensor *big = rg_tensor_new(RG_F32, RG_SHAPE(1 << 18), RG_CPU);
    off = 0;
    rg_tensor_normal_(big, 3, 2, 10, &off);
    cr_assert_eq(off, 2 << 18, "normal uses two uniforms per element");
    double s = 0, s2 = 0;
    const float *q = rg_tensor_f32(big);
    for (int i = 0; i < 1 << 18; i++) s += q[i], s2 += (double)q[i] * q[i];
    double mean = s / (1 << 18), sd = sqrt(s2 / (1 << 18) - mean * mean);
    cr_assert(fabs(mean - 3) < 6 * 2 / 512.0, "mean %.5f", mean);
    cr_assert(fabs(sd - 2) < 0.03, "std %.5f", sd);
    rgt_free_all(2, (rg_tensor *[]){t, big});
}

/* ---- float16 --------------------------------------------------------------------------------- */

static float f32_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint16_t compiler_f16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float compiler_f32(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static bool f16_is_nan(uint16_t h) {
    return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
}

/* rg_f32_to_f16(f) must equal the compiler's cast; a NaN must stay a NaN of the same sign. */
static void check_f32_to_f16(float f) {
    uint16_t got = rg_f32_to_f16(f), want = compiler_f16(f);
    if (isnan(f)) {
        cr_assert(f16_is_nan(got) && (got & 0x8000u) == (want & 0x8000u),
                  "nan %08x -> %04x, want a nan like %04x", bits_of_f32(f), got, want);
        return;
    }
    cr_assert_eq(got, want, "%.9g (%08x) -> %04x, want %04x", f, bits_of_f32(f), got, want);
}

Test(tensor_kernels, f16_to_f32_matches_the_compiler_for_all_65536_halves) {
    for (uint32_t h = 0; h < 65536; h++) {
        float got = rg_f16_to_f32((uint16_t)h), want = compiler_f32((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            cr_assert(isnan(got) && signbit(got) == signbit(want), "nan %04x -> %g", h, got);
            continue;
        }
        cr_assert_eq(bits_of_f32(got), bits_of_f32(want), "%04x -> %.9g (%08x), want %.9g", h, got,
                     bits_of_f32(got), want);
    }
}

Test(tensor_kernels, f16_round_trips_through_f32_for_all_65536_halves) {
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = rg_f32_to_f16(rg_f16_to_f32((uint16_t)h));
        if (f16_is_nan((uint16_t)h))
            cr_assert(f16_is_nan(back) && (back & 0x8000u) == (h & 0x8000u), "nan %04x -> %04x", h,
                      back);
        else
            cr_assert_eq(back, h, "%04x -> %04x", h, back);
    }
}

Test(tensor_kernels, f32_to_f16_rounds_ties_to_even_like_the_compiler) {
    /* Every midpoint between neighbouring halves (exact in float32), and the floats one ulp either
     * side of it: ties go to the even half, everything else to the nearer one. */
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        for (int sign = 0; sign < 2; sign++) {
            uint16_t a = (uint16_t)(h | (sign ? 0x8000u : 0));
            double lo = rg_f16_to_f32(a);
            double hi = h + 1 == 0x7C00u ? (sign ? -65536.0 : 65536.0) /* next step: inf */
                                         : rg_f16_to_f32((uint16_t)(a + 1));
            float mid = (float)((lo + hi) / 2);
            cr_assert_eq((double)mid, (lo + hi) / 2, "midpoint of %04x is exact", a);
            check_f32_to_f16(mid);
            check_f32_to_f16(nextafterf(mid, 0.0f));
            check_f32_to_f16(nextafterf(mid, sign ? -INFINITY : INFINITY));
        }
    }
}

Test(tensor_kernels, f32_to_f16_matches_the_compiler_on_edge_values) {
    /* smallest normal half 6.1035156e-05 and just below it; smallest subnormal half
     * 5.9604645e-08, half of it 2.9802322e-08 (a tie to 0) and just above; 1.5 subnormal ulps
     * 8.9406967e-08 (a tie to 2); float32 subnormals 1e-45 and -1e-40 */
    const float edges[] = {
        0.0f,           -0.0f,          INFINITY,       -INFINITY,      NAN,
        -NAN,           1.0f,           -1.0f,          65504.0f,       65519.996f,
        65520.0f,       65536.0f,       1e10f,          FLT_MAX,        -FLT_MAX,
        6.1035156e-05f, 6.0975552e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
        8.9406967e-08f, FLT_MIN,        1e-45f,         -1e-40f,        3.0e-5f,
        -3.0e-5f,       0.1f,           0.2f,           0.3f,           3.14159265f,
        2049.0f,        2051.0f,        -4097.0f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) check_f32_to_f16(edges[i]);
    cr_assert_eq(rg_f32_to_f16(65520.0f), 0x7C00u, "65520 overflows to inf");
    cr_assert_eq(rg_f32_to_f16(-0.0f), 0x8000u, "-0 keeps its sign");
    cr_assert_eq(rg_f32_to_f16(1e-45f), 0x0000u, "float32 subnormals flush to +0");
    /* signalling and payload-carrying NaNs */
    const uint32_t nans[] = {0x7F800001u, 0x7FC00000u, 0xFFC00000u,
                             0x7FBFFFFFu, 0xFF800001u, 0x7F802000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        check_f32_to_f16(f32_of_bits(nans[i]));
}

Test(tensor_kernels, f32_to_f16_matches_the_compiler_on_random_floats) {
    /* 2^22 random bit patterns, and 2^22 more in the exponent range where halves live */
    for (uint64_t i = 0; i < (1u << 22); i++) {
        rg_philox4 r = rg_philox(77, i);
        check_f32_to_f16(f32_of_bits(r.v[0]));
        uint32_t e = 100 + r.v[1] % 45; /* 2^-27 .. 2^17 */
        check_f32_to_f16(f32_of_bits((r.v[2] & 0x807FFFFFu) | (e << 23)));
    }
}

Test(tensor_kernels, backend_f16_packing_is_the_kernel) {
    float x[37];
    uint16_t h[37], want[37];
    for (int i = 0; i < 37; i++) x[i] = 1000 * (rg_philox_uniform(5, (uint64_t)i) - 0.5f);
    rg_cpu_backend.f32_to_f16(37, x, h);
    for (int i = 0; i < 37; i++) want[i] = rg_f32_to_f16(x[i]);
    cr_assert(memcmp(h, want, sizeof h) == 0);
    float y[37];
    rg_cpu_backend.f16_to_f32(37, h, y);
    for (int i = 0; i < 37; i++) cr_assert_eq(y[i], rg_f16_to_f32(h[i]));
}

/* ---- optimizer updates, one step worked out by hand ------------------------------------------ */

Test(tensor_kernels, sgd_plain_step) {
    rg_sgd_hparams h = {.lr = 0.1f};
    float p = 1.0f;
    rg_sgd_update(&h, &p, 0.5f, NULL); /* no momentum: the buffer is never touched */
    cr_assert_float_eq(p, 0.95f, 1e-7, "1 - 0.1*0.5 = %g", p);
}

Test(tensor_kernels, sgd_momentum_weight_decay_two_steps) {
    rg_sgd_hparams h = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .first_step = true};
    float p = 1.0f, buf = 123.0f; /* garbage: the first step sets buf = d */
    rg_sgd_update(&h, &p, 0.5f, &buf);
    /* d = 0.5 + 0.01*1 = 0.51; buf = 0.51; p = 1 - 0.1*0.51 = 0.949 */
    cr_assert_float_eq(buf, 0.51f, 1e-7, "buf %g", buf);
    cr_assert_float_eq(p, 0.949f, 1e-7, "p %g", p);
    h.first_step = false;
    rg_sgd_update(&h, &p, 0.5f, &buf);
    /* d = 0.5 + 0.01*0.949 = 0.50949; buf = 0.9*0.51 + 0.50949 = 0.96849; p = 0.949 - 0.096849 */
    cr_assert_float_eq(buf, 0.96849f, 1e-6, "buf %g", buf);
    cr_assert_float_eq(p, 0.852151f, 1e-6, "p %g", p);
}

Test(tensor_kernels, sgd_nesterov_and_dampening) {
    rg_sgd_hparams h = {.lr = 0.1f, .momentum = 0.9f, .nesterov = true, .first_step = true};
    float p = 1.0f, buf = 0;
    rg_sgd_update(&h, &p, 0.5f, &buf);
    /* buf = 0.5; d = 0.5 + 0.9*0.5 = 0.95; p = 1 - 0.095 */
    cr_assert_float_eq(p, 0.905f, 1e-7, "p %g", p);
    rg_sgd_hparams hd = {.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f};
    p = 1.0f, buf = 0.2f;
    rg_sgd_update(&hd, &p, 0.4f, &buf);
    /* buf = 0.9*0.2 + (1-0.5)*0.4 = 0.38; p = 1 - 0.038 */
    cr_assert_float_eq(buf, 0.38f, 1e-7, "buf %g", buf);
    cr_assert_float_eq(p, 0.962f, 1e-7, "p %g", p);
}

/* Betas whose complements are exact in binary (1/8, 1/1024), so m and v can be checked exactly;
 * with 0.9 and 0.999, 1.0f - 0.999f is 0.000999987 (see adam_first_step_moves_by_lr). */
#define B1 0.875f
#define B2 0.9990234375f

Test(tensor_kernels, adam_first_step_moves_by_lr) {
    rg_adam_hparams h = {.lr = 0.001f,
                         .beta1 = B1,
                         .beta2 = B2,
                         .eps = 1e-8f,
                         .bias_correction1 = 1 - B1,
                         .bias_correction2 = 1 - B2};
    float p = 1.0f, m = 0, v = 0;
    rg_adam_update(&h, &p, 0.5f, &m, &v);
    /* m = 0.125*0.5 = 0.0625; v = 0.25/1024; m^ = 0.5, v^ = 0.25; p = 1 - 0.001*0.5/(0.5 + 1e-8) */
    cr_assert_eq(m, 0.0625f, "m %.9g", m);
    cr_assert_eq(v, 0.25f / 1024, "v %.9g", v);
    cr_assert_float_eq(p, 0.999f, 1e-7, "p %.9g", p);
    /* the usual betas: the first step is still lr times the gradient's sign */
    rg_adam_hparams u = {.lr = 0.001f,
                         .beta1 = 0.9f,
                         .beta2 = 0.999f,
                         .eps = 1e-8f,
                         .bias_correction1 = 1 - 0.9f,
                         .bias_correction2 = 1 - 0.999f};
    p = 1.0f, m = 0, v = 0;
    rg_adam_update(&u, &p, -3.0f, &m, &v);
    cr_assert_float_eq(p, 1.001f, 1e-6, "p %.9g", p);
}

Test(tensor_kernels, adam_second_step_with_l2_weight_decay) {
    /* step 2 from m = 0.05, v = 0.00025, with g = 0.2 and weight decay 0.5 on p = 2:
     *   g = 0.2 + 0.5*2 = 1.2;  m = 0.875*0.05 + 0.125*1.2 = 0.19375;
     *   v = B2*0.00025 + 1.44/1024;  bc1 = 1 - B1^2;  bc2 = 1 - B2^2
     *   p = 2 - (0.01/bc1) * m / (sqrt(v)/sqrt(bc2) + 1e-8) */
    double b2 = 1 - 1.0 / 1024, bc1 = 1 - 0.875 * 0.875, bc2 = 1 - b2 * b2;
    rg_adam_hparams h = {.lr = 0.01f,
                         .beta1 = B1,
                         .beta2 = B2,
                         .eps = 1e-8f,
                         .weight_decay = 0.5f,
                         .bias_correction1 = (float)bc1,
                         .bias_correction2 = (float)bc2};
    float p = 2.0f, m = 0.05f, v = 0.00025f;
    rg_adam_update(&h, &p, 0.2f, &m, &v);
    double wm = 0.875 * 0.05 + 0.125 * 1.2, wv = b2 * 0.00025 + 1.44 / 1024;
    double want = 2.0 - (0.01 / bc1) * wm / (sqrt(wv) / sqrt(bc2) + 1e-8);
    cr_assert_float_eq(m, wm, 1e-7, "m %.9g, want %.9g", m, wm);
    cr_assert_float_eq(v, wv, 1e-9, "v %.9g, want %.9g", v, wv);
    cr_assert_float_eq(p, want, 1e-6, "p %.9g, want %.9g", p, want);
}

Test(tensor_kernels, adamw_decays_the_weight_before_the_step) {
    rg_adam_hparams h = {.lr = 0.01f,
                         .beta1 = B1,
                         .beta2 = B2,
                         .eps = 1e-8f,
                         .weight_decay = 0.5f,
                         .decoupled = true,
                         .bias_correction1 = 1 - B1,
                         .bias_correction2 = 1 - B2};
    float p = 2.0f, m = 0, v = 0;
    rg_adam_update(&h, &p, -0.25f, &m, &v);
    /* p = 2 * (1 - 0.01*0.5) = 1.99; the gradient is not decayed: m = -0.25/8, v = 0.0625/1024;
     * the first step moves by lr against the gradient's sign: p = 1.99 + 0.01 */
    cr_assert_eq(m, -0.25f / 8, "m %.9g", m);
    cr_assert_eq(v, 0.0625f / 1024, "v %.9g", v);
    cr_assert_float_eq(p, 2.0f, 1e-6, "p %.9g", p);
}

Test(tensor_kernels, backend_optimizer_steps_apply_the_update_to_every_element) {
    enum { N = 1003 };
    float p[N], g[N], b[N], p2[N], b2[N], m[N], v[N], m2[N], v2[N];
    for (int i = 0; i < N; i++) {
        p[i] = p2[i] = rg_philox_uniform(1, (uint64_t)i) - 0.5f;
        g[i] = rg_philox_uniform(2, (uint64_t)i) - 0.5f;
        b[i] = b2[i] = m[i] = m2[i] = 0.1f;
        v[i] = v2[i] = 0.2f;
    }
    rg_sgd_hparams hs = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
    rg_cpu_backend.sgd_step_many(
        1, &(rg_sgd_tensor){.n = N, .param = p, .grad = g, .momentum_buf = b, .h = hs});
    for (int i = 0; i < N; i++) {
        rg_sgd_update(&hs, &p2[i], g[i], &b2[i]);
        cr_assert_eq(p[i], p2[i], "sgd element %d", i);
        cr_assert_eq(b[i], b2[i], "sgd buffer %d", i);
    }
    rg_sgd_hparams plain = {.lr = 0.1f};
    /* no momentum: no buffer needed */
    rg_cpu_backend.sgd_step_many(1, &(rg_sgd_tensor){.n = N, .param = p, .grad = g, .h = plain});
    rg_adam_hparams ha = {.lr = 0.01f,
                          .beta1 = 0.9f,
                          .beta2 = 0.99f,
                          .eps = 1e-8f,
                          .bias_correction1 = 0.19f,
                          .bias_correction2 = 0.0199f};
    for (int i = 0; i < N; i++) p2[i] = p[i];
    rg_cpu_backend.adam_step(N, &ha, p, g, m, v);
    for (int i = 0; i < N; i++) {
        rg_adam_update(&ha, &p2[i], g[i], &m2[i], &v2[i]);
        cr_assert_eq(p[i], p2[i], "adam element %d", i);
        cr_assert_eq(m[i], m2[i]);
        cr_assert_eq(v[i], v2[i]);
    }
}

Test(tensor_kernels, zeroing_many_tensors_zeroes_exactly_them) {
    float buf[40];
    for (int i = 0; i < 40; i++) buf[i] = (float)i + 1;
    float *p[3] = {buf + 2, buf + 10, buf + 20};
    int64_t n[3] = {5, 0, 13};
    rg_cpu_backend.zero_f32_many(3, p, n);
    for (int i = 0; i < 40; i++) {
        bool zero = (i >= 2 && i < 7) || (i >= 20 && i < 33);
        cr_assert_eq(buf[i], zero ? 0.0f : (float)i + 1, "element %d", i);
    }
}

/* The multi-tensor step is the single-tensor one, tensor by tensor, bit for bit: tensors of
 * several sizes (one empty), each with its own hyper-parameters, some without a momentum buffer. */
Test(tensor_kernels, multi_tensor_sgd_step_matches_one_step_per_tensor) {
    enum { T = 5, N = 3000 };
    static const int64_t sizes[T] = {1003, 0, 1, 17, 1979};
    static float p[N], g[N], b[N], p2[N], b2[N];
    for (int i = 0; i < N; i++) {
        p[i] = p2[i] = rg_philox_uniform(3, (uint64_t)i) - 0.5f;
        g[i] = rg_philox_uniform(4, (uint64_t)i) - 0.5f;
        b[i] = b2[i] = rg_philox_uniform(5, (uint64_t)i);
    }
    rg_sgd_tensor list[T];
    int64_t off = 0;
    for (int t = 0; t < T; t++) {
        bool momentum = t != 2;
        list[t] = (rg_sgd_tensor){
            .n = sizes[t],
            .param = p + off,
            .grad = g + off,
            .momentum_buf = momentum ? b + off : NULL,
            .h = {.lr = 0.1f + 0.01f * (float)t,
                  .momentum = momentum ? 0.9f : 0.0f,
                  .weight_decay = t == 3 ? 0.0f : 1e-2f,
                  .nesterov = t == 4,
                  .first_step = t == 0,
                  .grad_scale = t == 1 ? 0.5f : 0.0f},
        };
        off += sizes[t];
    }
    cr_assert(off <= N);
    rg_cpu_backend.sgd_step_many(T, list);
    off = 0;
    for (int t = 0; t < T; t++) {
        rg_sgd_tensor one = list[t]; /* the same tensor alone, on the copies */
        one.param = p2 + off, one.momentum_buf = one.momentum_buf ? b2 + off : NULL;
        rg_cpu_backend.sgd_step_many(1, &one);
        off += sizes[t];
    }
    for (int i = 0; i < off; i++) {
        cr_assert_eq(p[i], p2[i], "parameter element %d", i);
        cr_assert_eq(b[i], b2[i], "buffer element %d", i);
    }
    cr_assert_neq(p[0], rg_philox_uniform(3, 0) - 0.5f, "the step moved nothing");
}

Test(tensor_kernels, random_fills_are_the_streams_at_every_alignment_and_length) {
    /* The CPU fills draw one Philox counter per four uniforms or two normals, with ragged ends
     * element by element, in blocks of 4096 over the threads: every element must still be the
     * stream's, bit for bit, wherever the fill starts and ends. lo 0, hi 1, mean 0 and std 1 keep
     * the affine step exact under fused multiply-adds. */
    const int64_t lens[] = {1, 2, 3, 5, 8, 13, 4095, 4096, 4097, 8195};
    float *x = malloc(8195 * sizeof *x);
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
        for (uint64_t start = 0; start < 8; start++) {
            rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(lens[l]), RG_CPU);
            uint64_t off = start;
            rg_tensor_uniform_(t, 0, 1, 21, &off);
            memcpy(x, rg_tensor_f32(t), (size_t)lens[l] * sizeof *x);
            for (int64_t i = 0; i < lens[l]; i++)
                cr_assert_eq(x[i], rg_philox_uniform(21, start + (uint64_t)i),
                             "uniform: %lld values from %llu, element %lld", (long long)lens[l],
                             (unsigned long long)start, (long long)i);
            off = start;
            rg_tensor_normal_(t, 0, 1, 22, &off);
            uint64_t base = (start + 1) / 2; /* the fill starts on an even uniform */
            for (int64_t i = 0; i < lens[l]; i++)
                cr_assert_eq(rg_tensor_f32(t)[i], rg_philox_normal(22, base + (uint64_t)i),
                             "normal: %lld values from %llu, element %lld", (long long)lens[l],
                             (unsigned long long)start, (long long)i);
            rg_tensor_free(t);
        }
    free(x);
}

Test(tensor_kernels, normal_fill_at_an_odd_offset_reuses_no_uniform) {
    /* uniforms 0..4 were drawn (offset 5); the next normal must start at uniforms 6 and 7 */
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(3), RG_CPU);
    uint64_t off = 5;
    rg_tensor_normal_(t, 0, 1, 12, &off);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rg_tensor_f32(t)[i], rg_philox_normal(12, 3 + (uint64_t)i), "element %d", i);
    cr_assert_eq(off, 6 + 8, "offset %llu", (unsigned long long)off);
    rg_tensor_free(t);
}

/* The CPU backend's packed conversions (8 at a time with F16C where the build targets it) agree
 * with the scalar formulas, which the tests above hold to the compiler: every half, the edge
 * values and 2^20 random bit patterns, at lengths that leave a scalar tail. */
Test(tensor_kernels, packed_f16_conversions_match_the_scalar_formulas) {
    enum { N = 65536 + 5 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
    float *f = malloc(N * sizeof *f);
    cr_assert(h && h2 && f);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)(i * 40503u); /* all 65536 halves, then 5 more */
    rg_cpu_backend.f16_to_f32(N, h, f);
    for (int i = 0; i < N; i++)
        if (f16_is_nan(h[i]))
            cr_assert(isnan(f[i]) && !signbit(f[i]) == !(h[i] & 0x8000u), "nan %04x", h[i]);
        else
            cr_assert_eq(bits_of_f32(f[i]), bits_of_f32(rg_f16_to_f32(h[i])), "%04x", h[i]);
    for (int i = 0; i < N; i++) {
        rg_philox4 r = rg_philox(91, (uint64_t)i);
        uint32_t b = i % 2 ? r.v[0] : (r.v[0] & 0x80FFFFFFu) | ((0x66u + r.v[1] % 0x14u) << 23);
        f[i] = f32_of_bits(b); /* odd i: any pattern; even i: exponents where halves live */
    }
    f[0] = 65520.0f, f[1] = -0.0f, f[2] = 2.9802322e-08f, f[3] = 8.9406967e-08f, f[4] = NAN;
    f[5] = -INFINITY, f[6] = 1e-45f, f[7] = 65519.996f, f[8] = 6.0975552e-05f;
    rg_cpu_backend.f32_to_f16(N, f, h2);
    for (int i = 0; i < N; i++) {
        uint16_t want = rg_f32_to_f16(f[i]);
        if (isnan(f[i]))
            cr_assert(f16_is_nan(h2[i]) && (h2[i] & 0x8000u) == (want & 0x8000u), "nan %08x",
                      bits_of_f32(f[i]));
        else
            cr_assert_eq(h2[i], want, "%.9g (%08x) -> %04x, want %04x", f[i], bits_of_f32(f[i]),
                         h2[i], want);
    }
    free(h), free(h2), free(f);
}
