/* conv2d_kernels.c — the SIMD building blocks of the CPU convolution (see conv2d_impl.h): the
 * register-tiled multiply-accumulate loop, and the transposition between channels-first (NCHW)
 * and channels-last (NHWC) layouts.
 *
 * What it teaches: a matrix product reaches the machine's peak only when each value loaded
 * from memory feeds several multiply-adds. The tile keeps RG_CONV_MR x RG_CONV_NV vectors of
 * results in registers; each reduction step loads RG_CONV_NV vectors and RG_CONV_MR scalars and
 * does RG_CONV_MR * RG_CONV_NV vector multiply-adds (24 on AVX-512, for 10 loads). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/sanitize.h"
#include "tensor/cpu/conv2d_impl.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* Under AddressSanitizer the tiles run uninstrumented (RG_UNCHECKED, core/sanitize.h), and
 * rg_conv_tile and rg_conv_tile_add check each region a tile touches once per call instead. */
#define VL RG_CONV_VL
#define MR RG_CONV_MR

/* Keeps vector v alive in a register: an empty asm that claims to read it. Without it GCC reuses
 * the registers of b's vectors for the last row's results once b is dead, and then needs a move
 * per vector each step to put the accumulators back; with it the loop is only loads and FMAs. */
#if defined(__GNUC__) && defined(__AVX512F__)
#define KEEP_IN_REGISTER(v) __asm__ volatile("" ::"v"(v))
#elif defined(__GNUC__) && defined(__SSE__)
#define KEEP_IN_REGISTER(v) __asm__ volatile("" ::"x"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)(v))
#endif

#if defined(__GNUC__) && defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__) &&         \
    MR == 6 && RG_CONV_NV == 2
/* The AVX2 copy's tile. Its 16 registers hold 15 live vectors (12 accumulators, 2 of b, a
 * broadcast), and from the generic loop (tile_loop, the #else branch) GCC, free to put each product
 * in any register, rotated the accumulators through the broadcast's register: four to nine register
 * moves every two steps beside the 24 multiply-adds, 6-7% of the CNN step at one thread (Zen 3).
 * Here each accumulator is a variable of its own, loaded and stored by name (an array of them
 * went through the stack at every call: 15% of the CNN's conv1 passes, whose tiles run 10 steps),
 * and the in-out operand of its multiply-add (vfmadd231ps: the same rounding as the contracted
 * expression), so it stays in one register and the loop is loads, broadcasts and FMAs. */
#include <immintrin.h>
#define FMA_INTO(acc, s, bv) __asm__("vfmadd231ps %2, %1, %0" : "+x"(acc) : "x"(s), "x"(bv))
#define ROW_STEP(i)                                                                                \
    do {                                                                                           \
        const __m256 s_ = _mm256_broadcast_ss(row##i + off[t]);                                    \
        FMA_INTO(c##i##0, s_, b0);                                                                 \
        if (nv == 2) FMA_INTO(c##i##1, s_, b1);                                                    \
    } while (0)
/* The accumulators c<row><vector>, each from INIT(row, vector); then the loop over nt steps. */
#define TILE_AVX2_LOOP(INIT)                                                                       \
    const float *row0 = a[0], *row1 = a[1], *row2 = a[2], *row3 = a[3], *row4 = a[4],              \
                *row5 = a[5];                                                                      \
    const __m256 zero_ = _mm256_setzero_ps();                                                      \
    __m256 c00 = INIT(0, 0), c10 = INIT(1, 0), c20 = INIT(2, 0), c30 = INIT(3, 0),                 \
           c40 = INIT(4, 0), c50 = INIT(5, 0);                                                     \
    __m256 c01 = nv == 2 ? INIT(0, 1) : zero_, c11 = nv == 2 ? INIT(1, 1) : zero_,                 \
           c21 = nv == 2 ? INIT(2, 1) : zero_, c31 = nv == 2 ? INIT(3, 1) : zero_,                 \
           c41 = nv == 2 ? INIT(4, 1) : zero_, c51 = nv == 2 ? INIT(5, 1) : zero_;                 \
    _Pragma("GCC unroll 2") for (int64_t t = 0; t < nt; t++) {                                     \
        const float *bt = b + t * ldb;                                                             \
        const __m256 b0 = _mm256_loadu_ps(bt), b1 = nv == 2 ? _mm256_loadu_ps(bt + VL) : b0;       \
        ROW_STEP(0);                                                                               \
        ROW_STEP(1);                                                                               \
        ROW_STEP(2);                                                                               \
        ROW_STEP(3);                                                                               \
        ROW_STEP(4);                                                                               \
        ROW_STEP(5);                                                                               \
    }
/* FINISH(row, vector, accumulator) for each of them */
#define TILE_AVX2_FINISH(FINISH)                                                                   \
    do {                                                                                           \
        FINISH(0, 0, c00), FINISH(1, 0, c10), FINISH(2, 0, c20);                                   \
        FINISH(3, 0, c30), FINISH(4, 0, c40), FINISH(5, 0, c50);                                   \
        if (nv == 2) {                                                                             \
            FINISH(0, 1, c01), FINISH(1, 1, c11), FINISH(2, 1, c21);                               \
            FINISH(3, 1, c31), FINISH(4, 1, c41), FINISH(5, 1, c51);                               \
        }                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) RG_UNCHECKED void
tile_body(const int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
          int64_t ldb, float *c, int64_t ldc, bool accumulate) {
#define FROM_C(i, v) (accumulate ? _mm256_loadu_ps(c + (i)*ldc + (v)*VL) : zero_)
#define TO_C(i, v, x) _mm256_storeu_ps(c + (i)*ldc + (v)*VL, x)
    TILE_AVX2_LOOP(FROM_C)
    TILE_AVX2_FINISH(TO_C);
#undef FROM_C
#undef TO_C
}

static inline __attribute__((always_inline)) RG_UNCHECKED void
tile_add_body(const int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
              int64_t ldb, float *const *dst, const int32_t *col_off, int dst_rows) {
#define ZERO(i, v) zero_
#define ADD_TO_DST(i, v, x)                                                                        \
    ((i) < dst_rows                                                                                \
         ? _mm256_storeu_ps(dst[i] + col_off[(v)*VL],                                              \
                            _mm256_add_ps(_mm256_loadu_ps(dst[i] + col_off[(v)*VL]), x))           \
         : (void)0)
    TILE_AVX2_LOOP(ZERO)
    TILE_AVX2_FINISH(ADD_TO_DST);
#undef ZERO
#undef ADD_TO_DST
}
#undef TILE_AVX2_LOOP
#undef TILE_AVX2_FINISH
#undef ROW_STEP
#undef FMA_INTO
#else
/* The tile's loop for a compile-time nv: acc += the products. After inlining, acc[][] lives in
 * registers. */
static inline __attribute__((always_inline)) RG_UNCHECKED void
tile_loop(const int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
          int64_t ldb, rg_convvec acc[MR][RG_CONV_NV]) {
    const float *row[MR];
    for (int i = 0; i < MR; i++) row[i] = a[i];
#pragma GCC unroll 2
    for (int64_t t = 0; t < nt; t++) {
        const int64_t o = off[t];
        const float *bt = b + t * ldb;
        rg_convvec bv[RG_CONV_NV];
        for (int v = 0; v < nv; v++) bv[v] = *(const rg_convvec *)(bt + v * VL);
        for (int i = 0; i < MR; i++) {
            const float s = row[i][o];
            for (int v = 0; v < nv; v++) acc[i][v] += s * bv[v];
        }
        for (int v = 0; v < nv; v++) KEEP_IN_REGISTER(bv[v]);
    }
}

/* rg_conv_tile for a compile-time nv. */
static inline __attribute__((always_inline)) RG_UNCHECKED void
tile_body(const int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
          int64_t ldb, float *c, int64_t ldc, bool accumulate) {
    rg_convvec acc[MR][RG_CONV_NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < nv; v++)
            acc[i][v] = accumulate ? *(const rg_convvec *)(c + i * ldc + v * VL) : (rg_convvec){0};
    tile_loop(nv, nt, off, a, b, ldb, acc);
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < nv; v++) *(rg_convvec *)(c + i * ldc + v * VL) = acc[i][v];
}

/* rg_conv_tile_add for a compile-time nv. */
static inline __attribute__((always_inline)) RG_UNCHECKED void
tile_add_body(const int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
              int64_t ldb, float *const *dst, const int32_t *col_off, int dst_rows) {
    rg_convvec acc[MR][RG_CONV_NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = (rg_convvec){0};
    tile_loop(nv, nt, off, a, b, ldb, acc);
    for (int i = 0; i < MR && i < dst_rows; i++)
        for (int v = 0; v < nv; v++) *(rg_convvec *)(dst[i] + col_off[v * VL]) += acc[i][v];
}

#endif

#define RG_CONV_TILE_NV(NV)                                                                        \
    RG_UNCHECKED static void tile_nv##NV(int64_t nt, const int32_t *off, const float *const *a,    \
                                         const float *b, int64_t ldb, float *c, int64_t ldc,       \
                                         bool accumulate) {                                        \
        tile_body(NV, nt, off, a, b, ldb, c, ldc, accumulate);                                     \
    }                                                                                              \
    RG_UNCHECKED static void tile_add_nv##NV(                                                      \
        int64_t nt, const int32_t *off, const float *const *a, const float *b, int64_t ldb,        \
        float *const *dst, const int32_t *col_off, int dst_rows) {                                 \
        tile_add_body(NV, nt, off, a, b, ldb, dst, col_off, dst_rows);                             \
    }
RG_CONV_TILE_NV(1)
RG_CONV_TILE_NV(2)
#if RG_CONV_NV >= 4
RG_CONV_TILE_NV(3)
RG_CONV_TILE_NV(4)
#endif

/* The copies by vectors a row, from 1 to RG_CONV_NV (entry 0 unused). */
typedef void tile_fn(int64_t, const int32_t *, const float *const *, const float *, int64_t,
                     float *, int64_t, bool);
typedef void tile_add_fn(int64_t, const int32_t *, const float *const *, const float *, int64_t,
                         float *const *, const int32_t *, int);
#if RG_CONV_NV >= 4
static tile_fn *const tiles[] = {NULL, tile_nv1, tile_nv2, tile_nv3, tile_nv4};
static tile_add_fn *const add_tiles[] = {NULL, tile_add_nv1, tile_add_nv2, tile_add_nv3,
                                         tile_add_nv4};
#else
static tile_fn *const tiles[] = {NULL, tile_nv1, tile_nv2};
static tile_add_fn *const add_tiles[] = {NULL, tile_add_nv1, tile_add_nv2};
#endif

#if RG_ASAN
/* The smallest and largest of off[0 .. nt) (nt > 0), which the caller has checked. */
RG_UNCHECKED static void offset_range(int64_t nt, const int32_t *off, int32_t *lo, int32_t *hi) {
    int32_t l = off[0], h = off[0];
    for (int64_t t = 1; t < nt; t++) l = off[t] < l ? off[t] : l, h = off[t] > h ? off[t] : h;
    *lo = l, *hi = h;
}

/* What the uninstrumented tile_loop reads: off[0 .. nt), each row a[i] from its smallest to its
 * largest offset, and nt vectors of nv * VL floats of b, ldb apart. */
static void check_tile_inputs(int nv, int64_t nt, const int32_t *off, const float *const *a,
                              const float *b, int64_t ldb) {
    if (nt <= 0) return;
    rg_check_region(off, (size_t)nt * sizeof *off);
    int32_t lo, hi;
    offset_range(nt, off, &lo, &hi);
    for (int i = 0; i < MR; i++)
        if (i == 0 || a[i] != a[i - 1]) /* spare rows repeat the last */
            rg_check_region(a[i] + lo, (size_t)(hi - lo + 1) * sizeof(float));
    rg_check_region(b, (size_t)((nt - 1) * ldb + nv * VL) * sizeof(float));
}
#endif

void rg_conv_tile(int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
                  int64_t ldb, float *c, int64_t ldc, bool accumulate) {
    RG_CHECK(nv >= 1 && nv <= RG_CONV_NV, "conv2d: tile with %d vectors per row", nv);
#if RG_ASAN
    check_tile_inputs(nv, nt, off, a, b, ldb);
    for (int i = 0; i < MR; i++) rg_check_region(c + i * ldc, (size_t)nv * VL * sizeof(float));
#endif
    tiles[nv](nt, off, a, b, ldb, c, ldc, accumulate);
}

void rg_conv_tile_add(int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
                      int64_t ldb, float *const *dst, const int32_t *col_off, int dst_rows) {
    RG_CHECK(nv >= 1 && nv <= RG_CONV_NV, "conv2d: tile with %d vectors per row", nv);
#if RG_ASAN
    check_tile_inputs(nv, nt, off, a, b, ldb);
    for (int i = 0; i < MR && i < dst_rows; i++)
        for (int v = 0; v < nv; v++)
            rg_check_region(dst[i] + col_off[v * VL], (size_t)VL * sizeof(float));
#endif
    add_tiles[nv](nt, off, a, b, ldb, dst, col_off, dst_rows);
}

void rg_conv_panel_product(int nv, int64_t rows, const float *a, const int32_t *arow,
                           int64_t astride, const int32_t *off, int64_t kd, const float *b,
                           float *c, int64_t ldc, bool accumulate) {
    for (int64_t k0 = 0; k0 < kd; k0 += RG_CONV_KC) {
        int64_t kc = kd - k0 < RG_CONV_KC ? kd - k0 : RG_CONV_KC;
        for (int64_t m0 = 0; m0 < rows; m0 += MR) {
            const float *am[MR];
            for (int i = 0; i < MR; i++) { /* spare rows repeat the last */
                int64_t m = m0 + i < rows ? m0 + i : rows - 1;
                am[i] = a + (arow ? arow[m] : m * astride);
            }
            rg_conv_tile(nv, kc, off + k0, am, b + k0 * RG_CONV_NR, RG_CONV_NR, c + m0 * ldc, ldc,
                         accumulate || k0 > 0);
        }
    }
}

/* ---- transposition ---- */

typedef int32_t rg_convidx __attribute__((vector_size(VL * sizeof(int32_t))));

#define ROUNDS (VL == 16 ? 4 : VL == 8 ? 3 : 2) /* log2(VL) */

/* Shuffle masks of a VL x VL transposition. Round k (h = VL >> (k+1)) swaps the off-diagonal
 * h x h sub-blocks of every 2h x 2h block: rows i and i + h (i without bit h) become
 * lo = (x[e] or y[e - h]) and hi = (x[e + h] or y[e]), choosing by bit h of e. After the rounds
 * for h = VL/2, ..., 2, 1 every element has moved from (i, j) to (j, i). */
typedef struct {
    rg_convidx lo[ROUNDS], hi[ROUNDS];
} transpose_masks;

/* The masks as a constant table: built by a loop at each call, they cost ~100 cycles a call,
 * 0.1 ms of the 4096 small transpositions that pack ResNet-18's last 3x3 data pass. */
#define MASK_LO(h, e) (((e) & (h)) ? VL + (e) - (h) : (e))
#define MASK_HI(h, e) (((e) & (h)) ? VL + (e) : (e) + (h))
#define LANES4(F, h, e) F(h, e), F(h, (e) + 1), F(h, (e) + 2), F(h, (e) + 3)
#if VL == 16
#define LANES(F, h)                                                                                \
    { LANES4(F, h, 0), LANES4(F, h, 4), LANES4(F, h, 8), LANES4(F, h, 12) }
#define ROUND_MASKS(F)                                                                             \
    { LANES(F, 8), LANES(F, 4), LANES(F, 2), LANES(F, 1) }
#elif VL == 8
#define LANES(F, h)                                                                                \
    { LANES4(F, h, 0), LANES4(F, h, 4) }
#define ROUND_MASKS(F)                                                                             \
    { LANES(F, 4), LANES(F, 2), LANES(F, 1) }
#else
#define LANES(F, h)                                                                                \
    { LANES4(F, h, 0) }
#define ROUND_MASKS(F)                                                                             \
    { LANES(F, 2), LANES(F, 1) }
#endif
static const transpose_masks masks = {.lo = ROUND_MASKS(MASK_LO), .hi = ROUND_MASKS(MASK_HI)};

static inline __attribute__((always_inline)) void transpose_block(rg_convvec r[VL],
                                                                  const transpose_masks *m) {
#pragma GCC unroll 4
    for (int k = 0; k < ROUNDS; k++) {
        const int h = VL >> (k + 1);
        const rg_convidx lo = m->lo[k], hi = m->hi[k];
#pragma GCC unroll 16
        for (int i = 0; i < VL; i++) {
            if (i & h) continue;
            rg_convvec x = r[i], y = r[i + h];
#if defined(__clang__)
            for (int e = 0; e < VL; e++) {
                r[i][e] = lo[e] < VL ? x[lo[e]] : y[lo[e] - VL];
                r[i + h][e] = hi[e] < VL ? x[hi[e]] : y[hi[e] - VL];
            }
#else
            r[i] = __builtin_shuffle(x, y, lo);
            r[i + h] = __builtin_shuffle(x, y, hi);
#endif
        }
    }
}

/* What a transposition does on the way (rg_conv_transpose and its variants in conv2d_impl.h). */
typedef struct {
    const float *bias; /* dst += bias[column], or NULL */
    float beta;        /* dst += beta * old dst; 0 never reads dst */
    float *sums;       /* sums[row] += the row's (masked) values, or NULL */
    const float *mask; /* laid out as src: a value counts only where mask > 0 (NULL: all count) */
    bool relu;         /* dst = max(0, dst) last, as rg_k_relu */
    const int32_t *dst_row; /* source column j goes to destination row dst_row[j] (NULL: row j) */
} transpose_opts;

/* mask <= 0 ? 0 : v, as rg_k_relu_grad(mask, v) (NaN in the mask keeps v) */
static inline __attribute__((always_inline)) rg_convvec masked(rg_convvec v, rg_convvec mask) {
    return (rg_convvec)((rg_convidx)v & ~(rg_convidx)(mask <= 0.0f));
}

/* v < 0 ? 0 : v, as rg_k_relu (NaN and -0 pass) */
static inline __attribute__((always_inline)) rg_convvec relu(rg_convvec v) {
    return (rg_convvec)((rg_convidx)v & ~(rg_convidx)(v < 0.0f));
}

/* How far ahead, in floats along a row, a block asks for the lines it will read (and write) a few
 * blocks later. A block touches VL source rows (and VL mask rows) and VL destination rows, each a
 * separate stream of whole lines: 16-48 streams at once, more than the hardware prefetchers
 * follow, so without help every block waited for its lines. Four lines ahead took 4% off the
 * CNN's step on Zen 5 with the AVX-512 copy (one and two threads) and 2% with the AVX2 one; 2, 8
 * and 16 lines ahead did less (docs/PERFORMANCE.md). A prefetch never faults, so the rows' ends
 * need no care. */
#define PREFETCH_AHEAD (4 * 64 / (int)sizeof(float))

/* The first n < VL lanes of a vector from p / into p, touching no float past them. */
#if defined(__AVX2__) && !defined(__AVX512F__)
static const rg_convidx lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
#endif
static inline __attribute__((always_inline)) rg_convvec load_first(const float *p, int n) {
#if defined(__AVX512F__)
    return (rg_convvec)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#elif defined(__AVX2__)
    return (rg_convvec)_mm256_maskload_ps(p, (__m256i)(lane_index < n));
#else
    rg_convvec v = {0};
    for (int e = 0; e < n; e++) v[e] = p[e];
    return v;
#endif
}

static inline __attribute__((always_inline)) void store_first(float *p, rg_convvec v, int n) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
#elif defined(__AVX2__)
    _mm256_maskstore_ps(p, (__m256i)(lane_index < n), (__m256)v);
#else
    for (int e = 0; e < n; e++) p[e] = v[e];
#endif
}

/* A block of VL columns and ri <= VL rows; sums, mask and bias already point at its rows and
 * columns. A full block (ri == VL, a constant at the call) loads and stores whole vectors. A block
 * of ri < VL whole rows at the matrix's bottom edge (without sums or mask: those keep
 * transpose_edge's order, which rg_conv_panel_sums repeats) loads the rows present, zero for the
 * rest, and writes the first ri lanes of each destination row. The filter pass's last
 * transposition (R*S = 9 rows into dw) is all such edges, and so are the last 4 pixels of every
 * 14x14 output: element by element, these transpositions took a fifth to a third more time (perf,
 * Zen 5: 1.5% of ResNet-50's 28->14 3x3 filter pass against 1.2%, 0.8% of ResNet-18's 14x14 3x3
 * forward against 0.5-0.6%). Below EDGE_ROWS_MIN rows the shuffles of a whole block cost more
 * than the elements they move. */
#define EDGE_ROWS_MIN 4
static inline __attribute__((always_inline)) void
transpose_block_at(int ri, const float *src, int64_t lds, float *dst, int64_t ldd,
                   const transpose_opts *o, const transpose_masks *m) {
    rg_convvec r[VL], total = {0};
    for (int i = 0; i < VL; i++) {
        if (i >= ri) {
            r[i] = (rg_convvec){0};
            continue;
        }
        r[i] = *(const rg_convvec *)(src + i * lds);
        __builtin_prefetch(src + i * lds + PREFETCH_AHEAD);
        if (o->mask) {
            r[i] = masked(r[i], *(const rg_convvec *)(o->mask + i * lds));
            __builtin_prefetch(o->mask + i * lds + PREFETCH_AHEAD);
        }
    }
    transpose_block(r, m);
    for (int j = 0; j < VL; j++) {
        rg_convvec v = r[j];
        if (o->sums) total += v; /* r[j] holds column j of the source rows: their sum adds up */
        if (o->bias) v += o->bias[j];
        float *d = dst + (o->dst_row ? o->dst_row[j] : j) * ldd;
        if (o->beta != 0.0f) v += o->beta * (ri == VL ? *(const rg_convvec *)d : load_first(d, ri));
        if (o->relu) v = relu(v);
        __builtin_prefetch(d + PREFETCH_AHEAD, 1);
        if (ri == VL)
            *(rg_convvec *)d = v;
        else
            store_first(d, v, ri);
    }
    if (o->sums) *(rg_convvec *)o->sums += total;
}

/* A partial block at the matrix's edge: ri x cj elements, one at a time. */
static void transpose_edge(int64_t ri, int64_t cj, const float *src, int64_t lds, float *dst,
                           int64_t ldd, const transpose_opts *o) {
    for (int64_t j = 0; j < cj; j++) {
        float *d = dst + (o->dst_row ? o->dst_row[j] : j) * ldd;
        for (int64_t i = 0; i < ri; i++) {
            float v = src[i * lds + j];
            if (o->mask) v = rg_k_relu_grad(o->mask[i * lds + j], v);
            if (o->sums) o->sums[i] += v;
            if (o->bias)
                v += o->bias[j]; /* as transpose_block_at: no + 0.0f, which turns -0 to +0 */
            if (o->beta != 0.0f) v += o->beta * d[i];
            d[i] = o->relu ? rg_k_relu(v) : v;
        }
    }
}

/* The options for the block whose source starts at row i0 and column j0. */
static inline __attribute__((always_inline)) transpose_opts at(const transpose_opts *o, int64_t i0,
                                                               int64_t j0, int64_t lds) {
    transpose_opts b = *o;
    b.bias = o->bias ? o->bias + j0 : NULL;
    b.sums = o->sums ? o->sums + i0 : NULL;
    b.mask = o->mask ? o->mask + i0 * lds + j0 : NULL;
    b.dst_row = o->dst_row ? o->dst_row + j0 : NULL;
    return b;
}

static inline __attribute__((always_inline)) void transpose(int64_t rows, int64_t cols,
                                                            const float *src, int64_t lds,
                                                            float *dst, int64_t ldd,
                                                            transpose_opts o) {
    int64_t rfull = rows / VL * VL, cfull = cols / VL * VL;
    int64_t row_step = o.dst_row ? 0 : ldd; /* with dst_row the options hold the rows */
    for (int64_t i0 = 0; i0 < rfull; i0 += VL) {
        for (int64_t j0 = 0; j0 < cfull; j0 += VL) {
            transpose_opts b = at(&o, i0, j0, lds);
            transpose_block_at(VL, src + i0 * lds + j0, lds, dst + j0 * row_step + i0, ldd, &b,
                               &masks);
        }
        transpose_opts e = at(&o, i0, cfull, lds);
        transpose_edge(VL, cols - cfull, src + i0 * lds + cfull, lds, dst + cfull * row_step + i0,
                       ldd, &e);
    }
    int64_t j0 = 0;
    if (!o.sums && !o.mask && rows - rfull >= EDGE_ROWS_MIN)
        for (; j0 < cfull; j0 += VL) {
            transpose_opts b = at(&o, rfull, j0, lds);
            transpose_block_at((int)(rows - rfull), src + rfull * lds + j0, lds,
                               dst + j0 * row_step + rfull, ldd, &b, &masks);
        }
    transpose_opts e = at(&o, rfull, j0, lds);
    transpose_edge(rows - rfull, cols - j0, src + rfull * lds + j0, lds,
                   dst + j0 * row_step + rfull, ldd, &e);
}

/* Each variant a separate copy, so that the compiler drops the options it does not use from the
 * inner loop. */
void rg_conv_transpose(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                       int64_t ldd, const float *bias, float beta) {
    transpose(rows, cols, src, lds, dst, ldd, (transpose_opts){.bias = bias, .beta = beta});
}

void rg_conv_transpose_rows(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                            int64_t ldd, const int32_t *dst_row) {
    transpose(rows, cols, src, lds, dst, ldd, (transpose_opts){.dst_row = dst_row});
}

void rg_conv_transpose_relu(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                            int64_t ldd, const float *bias) {
    transpose(rows, cols, src, lds, dst, ldd, (transpose_opts){.bias = bias, .relu = true});
}

void rg_conv_transpose_sum(int64_t rows, int64_t cols, const float *src, const float *mask,
                           int64_t lds, float *dst, int64_t ldd, float *sums) {
    if (mask)
        transpose(rows, cols, src, lds, dst, ldd, (transpose_opts){.sums = sums, .mask = mask});
    else
        transpose(rows, cols, src, lds, dst, ldd, (transpose_opts){.sums = sums});
}

/* int32 lanes read and written through a type that may alias them, moved as float vectors */
typedef int32_t i32_vec_alias
    __attribute__((vector_size(VL * sizeof(int32_t)), aligned(4), may_alias));

void rg_conv_transpose_i32(int64_t rows, int64_t cols, const int32_t *src, int64_t lds,
                           int32_t *dst, int64_t ldd) {
    int64_t rfull = rows / VL * VL, cfull = cols / VL * VL;
    for (int64_t i0 = 0; i0 < rfull; i0 += VL)
        for (int64_t j0 = 0; j0 < cfull; j0 += VL) {
            rg_convvec r[VL];
            for (int i = 0; i < VL; i++)
                r[i] = (rg_convvec)(*(const i32_vec_alias *)(src + (i0 + i) * lds + j0));
            transpose_block(r, &masks); /* shuffles only: the bits move unchanged */
            for (int j = 0; j < VL; j++)
                *(i32_vec_alias *)(dst + (j0 + j) * ldd + i0) = (i32_vec_alias)r[j];
        }
    for (int64_t i = 0; i < rows; i++) /* the edges */
        for (int64_t j = i < rfull ? cfull : 0; j < cols; j++) dst[j * ldd + i] = src[i * lds + j];
}

void rg_conv_transpose_narrow(int64_t rows, int64_t cols, const float *src, int64_t lds,
                              const float *src_end, float *dst, int64_t ldd,
                              const int32_t *dst_row) {
    transpose_opts o = {.dst_row = dst_row};
    if (cols >= VL) {
        transpose(rows, cols, src, lds, dst, ldd, o);
        return;
    }
    int64_t i0 = 0;
    /* Whole vectors from each row, reading into the rows after it (src_end bounds the last).
     * The source is one stream (a filter's weights, usually from memory): its lines four blocks
     * ahead are asked for now, which took a quarter off this loop in ResNet-18's step. */
    for (; i0 + VL <= rows && src + (i0 + VL - 1) * lds + VL <= src_end; i0 += VL) {
        rg_convvec r[VL];
        for (int64_t f = 0; f < VL * lds; f += 64 / (int64_t)sizeof(float))
            __builtin_prefetch(src + (i0 + 4 * VL) * lds + f);
        for (int i = 0; i < VL; i++) r[i] = *(const rg_convvec *)(src + (i0 + i) * lds);
        transpose_block(r, &masks);
        for (int64_t j = 0; j < cols; j++)
            *(rg_convvec *)(dst + (dst_row ? dst_row[j] : j) * ldd + i0) = r[j];
    }
    transpose_edge(rows - i0, cols, src + i0 * lds, lds, dst + i0, ldd, &o);
}

/* ---- a fused 2x2 max-pool, channels-last ---- */

/* v replaces best where v > best or v is NaN: maxpool2d.c's takes_over, lane by lane */
static inline __attribute__((always_inline)) rg_convidx takes_over_v(rg_convvec v,
                                                                     rg_convvec best) {
    return (v > best) | (v != v);
}

static inline __attribute__((always_inline)) rg_convvec select_v(rg_convidx m, rg_convvec a,
                                                                 rg_convvec b) {
    return (rg_convvec)(((rg_convidx)a & m) | ((rg_convidx)b & ~m));
}

void rg_conv_pool2x2_nhwc(int64_t p, int64_t q, int64_t k_count, int64_t kpad, const float *src,
                          const float *bias, bool relu_on, float *out, int32_t *argmax) {
    int64_t pp = p / 2, qq = q / 2, kv = (k_count + VL - 1) / VL * VL; /* the vectors with data */
    for (int64_t i = 0; i < pp; i++)
        for (int64_t j = 0; j < qq; j++) {
            int32_t first = (int32_t)(2 * i * q + 2 * j); /* the window's first pixel */
            const rg_convidx pixel[4] = {(rg_convidx){0} + first, (rg_convidx){0} + first + 1,
                                         (rg_convidx){0} + first + (int32_t)q,
                                         (rg_convidx){0} + first + (int32_t)q + 1};
            const float *w0 = src + first * kpad;
            const float *at[4] = {w0, w0 + kpad, w0 + q * kpad, w0 + (q + 1) * kpad};
            float *o = out + (i * qq + j) * kpad;
            int32_t *a = argmax + (i * qq + j) * kpad;
            for (int64_t k = 0; k < kv; k += VL) {
                rg_convvec best = {0};
                rg_convidx won = pixel[0];
                for (int n = 0; n < 4; n++) { /* row-major window order, as maxpool2d.c */
                    rg_convvec v = *(const rg_convvec *)(at[n] + k);
                    if (bias) v += *(const rg_convvec *)(bias + k); /* none: no + 0 (-0 stays) */
                    if (relu_on) v = relu(v);
                    if (n == 0) {
                        best = v;
                        continue;
                    }
                    rg_convidx m = takes_over_v(v, best);
                    best = select_v(m, v, best), won = (pixel[n] & m) | (won & ~m);
                }
                *(rg_convvec *)(o + k) = best;
                *(i32_vec_alias *)(a + k) = won;
            }
        }
}

void rg_conv_unpool2x2_nhwc(int64_t p, int64_t q, int64_t kpad, const float *dm,
                            const int32_t *argmax, int64_t npix, float *dyt) {
    int64_t pp = p / 2, qq = q / 2, panel = npix * RG_CONV_NR;
    for (int64_t i = 0; i < pp; i++)
        for (int64_t j = 0; j < qq; j++) {
            int64_t o = i * qq + j;
            int32_t first = (int32_t)(2 * i * q + 2 * j); /* the window's first pixel */
            const int32_t pix[4] = {first, first + 1, first + (int32_t)q, first + (int32_t)q + 1};
            for (int64_t k = 0; k < kpad; k += VL) {
                rg_convvec g = *(const rg_convvec *)(dm + o * kpad + k);
                rg_convidx a = *(const i32_vec_alias *)(argmax + o * kpad + k);
                float *d = dyt + k / RG_CONV_NR * panel + k % RG_CONV_NR;
                for (int n = 0; n < 4; n++) /* g where it came from, +0 at the other three */
                    *(rg_convvec *)(d + pix[n] * RG_CONV_NR) =
                        (rg_convvec)((rg_convidx)g & (a == pix[n]));
            }
        }
    for (int64_t jp = 0; jp < kpad / RG_CONV_NR; jp++) { /* pixels no window covers: 0 */
        float *d = dyt + jp * panel;
        for (int64_t h = 0; h < p; h++)
            for (int64_t w = h < 2 * pp ? 2 * qq : 0; w < q; w++)
                memset(d + (h * q + w) * RG_CONV_NR, 0, RG_CONV_NR * sizeof(float));
    }
}

void rg_conv_panel_sums(int64_t kn, int64_t pq, const float *dyt, float *sums) {
    int64_t rfull = kn / VL * VL, cfull = pq / VL * VL;
    for (int64_t i0 = 0; i0 < rfull; i0 += VL) {
        for (int64_t j0 = 0; j0 < cfull; j0 += VL) { /* transpose_block_at's block totals */
            rg_convvec total = {0};
            for (int64_t j = 0; j < VL; j++)
                total += *(const rg_convvec *)(dyt + (j0 + j) * RG_CONV_NR + i0);
            *(rg_convvec *)(sums + i0) += total;
        }
        for (int64_t j = cfull; j < pq; j++) /* transpose_edge's columns, one at a time */
            *(rg_convvec *)(sums + i0) += *(const rg_convvec *)(dyt + j * RG_CONV_NR + i0);
    }
    for (int64_t j = 0; j < pq; j++) /* transpose_edge's rows */
        for (int64_t i = rfull; i < kn; i++) sums[i] += dyt[j * RG_CONV_NR + i];
}

/* ---- the padded channels-last image ---- */

rg_conv_geom rg_conv_geom_of(const rg_conv2d_shape *s) {
    rg_conv_geom g;
    g.hp = s->h + 2 * s->pad_h, g.wp = s->w + 2 * s->pad_w;
    g.pq = s->p * s->q, g.crs = s->c * s->r * s->s;
    g.xpad_len = g.hp * g.wp * s->c;
    RG_CHECK(g.xpad_len < INT32_MAX,
             "conv2d: one padded image of %lld floats is too large for "
             "32-bit offsets",
             (long long)g.xpad_len);
    return g;
}

void rg_conv_to_padded_nhwc(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *x,
                            float *xpad) {
    int64_t c = s->c, row = g->wp * c, wc = s->w * c;
    float *body = xpad + s->pad_h * row;
    /* one transposition of the whole image into the top of the body (whole vector blocks, even
     * when a row is narrower than a vector), then each row slides right to its padded place,
     * last row first so that none is overwritten before it has moved */
    rg_conv_transpose(c, s->h * s->w, x, s->h * s->w, body, c, NULL, 0.0f);
    if (s->pad_w > 0)
        for (int64_t h = s->h - 1; h >= 0; h--) {
            float *d = body + h * row;
            memmove(d + s->pad_w * c, body + h * wc, (size_t)wc * sizeof(float));
            memset(d, 0, (size_t)(s->pad_w * c) * sizeof(float));
            memset(d + s->pad_w * c + wc, 0, (size_t)(row - s->pad_w * c - wc) * sizeof(float));
        }
    memset(xpad, 0, (size_t)(s->pad_h * row) * sizeof(float)); /* top and bottom */
    memset(body + s->h * row, 0, (size_t)(g->xpad_len - (s->pad_h + s->h) * row) * sizeof(float));
}

int32_t *rg_conv_window_offsets(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t n) {
    int32_t *off = (int32_t *)rg_conv_scratch(n);
    for (int64_t i = 0; i < n; i++) {
        int64_t t = i < g->crs ? i : g->crs - 1; /* spare entries repeat the last */
        int64_t c = t % s->c, tap = t / s->c;
        off[i] = (int32_t)(rg_conv_tap_offset(s, g, tap / s->s, tap % s->s) + c);
    }
    return off;
}

/* Rows (output pixels) a chunk should give a product at least, and the most scratch it may take. */
#define CHUNK_MIN_PIXELS 256
#define CHUNK_MAX_FLOATS (1 << 20)

rg_conv_chunks rg_conv_chunks_new(const rg_conv2d_shape *s, const rg_conv_geom *g) {
    rg_conv_chunks ch = {.images = 1, .count = s->n};
    int64_t nthreads = omp_get_max_threads(), per_image = g->xpad_len + g->pq * s->k;
    int64_t want = (CHUNK_MIN_PIXELS + g->pq - 1) / (g->pq > 0 ? g->pq : 1);
    int64_t fit = CHUNK_MAX_FLOATS / (per_image > 0 ? per_image : 1);
    int64_t share = (s->n + nthreads - 1) / nthreads; /* no chunk larger than a thread's share */
    int64_t gmax = want < fit ? want : fit;
    if (gmax > share) gmax = share;
    if (gmax > 1 && s->n > 0) {
        /* as many chunks as that needs, rounded up to a multiple of the thread count */
        int64_t count = (s->n + gmax - 1) / gmax;
        if (count % nthreads) count += nthreads - count % nthreads;
        ch.images = (s->n + count - 1) / count;
        ch.count = (s->n + ch.images - 1) / ch.images;
    }
    RG_CHECK(ch.images * g->xpad_len < INT32_MAX,
             "conv2d: %lld padded images of %lld floats are "
             "too large for 32-bit offsets",
             (long long)ch.images, (long long)g->xpad_len);
    ch.npix = ch.images * g->pq;
    ch.pix = (int32_t *)rg_conv_scratch(ch.npix);
    for (int64_t t = 0; t < ch.npix; t++)
        ch.pix[t] = (int32_t)(t / g->pq * g->xpad_len + rg_conv_pixel_offset(s, g, t % g->pq));
    return ch;
}

void rg_conv_chunks_free(rg_conv_chunks *ch) {
    rg_conv_scratch_free((float *)ch->pix, ch->npix);
}

float *rg_conv_scratch(int64_t floats) {
    float *p = rg_cpu_alloc((size_t)(floats > 0 ? floats : 1) * sizeof(float));
    RG_CHECK(p, "conv2d: out of host memory for %lld floats of scratch", (long long)floats);
    return p;
}

void rg_conv_scratch_free(float *p, int64_t floats) {
    rg_cpu_free(p, (size_t)(floats > 0 ? floats : 1) * sizeof(float));
}
