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
    pvec m0, m1;                    /* the multipliers, in memory for the AVX2 rounds' operands */
#if defined(__AVX512F__)
    pvec pair, quad[2]; /* vpermt2d indices of the transpose (draw_groups) */
#endif
} philox_keys;

static void philox_keys_init(uint64_t seed, philox_keys *ks) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    ks->m0 = P_SET1(0xD2511F53u), ks->m1 = P_SET1(0xCD9E8D57u);
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
 * for the halves to stay in registers. (In the AVX-512 copy, peeling rounds 0 and 1, whose upper
 * counter words are constant, saved 2 of 20 products a half and measured no faster; the AVX2 copy,
 * whose rounds are in asm that GCC cannot simplify, peels them.) The AVX2 copy's rounds in
 * registers, its peeled rounds and its masking a pair of vectors at a time took Zen 3 from 0.45 to
 * 0.35 ns per element (1.18 M floats, one thread, the thread's CPU time, median of 5 alternated
 * runs; 610 to 476 instructions per 128 elements).
 * AVX-512 transposes with vpermt2d (any 16 of two vectors' 32 lanes, one instruction): per half,
 * words 0/1 and 2/3 paired per counter, then counters 0-3 and 4-7 in stream order, 4 permutes per
 * 32 words where AVX2 needs 8 shifts, blends and unpacks; its halves hold consecutive
 * counters, so half h yields w[2h] and w[2h + 1].
 */
#define G 2
_Static_assert(COUNTERS % (G * PV) == 0, "a block is a whole number of draw_groups calls");

#if !defined(__AVX512F__)
/* The AVX2 rounds of draw_groups' four halves, in registers.
 * Four halves of four state vectors are all 16 ymm registers, and the round as written for
 * AVX-512 needs a temporary besides (hi = p >> 32 while p lives on as the next lo word): GCC
 * spilled 51 vectors per call and reloaded 85, a third of the call's instructions (Zen 3: 0.44 ns
 * per element drawn and masked, 65% of a copy). These rounds need no temporary: the words that are
 * only XORed (1 and 3) alternate between the low and the high half of their lanes.
 *   round A (words 1 and 3 in the low halves): p = mul(x, m); p = swap halves of p (vpshufd);
 *     y ^= k; y ^= p. y's low half is now hi ^ y ^ k, the new multiplied word, and p's high half
 *     holds lo, the new word 1 or 3.
 *   round B (words 1 and 3 in the high halves): p = mul(x, m); y ^= k; y ^= p; y >>= 32. k is in
 *     every 32-bit lane, so shifting after the XOR leaves hi ^ y ^ k in the low half; p's low half
 *     holds lo.
 * Both are 8 instructions a half, as before, and leave the roles rotated: (x0, x1, x2, x3) become
 * (y1, p2, y3, p0). Ten rounds, A then B, leave every word in the low half of its lane, as the
 * transposes expect (but RG_ROUND_B_LAST). The multipliers and keys are memory operands (loads
 * fused into the instructions). One asm statement a round and group (two halves, 8 register
 * operands) keeps the 16 values in registers; GCC schedules nothing inside it, so each statement
 * issues its 4 multiplies first, then its key XORs, then the rest, and the out-of-order core
 * overlaps the two groups' statements. Rounds 0 and 1 are in C below (draw_groups). */
#define RG_HALF_OPS(op, h) op(h##0, h##1, h##2, h##3)
#define RG_MUL(a, b, c, d)                                                                         \
    "vpmuludq %[m0], %[" #a "], %[" #a "]\n\t"                                                     \
    "vpmuludq %[m1], %[" #c "], %[" #c "]\n\t"
#define RG_KEY(a, b, c, d)                                                                         \
    "vpxor %[k0], %[" #b "], %[" #b "]\n\t"                                                        \
    "vpxor %[k1], %[" #d "], %[" #d "]\n\t"
#define RG_SWAP(a, b, c, d)                                                                        \
    "vpshufd $0xB1, %[" #c "], %[" #c "]\n\t"                                                      \
    "vpshufd $0xB1, %[" #a "], %[" #a "]\n\t"
#define RG_MIX(a, b, c, d)                                                                         \
    "vpxor %[" #c "], %[" #b "], %[" #b "]\n\t"                                                    \
    "vpxor %[" #a "], %[" #d "], %[" #d "]\n\t"
#define RG_DOWN(a, b, c, d)                                                                        \
    "vpsrlq $32, %[" #b "], %[" #b "]\n\t"                                                         \
    "vpsrlq $32, %[" #d "], %[" #d "]\n\t"
#define RG_PAIR(op, h, i) RG_HALF_OPS(op, h) RG_HALF_OPS(op, i)
#define RG_OPERANDS(h, i, r)                                                                       \
    : [h##0] "+x"(h##0), [h##1] "+x"(h##1), [h##2] "+x"(h##2), [h##3] "+x"(h##3),                  \
      [i##0] "+x"(i##0), [i##1] "+x"(i##1), [i##2] "+x"(i##2), [i##3] "+x"(i##3)                   \
    : [m0] "m"(ks->m0), [m1] "m"(ks->m1), [k0] "m"(ks->k0[r]), [k1] "m"(ks->k1[r])
#define RG_ROTATE(h)                                                                               \
    do {                                                                                           \
        pvec t_ = h##0;                                                                            \
        h##0 = h##1, h##1 = h##2, h##2 = h##3, h##3 = t_;                                          \
    } while (0)
/* one group (two halves, h and i) a statement: an asm statement takes at most 30 operands */
#define RG_ROUND_A(h, i, r)                                                                        \
    __asm__(RG_PAIR(RG_MUL, h, i) RG_PAIR(RG_KEY, h, i) RG_PAIR(RG_SWAP, h, i)                     \
                RG_PAIR(RG_MIX, h, i) RG_OPERANDS(h, i, r));                                       \
    RG_ROTATE(h);                                                                                  \
    RG_ROTATE(i)
#define RG_ROUND_B(h, i, r)                                                                        \
    __asm__(RG_PAIR(RG_MUL, h, i) RG_PAIR(RG_KEY, h, i) RG_PAIR(RG_MIX, h, i)                      \
                RG_PAIR(RG_DOWN, h, i) RG_OPERANDS(h, i, r));                                      \
    RG_ROTATE(h);                                                                                  \
    RG_ROTATE(i)
#define RG_ROUNDS(r)                                                                               \
    RG_ROUND_A(s0, s1, r);                                                                         \
    RG_ROUND_A(s2, s3, r);                                                                         \
    RG_ROUND_B(s0, s1, r + 1);                                                                     \
    RG_ROUND_B(s2, s3, r + 1)
/* The last round B shifts words 0 and 2 down in the even halves (h) only: the transposes want the
 * odd halves' words in the high halves of their lanes, where round B leaves them. */
#define RG_ROUND_B_LAST(h, i, r)                                                                   \
    __asm__(RG_PAIR(RG_MUL, h, i) RG_PAIR(RG_KEY, h, i) RG_PAIR(RG_MIX, h, i)                      \
                RG_HALF_OPS(RG_DOWN, h) RG_OPERANDS(h, i, r));                                     \
    RG_ROTATE(h);                                                                                  \
    RG_ROTATE(i)
_Static_assert(G == 2, "the AVX2 rounds are written for four halves");
#endif

static inline __attribute__((always_inline)) void draw_groups(const philox_keys *ks, uint64_t ctr0,
                                                              pvec w[4 * G]) {
    pvec a0[2 * G], a1[2 * G], a2[2 * G], a3[2 * G]; /* [2g]: group g's even lanes, [2g+1] odd */
    for (int h = 0; h < 2 * G; h++) {
        pvec base = P_SET1_64(ctr0 + (uint64_t)(PV * (h >> 1)));
        a0[h] = P_ADD64(base, (h & 1) ? ks->odd : ks->even); /* low halves: word 0 */
        a1[h] = P_SRL64(base, 32), a2[h] = P_ZERO, a3[h] = P_ZERO;
    }
#if !defined(__AVX512F__)
    {
        /* Rounds 0 and 1 on what is known of them: words 2 and 3 start at 0, and word 1 (the
         * counters' upper halves, shared by the call's counters) is the same in every lane.
         * Round 0 then leaves the same word 0 (c) everywhere, so round 1's product of word 0 (q)
         * is shared too: 8 instructions a half for both rounds, where the general ones take 16. */
        const pvec c = P_XOR(a1[0], ks->k0[0]), q = P_MUL_EVEN(c, ks->m0);
        const pvec d = P_XOR(q, ks->k1[1]);
        pvec x0[4], x1[4], x2[4];
        for (int h = 0; h < 4; h++) {
            pvec sw = _mm256_shuffle_epi32(P_MUL_EVEN(a0[h], ks->m0), 0xB1); /* (hi, lo) of p0 */
            pvec p2 = P_MUL_EVEN(P_XOR(sw, ks->k1[0]), ks->m1);              /* round 1's p2 */
            x0[h] = P_SRL64(P_XOR(p2, ks->k0[1]), 32);
            x1[h] = p2;
            x2[h] = P_SRL64(P_XOR(sw, d), 32);
        }
        pvec s00 = x0[0], s01 = x1[0], s02 = x2[0], s03 = q;
        pvec s10 = x0[1], s11 = x1[1], s12 = x2[1], s13 = q;
        pvec s20 = x0[2], s21 = x1[2], s22 = x2[2], s23 = q;
        pvec s30 = x0[3], s31 = x1[3], s32 = x2[3], s33 = q;
        RG_ROUNDS(2);
        RG_ROUNDS(4);
        RG_ROUNDS(6);
        RG_ROUND_A(s0, s1, 8);
        RG_ROUND_A(s2, s3, 8);
        RG_ROUND_B_LAST(s0, s1, 9);
        RG_ROUND_B_LAST(s2, s3, 9);
        a0[0] = s00, a1[0] = s01, a2[0] = s02, a3[0] = s03;
        a0[1] = s10, a1[1] = s11, a2[1] = s12, a3[1] = s13;
        a0[2] = s20, a1[2] = s21, a2[2] = s22, a3[2] = s23;
        a0[3] = s30, a1[3] = s31, a2[3] = s32, a3[3] = s33;
    }
#else
    const pvec m0 = ks->m0, m1 = ks->m1;
    _Pragma("GCC unroll 10") for (int r = 0; r < 10; r++) {
        _Pragma("GCC unroll 8") for (int h = 0; h < 2 * G; h++) {
            pvec p0 = P_MUL_EVEN(a0[h], m0), p2 = P_MUL_EVEN(a2[h], m1);
            a0[h] = P_XOR(P_SRL64(p2, 32), P_XOR(a1[h], ks->k0[r]));
            a2[h] = P_XOR(P_SRL64(p0, 32), P_XOR(a3[h], ks->k1[r]));
            a1[h] = p2, a3[h] = p0;
        }
    }
#endif
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
        /* words 0 and 2 of the odd halves are in the high halves already (RG_ROUND_B_LAST) */
        pvec c0 = P_ODD(a0[e], a0[o]), c1 = P_ODD(a1[e], P_SLL64(a1[o], 32));
        pvec c2 = P_ODD(a2[e], a2[o]), c3 = P_ODD(a3[e], P_SLL64(a3[o], 32));
        pvec t0 = P_UNPACKLO32(c0, c1), t1 = P_UNPACKHI32(c0, c1);
        pvec t2 = P_UNPACKLO32(c2, c3), t3 = P_UNPACKHI32(c2, c3);
        w[4 * g] = P_UNPACKLO64(t0, t2), w[4 * g + 1] = P_UNPACKHI64(t0, t2);
        w[4 * g + 2] = P_UNPACKLO64(t1, t3), w[4 * g + 3] = P_UNPACKHI64(t1, t3);
    }
#endif
}
#if !defined(__AVX512F__)
#undef RG_HALF_OPS
#undef RG_MUL
#undef RG_KEY
#undef RG_SWAP
#undef RG_MIX
#undef RG_DOWN
#undef RG_PAIR
#undef RG_OPERANDS
#undef RG_ROTATE
#undef RG_ROUND_A
#undef RG_ROUND_B
#undef RG_ROUNDS
#undef RG_ROUND_B_LAST
#endif

/* The 4*PV elements whose uniforms are the 16-bit lanes of wa and then wb: v[0] ... v[3] (PV each)
 * where the lane >= T (unsigned; T: the threshold in every 16-bit lane), else +0.0f; the keeps into
 * the 4*PV bits at bits (element l in bit l, little-endian), stored straight from the compares. */
static inline void keep_or_zero_v(pfvec v[4], pvec wa, pvec wb, pvec T, unsigned char *bits) {
#if defined(__AVX512F__)
    __mmask32 ka = _mm512_cmpge_epu16_mask(wa, T), kb = _mm512_cmpge_epu16_mask(wb, T);
    memcpy(bits, &ka, 4), memcpy(bits + 4, &kb, 4);
    v[0] = _mm512_maskz_mov_ps((__mmask16)ka, v[0]);
    v[1] = _mm512_maskz_mov_ps((__mmask16)(ka >> 16), v[1]);
    v[2] = _mm512_maskz_mov_ps((__mmask16)kb, v[2]);
    v[3] = _mm512_maskz_mov_ps((__mmask16)(kb >> 16), v[3]);
#else
    pvec ka = _mm256_cmpeq_epi16(_mm256_max_epu16(wa, T), wa); /* 0xFFFF where kept */
    pvec kb = _mm256_cmpeq_epi16(_mm256_max_epu16(wb, T), wb);
    /* the 32 keeps as bytes, in order: packsswb interleaves the two per 128-bit lane
     * (a 0-7, b 0-7 | a 8-15, b 8-15) and vpermq puts back a 8-15 before b 0-7; one movemask
     * then yields all 32 bits (two movmskps and two byte stores a vector before) */
    uint32_t m =
        (uint32_t)_mm256_movemask_epi8(_mm256_permute4x64_epi64(_mm256_packs_epi16(ka, kb), 0xD8));
    memcpy(bits, &m, 4);
    /* each 16-bit keep widened to its element's 32 bits, as the AND's mask */
#define RG_KEEP_MASK(k16) _mm256_castsi256_ps(_mm256_cvtepi16_epi32(k16))
    v[0] = _mm256_and_ps(v[0], RG_KEEP_MASK(_mm256_castsi256_si128(ka)));
    v[1] = _mm256_and_ps(v[1], RG_KEEP_MASK(_mm256_extracti128_si256(ka, 1)));
    v[2] = _mm256_and_ps(v[2], RG_KEEP_MASK(_mm256_castsi256_si128(kb)));
    v[3] = _mm256_and_ps(v[3], RG_KEEP_MASK(_mm256_extracti128_si256(kb, 1)));
#undef RG_KEEP_MASK
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
        /* unrolled, so that w stays in registers */
        _Pragma("GCC unroll 4") for (int k = 0; k < 4 * G; k += 2) {
            int64_t e = PER * j + 2 * PV * k; /* the first of w[k] and w[k + 1]'s 4 * PV elements */
            for (int f = 0; f < 4 * PV; f += 16) /* one line (16 floats) each */
                prefetch_ahead(&in[e + f], 0), prefetch_ahead(&out[e + f], 1);
            pfvec r[4];
            for (int q = 0; q < 4; q++) r[q] = PF_MUL(PF_LOAD(&in[e + PV * q]), s);
            keep_or_zero_v(r, w[k], w[k + 1], T, &bits[e / 8]);
            if (beta != 0.0f)
                for (int q = 0; q < 4; q++)
                    r[q] = PF_ADD(r[q], PF_MUL(bv, PF_LOAD(&out[e + PV * q])));
            for (int q = 0; q < 4; q++) PF_STORE(&out[e + PV * q], r[q]);
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
