/* dropout.c — inverted dropout on the CPU; the mask comes from rg_dropout_keep (kernels.h).
 *
 * One Philox call yields four 32-bit words, the uniforms of four consecutive stream elements, so
 * the kernels draw a block of counters at a time into a small buffer (a loop the compiler
 * vectorises) and then apply the mask element by element. Element i keeps exactly
 * rg_dropout_keep(p, seed, offset + i): the same mask as the per-element formula and as CUDA. */
#include <math.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

#define COUNTERS 64 /* Philox counters per block: 4 * COUNTERS stream elements */

static float keep_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* The AVX2 copy: Philox on 8 counters per vector, by hand. GCC vectorises the scalar loop below
 * with an emulated 64-bit multiply and gains nothing over scalar code (6% of a copy's speed);
 * the 32x32->64 products are exactly what vpmuludq does, on the even lanes and then the odd. */
#include <immintrin.h>

/* hi and lo halves of m * c for each 32-bit lane of c. */
static inline __m256i mulhilo(__m256i c, __m256i m, __m256i *lo) {
    __m256i even = _mm256_mul_epu32(c, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* u[4j + w] = word w of Philox(seed, ctr0 + j): stream elements 4*ctr0 ... 4*ctr0 + 4*COUNTERS-1;
 * the same words as rg_philox (core/kernels.h), 8 counters at a time. */
static void draw_words(uint64_t seed, uint64_t ctr0, uint32_t *restrict u) {
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    for (int j = 0; j < COUNTERS; j += 8) {
        uint32_t lo32[8], hi32[8], out[4][8];
        for (int l = 0; l < 8; l++) {
            uint64_t c = ctr0 + (uint64_t)(j + l);
            lo32[l] = (uint32_t)c, hi32[l] = (uint32_t)(c >> 32);
        }
        __m256i c0 = _mm256_loadu_si256((const __m256i *)lo32);
        __m256i c1 = _mm256_loadu_si256((const __m256i *)hi32);
        __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int r = 0; r < 10; r++) {
            __m256i lo0, lo1, hi0 = mulhilo(c0, m0, &lo0), hi1 = mulhilo(c2, m1, &lo1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1, c3 = lo0;
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
        _mm256_storeu_si256((__m256i *)out[0], c0);
        _mm256_storeu_si256((__m256i *)out[1], c1);
        _mm256_storeu_si256((__m256i *)out[2], c2);
        _mm256_storeu_si256((__m256i *)out[3], c3);
        for (int l = 0; l < 8; l++)
            for (int w = 0; w < 4; w++) u[4 * (j + l) + w] = out[w][l];
    }
}
#else
/* u[4j + w] = word w of Philox(seed, ctr0 + j): stream elements 4*ctr0 ... 4*ctr0 + 4*COUNTERS-1 */
static void draw_words(uint64_t seed, uint64_t ctr0, uint32_t *restrict u) {
    for (int j = 0; j < COUNTERS; j++) {
        rg_philox4 r = rg_philox(seed, ctr0 + (uint64_t)j);
        for (int w = 0; w < 4; w++) u[4 * j + w] = r.v[w];
    }
}
#endif

/* rg_dropout_keep as an integer test on an already drawn word: the uniform (w >> 8) * 2^-24 is
 * exact, so "uniform >= p" is "(w >> 8) >= keep_threshold(p)". */
/* v where the word keeps its element, else +0.0f: as bits, so that the masking loops below
 * vectorise in every copy (GCC sank the multiply into a branch on the compare, which only the
 * AVX-512 copy's masked moves could vectorise: 6% of a copy's speed in the others). */
static inline float keep_or_zero(float v, uint32_t w, uint32_t threshold) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= 0u - (uint32_t)((w >> 8) >= threshold);
    memcpy(&v, &bits, sizeof v);
    return v;
}

static uint32_t keep_threshold(float p) {
    if (!(p <= 1.0f)) return 1u << 25; /* p > 1 or NaN: the float test keeps nothing */
    if (!(p > 0.0f)) return 0;         /* p <= 0: keeps everything */
    return (uint32_t)ceil((double)p * 16777216.0); /* exact: p has 24 significant bits */
}

/* The stream elements of block b cover tensor elements [e0, e0 + 4*COUNTERS) (clipped to [0, n)).
 */
#define FOR_BLOCKS(n, offset)                                                                      \
    uint64_t c_first = (offset) >> 2, c_end = ((offset) + (uint64_t)(n) + 3) >> 2;                 \
    int64_t nblocks = (int64_t)((c_end - c_first + COUNTERS - 1) / COUNTERS);                      \
    _Pragma("omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)") for (int64_t b = 0;   \
                                                                                  b < nblocks;     \
                                                                                  b++)

void rg_cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                            float *y) {
    float scale = keep_scale(p);
    uint32_t t = keep_threshold(p);
    FOR_BLOCKS(n, offset) {
        uint32_t u[4 * COUNTERS];
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        draw_words(seed, ctr0, u);
        int64_t e0 = (int64_t)(4 * ctr0 - offset); /* tensor element of u[0]; may be negative */
        int64_t lo = e0 < 0 ? -e0 : 0, hi = n - e0 < 4 * COUNTERS ? n - e0 : 4 * COUNTERS;
        for (int64_t k = lo; k < hi; k++) y[e0 + k] = keep_or_zero(x[e0 + k] * scale, u[k], t);
    }
}

void rg_cpu_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                             float beta, float *dx) {
    float scale = keep_scale(p);
    uint32_t t = keep_threshold(p);
    FOR_BLOCKS(n, offset) {
        uint32_t u[4 * COUNTERS];
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        draw_words(seed, ctr0, u);
        int64_t e0 = (int64_t)(4 * ctr0 - offset);
        int64_t lo = e0 < 0 ? -e0 : 0, hi = n - e0 < 4 * COUNTERS ? n - e0 : 4 * COUNTERS;
        if (beta == 0.0f) {
            for (int64_t k = lo; k < hi; k++) dx[e0 + k] = keep_or_zero(dy[e0 + k] * scale, u[k], t);
        } else {
            for (int64_t k = lo; k < hi; k++)
                dx[e0 + k] = keep_or_zero(dy[e0 + k] * scale, u[k], t) + beta * dx[e0 + k];
        }
    }
}
