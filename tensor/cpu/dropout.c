/* dropout.c — inverted dropout on the CPU; the mask comes from rg_dropout_keep (kernels.h).
 *
 * One Philox call yields four 32-bit words, and each word two 16-bit uniforms: the decisions of
 * eight consecutive stream elements (core/kernels.h). The kernels draw a block of counters at a
 * time into a small buffer (a loop the compiler vectorises) and then apply the mask element by
 * element. The AVX2 and AVX-512 copies take the blocks that lie inside the tensor on a fused path
 * instead: Philox in registers, the words transposed into stream order, their 16-bit halves
 * compared, and the scaled input masked, a vector at a time (draw_groups). Element i keeps exactly
 * rg_dropout_keep(p, seed, offset + i): the same mask as the per-element formula and as CUDA.
 *
 * Forward also writes the keeps as bits (a block of 8 * COUNTERS positions is 16 whole words of
 * the mask, core/kernels.h), and backward given that mask reads it instead of drawing again: it
 * then moves dy, dx and 1/32 of their bytes in bits, a copy's work, where drawing made it nearly as
 * slow as forward. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

#define COUNTERS 64                /* Philox counters per block */
#define PER RG_DROPOUT_PER_COUNTER /* stream elements per counter: 8 */
#define BLOCK (PER * COUNTERS)     /* stream elements per block */
#define BLOCK_WORDS (BLOCK / 32)   /* mask words per block: 16 */

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
#define P_ADD64 _mm512_add_epi64
#define P_SET1_64(x) _mm512_set1_epi64((long long)(x))
#define P_UNPACKLO32 _mm512_unpacklo_epi32
#define P_UNPACKHI32 _mm512_unpackhi_epi32
#define P_UNPACKLO64 _mm512_unpacklo_epi64
#define P_UNPACKHI64 _mm512_unpackhi_epi64
typedef __m512 pfvec;
#define PF_LOAD _mm512_loadu_ps
#define PF_STORE _mm512_storeu_ps
#define PF_SET1 _mm512_set1_ps
#define PF_MUL _mm512_mul_ps
#define PF_ADD _mm512_add_ps
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
#define P_ADD64 _mm256_add_epi64
#define P_SET1_64(x) _mm256_set1_epi64x((long long)(x))
#define P_UNPACKLO32 _mm256_unpacklo_epi32
#define P_UNPACKHI32 _mm256_unpackhi_epi32
#define P_UNPACKLO64 _mm256_unpacklo_epi64
#define P_UNPACKHI64 _mm256_unpackhi_epi64
typedef __m256 pfvec;
#define PF_LOAD _mm256_loadu_ps
#define PF_STORE _mm256_storeu_ps
#define PF_SET1 _mm256_set1_ps
#define PF_MUL _mm256_mul_ps
#define PF_ADD _mm256_add_ps
#endif

/* hi and lo halves of m * c for each 32-bit lane of c. */
static inline pvec mulhilo(pvec c, pvec m, pvec *lo) {
    pvec even = P_MUL_EVEN(c, m), odd = P_MUL_EVEN(P_SRL64(c, 32), m);
    *lo = P_ODD(even, P_SLL64(odd, 32));
    return P_ODD(P_SRL64(even, 32), odd);
}

/* u[4j + w] = word w of Philox(seed, ctr0 + j), the decisions of stream elements 8*ctr0 + 8j + 2w
 * and + 1; the same words as rg_philox (core/kernels.h), PV counters at a time. */
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

/* The fused path: the words of PV counters straight into registers in stream order, no buffer.
 * Packed lane 4q + r (q: the 128-bit lane, r: the 32-bit word within it) draws counter
 * ctr0 + (PV/4)*r + q, so that the in-lane 4x4 transposes (two rounds of unpacks) leave the four
 * words of counters ctr0 + (PV/4)*k ... ctr0 + (PV/4)*k + PV/4 - 1, in order, in vector k: the
 * PV words of stream elements 8*ctr0 + 2*PV*k ... 8*ctr0 + 2*PV*k + 2*PV - 1, whose 16-bit lanes
 * are those elements' uniforms in stream order.
 * The rounds run on the even and the odd packed lanes as two separate vectors of 64-bit lanes, each
 * word in the low half of its lane: vpmuludq reads only the low halves and leaves lo in the low,
 * hi in the high half of its product, so a round is 2 multiplies, 1 shift (hi down) and 2 xors
 * per vector, with no blends, and the high halves carry garbage nobody reads; the two vectors are
 * two independent dependency chains. The keys of the ten rounds are drawn once per call. */
typedef struct {
    pvec k0[10], k1[10], even, odd; /* even, odd: the counter offsets of each half's lanes */
#if defined(__AVX512F__)
    pvec pair, quad[2]; /* vpermt2d indices of the transpose (draw_groups) */
#endif
} philox_keys;

static void philox_keys_init(uint64_t seed, philox_keys *ks) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        ks->k0[r] = P_SET1(k0), ks->k1[r] = P_SET1(k1);
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    uint64_t lane[2][PV / 2];
#if defined(__AVX512F__)
    /* consecutive counters in each half: 0 ... 7 in even, 8 ... 15 in odd */
    for (int l = 0; l < PV; l++) lane[l >> 3][l & 7] = (uint64_t)l;
    /* pair: counter c's words (w, w + 1) side by side, from the low halves of two vectors;
     * quad[q]: counters 4q ... 4q + 3's four words in stream order, from two pairs */
    int32_t pair[PV], quad[2][PV];
    for (int i = 0; i < PV; i++) {
        pair[i] = (i & 1) ? PV + i - 1 : i;
        for (int q = 0; q < 2; q++) quad[q][i] = (i & 2 ? PV : 0) + 8 * q + 2 * (i >> 2) + (i & 1);
    }
    ks->pair = P_LOAD(pair), ks->quad[0] = P_LOAD(quad[0]), ks->quad[1] = P_LOAD(quad[1]);
#else
    for (int l = 0; l < PV; l++) lane[l & 1][l >> 1] = (uint64_t)((PV / 4) * (l & 3) + (l >> 2));
#endif
    ks->even = P_LOAD(lane[0]), ks->odd = P_LOAD(lane[1]);
}

/* G groups of PV counters at once, ctr0 + PV*g for group g, their rounds interleaved (more
 * independent chains to hide the multiplies' latency): w[4*g + k] as described above. Counters
 * ctr0 ... ctr0 + G*PV - 1 must share their upper 32 bits (the caller checks). On Zen 3 (AVX2,
 * 16384 floats in L2, one thread, one decision a word) G = 2 drew and masked in 0.67 ns per
 * element, G = 1 in 0.84 and G = 4 in 0.76 (it spills); on Zen 5 with two decisions a word,
 * AVX-512 G = 2 0.115-0.123 ns, G = 1 0.142-0.157, G = 4 0.118-0.120. The rounds must be unrolled
 * for the halves to stay in registers. (Peeling rounds 0 and 1, whose upper counter words are
 * constant, saves 2 of 20 products a half and measured no faster.)
 * AVX-512 transposes with vpermt2d (any 16 of two vectors' 32 lanes, one instruction): per half,
 * words 0/1 and 2/3 paired per counter, then counters 0-3 and 4-7 in stream order, 4 permutes per
 * 32 words where AVX2 needs 8 shifts, blends and unpacks; its halves hold consecutive
 * counters, so half h yields w[2h] and w[2h + 1].
 */
#define G 2
_Static_assert(COUNTERS % (G * PV) == 0, "a block is a whole number of draw_groups calls");
static inline __attribute__((always_inline)) void draw_groups(const philox_keys *ks, uint64_t ctr0,
                                                              pvec w[4 * G]) {
    const pvec m0 = P_SET1(0xD2511F53u), m1 = P_SET1(0xCD9E8D57u);
    pvec a0[2 * G], a1[2 * G], a2[2 * G], a3[2 * G]; /* [2g]: group g's even lanes, [2g+1] odd */
    for (int h = 0; h < 2 * G; h++) {
        pvec base = P_SET1_64(ctr0 + (uint64_t)(PV * (h >> 1)));
        a0[h] = P_ADD64(base, (h & 1) ? ks->odd : ks->even); /* low halves: word 0 */
        a1[h] = P_SRL64(base, 32), a2[h] = P_ZERO, a3[h] = P_ZERO;
    }
    _Pragma("GCC unroll 10") for (int r = 0; r < 10; r++) {
        _Pragma("GCC unroll 8") for (int h = 0; h < 2 * G; h++) {
            pvec p0 = P_MUL_EVEN(a0[h], m0), p2 = P_MUL_EVEN(a2[h], m1);
            a0[h] = P_XOR(P_SRL64(p2, 32), P_XOR(a1[h], ks->k0[r]));
            a2[h] = P_XOR(P_SRL64(p0, 32), P_XOR(a3[h], ks->k1[r]));
            a1[h] = p2, a3[h] = p0;
        }
    }
#if defined(__AVX512F__)
    for (int h = 0; h < 2 * G; h++) {
        pvec x01 = _mm512_permutex2var_epi32(a0[h], ks->pair, a1[h]);
        pvec x23 = _mm512_permutex2var_epi32(a2[h], ks->pair, a3[h]);
        w[2 * h] = _mm512_permutex2var_epi32(x01, ks->quad[0], x23);
        w[2 * h + 1] = _mm512_permutex2var_epi32(x01, ks->quad[1], x23);
    }
#else
    for (int g = 0; g < G; g++) {
        int e = 2 * g, o = 2 * g + 1;
        pvec c0 = P_ODD(a0[e], P_SLL64(a0[o], 32)), c1 = P_ODD(a1[e], P_SLL64(a1[o], 32));
        pvec c2 = P_ODD(a2[e], P_SLL64(a2[o], 32)), c3 = P_ODD(a3[e], P_SLL64(a3[o], 32));
        pvec t0 = P_UNPACKLO32(c0, c1), t1 = P_UNPACKHI32(c0, c1);
        pvec t2 = P_UNPACKLO32(c2, c3), t3 = P_UNPACKHI32(c2, c3);
        w[4 * g] = P_UNPACKLO64(t0, t2), w[4 * g + 1] = P_UNPACKHI64(t0, t2);
        w[4 * g + 2] = P_UNPACKLO64(t1, t3), w[4 * g + 3] = P_UNPACKHI64(t1, t3);
    }
#endif
}

/* The 2*PV elements whose uniforms are the 16-bit lanes of w: v0 and v1 (their first and last PV)
 * where the lane >= T (unsigned; T: the threshold in every 16-bit lane), else +0.0f; the keeps
 * into the 2*PV bits at bits (element l in bit l, little-endian), stored straight from the compare
 */
static inline void keep_or_zero_v(pfvec *v0, pfvec *v1, pvec w, pvec T, unsigned char *bits) {
#if defined(__AVX512F__)
    __mmask32 keep = _mm512_cmpge_epu16_mask(w, T);
    memcpy(bits, &keep, 4);
    *v0 = _mm512_maskz_mov_ps((__mmask16)keep, *v0);
    *v1 = _mm512_maskz_mov_ps((__mmask16)(keep >> 16), *v1);
#else
    pvec keep = _mm256_cmpeq_epi16(_mm256_max_epu16(w, T), w); /* 0xFFFF where kept */
    __m256 k0 = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(keep)));
    __m256 k1 = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(keep, 1)));
    bits[0] = (unsigned char)_mm256_movemask_ps(k0);
    bits[1] = (unsigned char)_mm256_movemask_ps(k1);
    *v0 = _mm256_and_ps(*v0, k0), *v1 = _mm256_and_ps(*v1, k1);
#endif
}
#define HAVE_FUSED 1
typedef const philox_keys *philox_keys_arg;
#else
typedef int philox_keys_arg; /* no fused path: unused */
/* u[4j + w] = word w of Philox(seed, ctr0 + j) */
static void draw_words(uint64_t seed, uint64_t ctr0, uint32_t *restrict u) {
    for (int j = 0; j < COUNTERS; j++) {
        rg_philox4 r = rg_philox(seed, ctr0 + (uint64_t)j);
        for (int w = 0; w < 4; w++) u[4 * j + w] = r.v[w];
    }
}
#endif

/* v where keep is 1, else +0.0f: as bits, so that the masking loops below vectorise in every copy
 * (GCC sank the multiply into a branch on the compare, which only the AVX-512 copy's masked moves
 * could vectorise: 6% of a copy's speed in the others). */
static inline float keep_or_zero(float v, uint32_t keep) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= 0u - keep;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* rg_dropout_keeps as an integer test: the uniform h * 2^-16 of a 16-bit half h is exact, so
 * "uniform >= p" is "h >= keep_threshold(p)". Whether block element k (u: the block's words)
 * keeps: */
static inline uint32_t keeps(const uint32_t *u, int64_t k, uint32_t threshold) {
    return (uint32_t)(((u[k >> 1] >> (16 * (k & 1))) & 0xFFFFu) >= threshold);
}

static uint32_t keep_threshold(float p) {
    if (!(p <= 1.0f)) return 1u << 17;          /* p > 1 or NaN: the float test keeps nothing */
    if (!(p > 0.0f)) return 0;                  /* p <= 0: keeps everything */
    return (uint32_t)ceil((double)p * 65536.0); /* exact: p * 2^16 is a double */
}

#ifdef HAVE_FUSED
/* A block takes the fused path when it lies wholly inside the tensor, its counters share their
 * upper 32 bits (draw_groups' condition; COUNTERS divides 2^32, so only blocks that start
 * unaligned can straddle), and the threshold fits the 16-bit compare (t < 2^16). */
#define FUSED_OK(lo, hi, ctr0, t)                                                                  \
    ((lo) == 0 && (hi) == BLOCK && (uint32_t)(ctr0) <= UINT32_MAX - (COUNTERS - 1) &&              \
     (t) < (1u << 16))
#endif

/* The stream elements of block b cover tensor elements [e0, e0 + BLOCK) (clipped to [0, n)). */
#define FOR_BLOCKS(n, offset)                                                                      \
    uint64_t c_first = (offset) >> RG_DROPOUT_SHIFT;                                               \
    int64_t nblocks =                                                                              \
        (n) > 0 ? (rg_stream_counters(n, offset, RG_DROPOUT_SHIFT) + COUNTERS - 1) / COUNTERS : 0; \
    _Pragma("omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)") for (int64_t b = 0;   \
                                                                                  b < nblocks;     \
                                                                                  b++)

#ifdef HAVE_FUSED
/* The fused loop asks for the lines of in and out PF_DIST floats (two blocks) ahead: the draw
 * keeps the core busy between the block's loads and stores, and on its own the hardware prefetcher
 * did not overlap the two (L3-resident 4.7 MB, Zen 5, one thread: 62-67 GB/s drawn and masked
 * without, 73-76 with any distance from 512 to 4096 floats; in L1 the draw alone runs at about the
 * same 0.11 ns per element, so the forward pass is now the draw's speed). */
#define PF_DIST 1024
/* Asks for the line PF_DIST floats past p (for writing when w is 1). The address is computed as an
 * integer: near the end of the tensor it lies past the array (a prefetch never faults). */
#define prefetch_ahead(p, w)                                                                       \
    __builtin_prefetch((const void *)((uintptr_t)(p) + PF_DIST * sizeof(float)), w, 3)
/* One block on the fused path: out[e] = mask(in[e]) * scale + beta * out[e] for its BLOCK
 * elements (in, out: the block's first element), the keep of element e in bit e % 8 of bits[e / 8].
 * Always inlined, and called with a constant beta = 0 where beta is 0: a test of beta left in the
 * loop cost 40% (0.68 -> 0.95 ns per element). */
static inline __attribute__((always_inline)) void
fused_block(const philox_keys *ks, uint64_t ctr0, float scale, uint32_t t, const float *in,
            float beta, float *out, unsigned char bits[BLOCK / 8]) {
    const pfvec s = PF_SET1(scale), bv = PF_SET1(beta);
    const pvec T = P_SET1(t * 0x10001u); /* t in both 16-bit halves */
    for (int j = 0; j < COUNTERS; j += G * PV) {
        pvec w[4 * G];
        draw_groups(ks, ctr0 + (uint64_t)j, w);
        for (int k = 0; k < 4 * G; k++) {
            int64_t e = PER * j + 2 * PV * k;
            prefetch_ahead(&in[e], 0), prefetch_ahead(&in[e + PV], 0);
            prefetch_ahead(&out[e], 1), prefetch_ahead(&out[e + PV], 1);
            pfvec r0 = PF_MUL(PF_LOAD(&in[e]), s), r1 = PF_MUL(PF_LOAD(&in[e + PV]), s);
            keep_or_zero_v(&r0, &r1, w[k], T, &bits[e / 8]);
            if (beta != 0.0f) {
                r0 = PF_ADD(r0, PF_MUL(bv, PF_LOAD(&out[e])));
                r1 = PF_ADD(r1, PF_MUL(bv, PF_LOAD(&out[e + PV])));
            }
            PF_STORE(&out[e], r0), PF_STORE(&out[e + PV], r1);
        }
    }
}
#endif

/* Block b of a call (counters ctr0 ...): out = mask(in) * scale + beta * out over its elements
 * of [0, n), and its keeps into words BLOCK_WORDS*b ... of mask (those below words) unless mask is
 * NULL. Always inlined, in forward with a constant beta = 0 and in backward once per case of beta,
 * so that each parallel loop (its own function under OpenMP) has no test of beta inside: one left
 * in the fused loop cost 40% (0.68 -> 0.95 ns per element). */
static inline __attribute__((always_inline)) void
dropout_block(int64_t n, uint64_t seed, uint64_t offset, int64_t b, uint64_t ctr0,
              const philox_keys_arg ks, float scale, uint32_t t, const float *in, float beta,
              float *out, uint32_t *mask, int64_t words) {
    uint32_t u[4 * COUNTERS];
    unsigned char bits[BLOCK / 8];
    /* the tensor element of the block's first position; may be negative */
    int64_t e0 = (int64_t)(PER * ctr0 - offset);
    int64_t lo = e0 < 0 ? -e0 : 0, hi = n - e0 < BLOCK ? n - e0 : BLOCK;
#ifdef HAVE_FUSED
    if (FUSED_OK(lo, hi, ctr0, t)) {
        fused_block(ks, ctr0, scale, t, &in[e0], beta, &out[e0], bits);
    } else
#endif
    {
        draw_words(seed, ctr0, u);
        if (beta == 0.0f) {
            for (int64_t k = lo; k < hi; k++)
                out[e0 + k] = keep_or_zero(in[e0 + k] * scale, keeps(u, k, t));
        } else {
            for (int64_t k = lo; k < hi; k++)
                out[e0 + k] = keep_or_zero(in[e0 + k] * scale, keeps(u, k, t)) + beta * out[e0 + k];
        }
        if (mask) {
            memset(bits, 0, sizeof bits);
            for (int64_t k = lo; k < hi; k++)
                bits[k >> 3] |= (unsigned char)(keeps(u, k, t) << (k & 7));
        }
    }
    if (mask)
        for (int64_t w = 0; w < BLOCK_WORDS && BLOCK_WORDS * b + w < words; w++)
            mask[BLOCK_WORDS * b + w] = (uint32_t)bits[4 * w] | (uint32_t)bits[4 * w + 1] << 8 |
                                        (uint32_t)bits[4 * w + 2] << 16 |
                                        (uint32_t)bits[4 * w + 3] << 24;
}

/* dx = (bit e + offset % 8 of mask ? dy * scale : 0) + beta * dx for the 32 * (w1 - w0) elements
 * of words w0 ... w1 - 1 (those in [0, n)). Inlined with a constant beta = 0 where it is 0. */
static inline __attribute__((always_inline)) void
masked_words(int64_t n, int64_t s, const uint32_t *mask, int64_t w0, int64_t w1, float scale,
             const float *dy, float beta, float *dx) {
    for (int64_t w = w0; w < w1; w++) {
        uint32_t m = mask[w];
        int64_t e0 = 32 * w - s;
        if (e0 >= 0 && e0 + 32 <= n) { /* a whole word: a loop the compiler vectorises */
            const float *d = dy + e0;
            float *o = dx + e0;
            for (int k = 0; k < 32; k++) {
                float v = keep_or_zero(d[k] * scale, (m >> k) & 1u);
                o[k] = beta == 0.0f ? v : v + beta * o[k];
            }
        } else {
            for (int64_t e = e0 < 0 ? 0 : e0; e < e0 + 32 && e < n; e++) {
                float v = keep_or_zero(dy[e] * scale, (m >> (e - e0)) & 1u);
                dx[e] = beta == 0.0f ? v : v + beta * dx[e];
            }
        }
    }
}

#define MASK_CHUNK 64 /* words (2048 elements) per piece of the parallel loop */

#ifdef HAVE_FUSED
#define KEYS(seed)                                                                                 \
    philox_keys ks_;                                                                               \
    philox_keys_init(seed, &ks_);                                                                  \
    const philox_keys *ks = &ks_
#else
#define KEYS(seed) const philox_keys_arg ks = 0
#endif

void rg_cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                            float *y, uint32_t *mask) {
    float scale = rg_dropout_scale(p);
    uint32_t t = keep_threshold(p);
    int64_t words = rg_dropout_mask_words(n, offset);
    KEYS(seed);
    FOR_BLOCKS(n, offset) {
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        dropout_block(n, seed, offset, b, ctr0, ks, scale, t, x, 0.0f, y, mask, words);
    }
}

void rg_cpu_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset,
                             const uint32_t *mask, const float *dy, float beta, float *dx) {
    float scale = rg_dropout_scale(p);
    if (mask) {
        int64_t words = rg_dropout_mask_words(n, offset), s = (int64_t)(offset & (PER - 1));
        int64_t chunks = (words + MASK_CHUNK - 1) / MASK_CHUNK;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t w0 = c * MASK_CHUNK, w1 = w0 + MASK_CHUNK < words ? w0 + MASK_CHUNK : words;
            if (beta == 0.0f)
                masked_words(n, s, mask, w0, w1, scale, dy, 0.0f, dx);
            else
                masked_words(n, s, mask, w0, w1, scale, dy, beta, dx);
        }
        return;
    }
    uint32_t t = keep_threshold(p);
    KEYS(seed);
    FOR_BLOCKS(n, offset) {
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        if (beta == 0.0f)
            dropout_block(n, seed, offset, b, ctr0, ks, scale, t, dy, 0.0f, dx, NULL, 0);
        else
            dropout_block(n, seed, offset, b, ctr0, ks, scale, t, dy, beta, dx, NULL, 0);
    }
}
