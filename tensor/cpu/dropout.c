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

#if defined(__AVX2__)
/* The AVX2 and AVX-512 copies: Philox on 8 or 16 counters per vector, by hand. GCC vectorises
 * the scalar loop below with an emulated 64-bit multiply and gains little over scalar code; the
 * 32x32->64 products are exactly what vpmuludq does, on the even lanes and then the odd. */
#include <immintrin.h>

#if defined(__AVX512F__)
#define PV 16
typedef __m512i pvec;
#define P_SET1(x) _mm512_set1_epi32((int)(x))
#define P_MUL_EVEN _mm512_mul_epu32
#define P_SRL64 _mm512_srli_epi64
#define P_SLL64 _mm512_slli_epi64
#define P_ODD(a, b) _mm512_mask_blend_epi32(0xAAAA, a, b) /* odd 32-bit lanes from b */
#define P_XOR _mm512_xor_si512
#define P_LOAD(p) _mm512_loadu_si512(p)
#define P_STORE(p, v) _mm512_storeu_si512(p, v)
#define P_ZERO _mm512_setzero_si512()
#else
#define PV 8
typedef __m256i pvec;
#define P_SET1(x) _mm256_set1_epi32((int)(x))
#define P_MUL_EVEN _mm256_mul_epu32
#define P_SRL64 _mm256_srli_epi64
#define P_SLL64 _mm256_slli_epi64
#define P_ODD(a, b) _mm256_blend_epi32(a, b, 0xAA)
#define P_XOR _mm256_xor_si256
#define P_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define P_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define P_ZERO _mm256_setzero_si256()
#endif

/* hi and lo halves of m * c for each 32-bit lane of c. */
static inline pvec mulhilo(pvec c, pvec m, pvec *lo) {
    pvec even = P_MUL_EVEN(c, m), odd = P_MUL_EVEN(P_SRL64(c, 32), m);
    *lo = P_ODD(even, P_SLL64(odd, 32));
    return P_ODD(P_SRL64(even, 32), odd);
}

/* u[4j + w] = word w of Philox(seed, ctr0 + j): stream elements 4*ctr0 ... 4*ctr0 + 4*COUNTERS-1;
 * the same words as rg_philox (core/kernels.h), PV counters at a time. */
static void draw_words(uint64_t seed, uint64_t ctr0, uint32_t *restrict u) {
    const pvec m0 = P_SET1(0xD2511F53u), m1 = P_SET1(0xCD9E8D57u);
    for (int j = 0; j < COUNTERS; j += PV) {
        uint32_t lo32[PV], hi32[PV], out[4][PV];
        for (int l = 0; l < PV; l++) {
            uint64_t c = ctr0 + (uint64_t)(j + l);
            lo32[l] = (uint32_t)c, hi32[l] = (uint32_t)(c >> 32);
        }
        pvec c0 = P_LOAD(lo32), c1 = P_LOAD(hi32), c2 = P_ZERO, c3 = P_ZERO;
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int r = 0; r < 10; r++) {
            pvec lo0, lo1, hi0 = mulhilo(c0, m0, &lo0), hi1 = mulhilo(c2, m1, &lo1);
            c0 = P_XOR(P_XOR(hi1, c1), P_SET1(k0));
            c2 = P_XOR(P_XOR(hi0, c3), P_SET1(k1));
            c1 = lo1, c3 = lo0;
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
        P_STORE(out[0], c0), P_STORE(out[1], c1), P_STORE(out[2], c2), P_STORE(out[3], c3);
        for (int l = 0; l < PV; l++)
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
            for (int64_t k = lo; k < hi; k++)
                dx[e0 + k] = keep_or_zero(dy[e0 + k] * scale, u[k], t);
        } else {
            for (int64_t k = lo; k < hi; k++)
                dx[e0 + k] = keep_or_zero(dy[e0 + k] * scale, u[k], t) + beta * dx[e0 + k];
        }
    }
}
