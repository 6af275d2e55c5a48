/* maxpool2d.c — max pooling on the CPU, one (n, c) plane per iteration.
 *
 * Each output remembers the flat index (h*W + w) of its maximum within the plane, so backward
 * sends dy there. The comparison is `v > best || v != v`: ties keep the first maximum in row-major
 * window order (as PyTorch does) and a NaN in the window wins, so it propagates.
 *
 * The common 2x2 window with stride 2 gets a loop without bounds checks whose comparisons the
 * compiler turns into SIMD selects (the AVX-512 copy: by hand, 16 outputs a vector, below);
 * ResNet's 3x3 windows at stride 2 go separably, through each input row's three-column maxima
 * (pool3x3s2_plane; 8 outputs a vector by hand in the AVX2 and AVX-512 copies); other windows clip
 * their row and column ranges once per output instead of testing every tap. */
#include <stdlib.h>

#include "tensor/cpu/cpu.h"

/* Output rows are short (12 outputs in the CNN), shorter than one AVX-512 vector of 16 floats,
 * so the compiler's widest vectors would leave every row to the scalar remainder; 4 floats per
 * vector keep the loop vectorised whatever the instruction set. */
#define RG_POOL_SIMD _Pragma("omp simd simdlen(4)")

/* Whether v replaces the current best (see above). */
static inline bool takes_over(float v, float best) {
    return v > best || v != v;
}

/* How far ahead, in floats, the forward asks for the input rows' lines (a prefetch never faults,
 * so the tensor's end needs no care) and the backward for the lines it will write. The hardware's
 * own prefetching left both at 56-73% of a copy on Zen 5 (the CNN's 128x64x24x24 pooling, 28 MB;
 * `ringgrad-bench --only membw`, medians of 5-7 runs); 4 KiB ahead took the forward to 84% (2 KiB:
 * 65%, 8 KiB: 78%), 8 KiB ahead of the backward's writes to 79% (2 KiB: 66%, 4 KiB: 76%).
 * Prefetching the backward's reads as well (dy and argmax) made it slower. */
#define READ_AHEAD 1024
#define WRITE_AHEAD 2048

#if defined(__AVX512F__)
#include <immintrin.h>

/* The AVX-512 copy of the 2x2 rows: 16 outputs a vector (masked at the row's end), the two input
 * rows loaded as 32 consecutive floats each and split into their even and odd columns with one
 * two-source permute apiece. GCC's own code for the loop below used 4-float vectors with strided
 * loads and reached only half a copy's speed on Zen 5. Same comparisons, same result to the bit:
 * v takes over when v > best (ordered) or v is NaN. */
static inline __mmask16 takes_over_v(__m512 v, __m512 best) {
    return _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}

/* Masks for a chunk of nq (1..16) outputs: mq over the outputs, lo and hi over the 2*nq inputs. */
static inline void chunk_masks(int64_t nq, __mmask16 *mq, __mmask16 *lo, __mmask16 *hi) {
    *mq = (__mmask16)((1u << nq) - 1u);
    *lo = nq >= 8 ? (__mmask16)0xFFFF : (__mmask16)((1u << (2 * nq)) - 1u);
    *hi = nq > 8 ? (__mmask16)((1u << (2 * nq - 16)) - 1u) : (__mmask16)0;
}

/* 0, 2, 4, ..., 30: the even input columns of 16 outputs (and their offsets 2q in a row) */
static inline __m512i even_lanes(void) {
    return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

/* Stores the first n (0..16) lanes of v at p, without masked stores: on Zen 5 a masked 512-bit
 * store ran at a third of a copy's speed (the backward below: 31% of a copy with them). Whole
 * vectors of 16, 8 and 4 lanes, then single floats. */
static inline void store_prefix(float *p, __m512 v, int64_t n) {
    if (n == 16) {
        _mm512_storeu_ps(p, v);
        return;
    }
    __m256 h = _mm512_castps512_ps256(v);
    if (n >= 8) {
        _mm256_storeu_ps(p, h);
        h = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        p += 8, n -= 8;
    }
    __m128 x = _mm256_castps256_ps128(h);
    if (n >= 4) {
        _mm_storeu_ps(p, x);
        x = _mm256_extractf128_ps(h, 1);
        p += 4, n -= 4;
    }
    for (int64_t i = 0; i < n; i++) {
        _mm_store_ss(p + i, x);
        x = _mm_shuffle_ps(x, x, _MM_SHUFFLE(0, 3, 2, 1));
    }
}

static void pool2x2_row(int64_t q_count, const float *restrict r0, int64_t w, int32_t base,
                        const float *end, float *restrict y, int32_t *restrict am) {
    const float *r1 = r0 + w;
    const __m512i even = even_lanes();
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t q0 = 0; q0 < q_count; q0 += 16) {
        __mmask16 mq, lo, hi;
        chunk_masks(q_count - q0 < 16 ? q_count - q0 : 16, &mq, &lo, &hi);
        const float *a = r0 + 2 * q0, *b = r1 + 2 * q0;
        __m512 a0, a1, b0, b1;
        /* whole vectors where the tensor allows: masked loads that cross a cache line cost 3x
         * on Zen 5 */
        if (b + 32 <= end) {
            __builtin_prefetch(a + READ_AHEAD), __builtin_prefetch(a + READ_AHEAD + 16);
            __builtin_prefetch(b + READ_AHEAD), __builtin_prefetch(b + READ_AHEAD + 16);
            a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + 16);
            b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        } else { /* the input's last row: not past its end */
            a0 = _mm512_maskz_loadu_ps(lo, a), a1 = _mm512_maskz_loadu_ps(hi, a + 16);
            b0 = _mm512_maskz_loadu_ps(lo, b), b1 = _mm512_maskz_loadu_ps(hi, b + 16);
        }
        __m512i at0 = _mm512_add_epi32(_mm512_set1_epi32(base + (int32_t)(2 * q0)), even);
        __m512 best = _mm512_permutex2var_ps(a0, even, a1), v;
        __m512i at = at0;
        __mmask16 k;
        v = _mm512_permutex2var_ps(a0, odd, a1);
        k = takes_over_v(v, best);
        best = _mm512_mask_mov_ps(best, k, v);
        at = _mm512_mask_add_epi32(at, k, at0, _mm512_set1_epi32(1));
        v = _mm512_permutex2var_ps(b0, even, b1);
        k = takes_over_v(v, best);
        best = _mm512_mask_mov_ps(best, k, v);
        at = _mm512_mask_add_epi32(at, k, at0, _mm512_set1_epi32((int32_t)w));
        v = _mm512_permutex2var_ps(b0, odd, b1);
        k = takes_over_v(v, best);
        best = _mm512_mask_mov_ps(best, k, v);
        at = _mm512_mask_add_epi32(at, k, at0, _mm512_set1_epi32((int32_t)w + 1));
        /* masked stores here, unlike backward: with store_prefix this loop measured 51-54% of
         * a copy against 64-68% (Zen 5) */
        _mm512_mask_storeu_ps(y + q0, mq, best);
        _mm512_mask_storeu_epi32(am + q0, mq, at);
    }
}
#else
/* One output row of a 2x2, stride-2, unpadded pooling: rows r0 and r1 = r0 + w of the input. */
static void pool2x2_row(int64_t q_count, const float *restrict r0, int64_t w, int32_t base,
                        const float *end, float *restrict y, int32_t *restrict am) {
    (void)end; /* only the AVX-512 copy reads whole vectors */
    const float *r1 = r0 + w;
    for (int64_t f = 0; f < 2 * w; f += 16) __builtin_prefetch(r0 + READ_AHEAD + f);
    RG_POOL_SIMD
    for (int64_t q = 0; q < q_count; q++) {
        float best = r0[2 * q], v;
        int32_t at = base + (int32_t)(2 * q);
        v = r0[2 * q + 1];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(2 * q + 1);
        v = r1[2 * q];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(w + 2 * q);
        v = r1[2 * q + 1];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(w + 2 * q + 1);
        y[q] = best, am[q] = at;
    }
}
#endif

/* One plane, any window: clip the window to the input, then scan it (the first tap, then
 * selects: a branch per tap mispredicts on random data). */
static void pool_plane(const rg_pool2d_shape *s, const float *xp, float *yp, int32_t *ap) {
    for (int64_t p = 0; p < s->p; p++) {
        int64_t h0 = p * s->stride_h - s->pad_h;
        int64_t r_lo = h0 < 0 ? -h0 : 0, r_hi = s->h - h0 < s->kernel_h ? s->h - h0 : s->kernel_h;
        for (int64_t q = 0; q < s->q; q++) {
            int64_t w0 = q * s->stride_w - s->pad_w;
            int64_t t_lo = w0 < 0 ? -w0 : 0;
            int64_t t_hi = s->w - w0 < s->kernel_w ? s->w - w0 : s->kernel_w;
            int32_t at = (int32_t)((h0 + r_lo) * s->w + w0 + t_lo);
            float best = xp[at];
            for (int64_t r = r_lo; r < r_hi; r++) {
                const float *row = xp + (h0 + r) * s->w + w0;
                for (int64_t t = r == r_lo ? t_lo + 1 : t_lo; t < t_hi; t++) {
                    bool k = takes_over(row[t], best);
                    best = k ? row[t] : best;
                    at = k ? (int32_t)((h0 + r) * s->w + w0 + t) : at;
                }
            }
            yp[p * s->q + q] = best;
            ap[p * s->q + q] = at;
        }
    }
}

/* 3x3 windows at stride 2 (ResNet's stem), separably: each input row's maximum over every
 * window's three columns (row_max), then each output's over its window's three rows. Folding
 * takes_over over the rows' results gives what folding it over the nine taps in row-major order
 * gives (no NaN: the first row holding the maximum, at its first column; a NaN: the last NaN), so
 * values and argmax are the scan's to the bit; five compares an output instead of eight, all in
 * loops the compiler vectorises, and clipped windows (the padding) take the same loops with fewer
 * columns or rows. hb/hc: three rows of Q maxima and their columns, a ring by input row.
 *
 * row_max_clipped: one output column q whose window the padding clips. */
static void row_max_clipped(const rg_pool2d_shape *s, const float *xr, int64_t q, float *hb,
                            int32_t *hc) {
    int64_t w0 = 2 * q - s->pad_w, t_lo = w0 < 0 ? -w0 : 0, t_hi = s->w - w0 < 3 ? s->w - w0 : 3;
    float best = xr[w0 + t_lo];
    int32_t at = (int32_t)(w0 + t_lo);
    for (int64_t t = t_lo + 1; t < t_hi; t++) {
        bool k = takes_over(xr[w0 + t], best);
        best = k ? xr[w0 + t] : best;
        at = k ? (int32_t)(w0 + t) : at;
    }
    hb[q] = best, hc[q] = at;
}

#if defined(__AVX2__)
#include <immintrin.h>

/* The AVX2 (and AVX-512) copies' 3x3 rows, 8 outputs a vector: GCC's code for the loops below
 * (4-float vectors, strided loads, a scalar tail) ran ResNet-18's stem pooling (32 x 64 x
 * 32x32 at 64 px) at 1.9-2.1 ns an input float, 58 instructions an output, on Zen 3; these at
 * 0.9-1.0 ns (4.1 -> 2.0 ms; at 224 px, 112x112 planes, 21.9 -> 13.5 ms), 43 instructions an
 * output. Same comparisons as takes_over, so the same values and argmax to the bit. */
static inline __m256 takes_over8(__m256 v, __m256 best) {
    return _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* The even floats of a (lanes 0-3 of the result) and of b (4-7): a[0], a[2], ..., b[6]; with
 * odd, a[1], a[3], ..., b[7]. */
static inline __m256 evens8(__m256 a, __m256 b) {
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
}
static inline __m256 odds8(__m256 a, __m256 b) {
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

/* Outputs q0 ... q1 - 1 of row_max, all inside, 8 at a time (the last 8 overlapping the ones
 * before, when there are at least 8); returns where it stopped. Output q + i reads columns
 * c + 2i, + 1, + 2 (c = 2q - pad): the even and odd floats of c ... c + 15 and the odd ones of
 * c + 1 ... c + 16, which is the last column of output q + 7, so no load reads past the row. */
static int64_t row_max8(const rg_pool2d_shape *s, const float *restrict xr, int64_t q0, int64_t q1,
                        float *restrict hb, int32_t *restrict hc) {
    const __m256i two = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i one = _mm256_set1_epi32(1), twos = _mm256_set1_epi32(2);
    int64_t q = q0;
    for (; q < q1; q += 8) {
        if (q + 8 > q1) { /* the last 8, again in part, rather than a scalar tail */
            if (q1 - q0 < 8) break;
            q = q1 - 8;
        }
        int64_t c = 2 * q - s->pad_w;
        const float *p = xr + c;
        __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
        __m256 best = evens8(a, b), v = odds8(a, b);
        __m256i at = _mm256_add_epi32(_mm256_set1_epi32((int32_t)c), two);
        __m256 k = takes_over8(v, best);
        best = _mm256_blendv_ps(best, v, k);
        __m256i at1 = _mm256_add_epi32(at, one);
        __m256i atk = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(at1), k));
        v = odds8(_mm256_loadu_ps(p + 1), _mm256_loadu_ps(p + 9));
        k = takes_over8(v, best);
        best = _mm256_blendv_ps(best, v, k);
        atk = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(atk), _mm256_castsi256_ps(_mm256_add_epi32(at, twos)), k));
        _mm256_storeu_ps(hb + q, best);
        _mm256_storeu_si256((__m256i *)(hc + q), atk);
    }
    return q < q1 ? q : q1;
}

/* y[q], a[q] = br[q], row + cr[q] where br[q] takes over y[q], for q < n; 8 at a time, then the
 * rest; returns where it stopped. */
static int64_t fold_row8(int64_t n, const float *restrict br, const int32_t *restrict cr,
                         int32_t row, float *restrict y, int32_t *restrict a) {
    const __m256i rv = _mm256_set1_epi32(row);
    int64_t q = 0;
    for (; q + 8 <= n; q += 8) {
        __m256 best = _mm256_loadu_ps(y + q), v = _mm256_loadu_ps(br + q);
        __m256 k = takes_over8(v, best);
        __m256i at = _mm256_add_epi32(rv, _mm256_loadu_si256((const __m256i *)(cr + q)));
        _mm256_storeu_ps(y + q, _mm256_blendv_ps(best, v, k));
        _mm256_storeu_si256((__m256i *)(a + q),
                            _mm256_castps_si256(_mm256_blendv_ps(
                                _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(a + q))),
                                _mm256_castsi256_ps(at), k)));
    }
    return q;
}
#else
static int64_t row_max8(const rg_pool2d_shape *s, const float *restrict xr, int64_t q0, int64_t q1,
                        float *restrict hb, int32_t *restrict hc) {
    (void)s, (void)xr, (void)q1, (void)hb, (void)hc;
    return q0;
}
static int64_t fold_row8(int64_t n, const float *restrict br, const int32_t *restrict cr,
                         int32_t row, float *restrict y, int32_t *restrict a) {
    (void)n, (void)br, (void)cr, (void)row, (void)y, (void)a;
    return 0;
}
#endif

static void row_max(const rg_pool2d_shape *s, const float *restrict xr, float *restrict hb,
                    int32_t *restrict hc) {
    /* the outputs whose three columns are all inside: 2q - pad >= 0 and 2q - pad + 3 <= w */
    int64_t qa = (s->pad_w + 1) / 2,
            qb = s->w - 3 + s->pad_w >= 0 ? (s->w - 3 + s->pad_w) / 2 + 1 : 0;
    if (qb > s->q) qb = s->q;
    if (qa > qb) qa = qb;
    for (int64_t q = 0; q < qa; q++) row_max_clipped(s, xr, q, hb, hc);
    for (int64_t q = qb; q < s->q; q++) row_max_clipped(s, xr, q, hb, hc);
    int64_t q8 = row_max8(s, xr, qa, qb, hb, hc);
    RG_POOL_SIMD
    for (int64_t q = q8; q < qb; q++) {
        int64_t c = 2 * q - s->pad_w;
        float best = xr[c], v1 = xr[c + 1], v2 = xr[c + 2];
        int32_t at = (int32_t)c;
        bool k1 = takes_over(v1, best);
        best = k1 ? v1 : best, at = k1 ? (int32_t)c + 1 : at;
        bool k2 = takes_over(v2, best);
        best = k2 ? v2 : best, at = k2 ? (int32_t)c + 2 : at;
        hb[q] = best, hc[q] = at;
    }
}

static void pool3x3s2_plane(const rg_pool2d_shape *s, const float *xp, float *yp, int32_t *ap,
                            float *hb, int32_t *hc) {
    int64_t done = -1; /* the last input row whose row_max is in the ring */
    for (int64_t p = 0; p < s->p; p++) {
        int64_t h0 = 2 * p - s->pad_h;
        int64_t r_lo = h0 < 0 ? -h0 : 0, r_hi = s->h - h0 < 3 ? s->h - h0 : 3;
        for (int64_t h = h0 + r_lo > done + 1 ? h0 + r_lo : done + 1; h < h0 + r_hi; h++)
            row_max(s, xp + h * s->w, hb + h % 3 * s->q, hc + h % 3 * s->q), done = h;
        const float *b0 = hb + (h0 + r_lo) % 3 * s->q;
        const int32_t *c0 = hc + (h0 + r_lo) % 3 * s->q;
        float *y = yp + p * s->q;
        int32_t *a = ap + p * s->q, base = (int32_t)((h0 + r_lo) * s->w);
        RG_POOL_SIMD
        for (int64_t q = 0; q < s->q; q++) y[q] = b0[q], a[q] = base + c0[q];
        for (int64_t r = r_lo + 1; r < r_hi; r++) {
            const float *br = hb + (h0 + r) % 3 * s->q;
            const int32_t *cr = hc + (h0 + r) % 3 * s->q;
            int32_t row = (int32_t)((h0 + r) * s->w);
            int64_t q8 = fold_row8(s->q, br, cr, row, y, a);
            RG_POOL_SIMD
            for (int64_t q = q8; q < s->q; q++) {
                bool k = takes_over(br[q], y[q]);
                y[q] = k ? br[q] : y[q];
                a[q] = k ? row + cr[q] : a[q];
            }
        }
    }
}

/* threads: share the planes out (OpenMP), or run them all on the calling thread */
static void forward(const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax,
                    bool threads) {
    int64_t planes = s->n * s->c, hw = s->h * s->w, pq = s->p * s->q;
    bool two_by_two = rg_cpu_pool_is_2x2(s);
    bool k3s2 = s->kernel_h == 3 && s->kernel_w == 3 && s->stride_h == 2 && s->stride_w == 2;
    const float *x_end = x + planes * hw;
#pragma omp parallel if (threads && planes * hw > RG_CPU_PAR_MIN)
    {
        /* pool3x3s2_plane's ring of three rows; without it, the general scan */
        float *hb = k3s2 ? malloc((size_t)(3 * s->q) * (sizeof(float) + sizeof(int32_t))) : NULL;
        int32_t *hc = hb ? (int32_t *)(hb + 3 * s->q) : NULL;
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++) {
            const float *xp = x + pl * hw;
            float *yp = y + pl * pq;
            int32_t *ap = argmax + pl * pq;
            if (hb) {
                pool3x3s2_plane(s, xp, yp, ap, hb, hc);
            } else if (two_by_two) {
                for (int64_t p = 0; p < s->p; p++)
                    pool2x2_row(s->q, xp + 2 * p * s->w, s->w, (int32_t)(2 * p * s->w), x_end,
                                yp + p * s->q, ap + p * s->q);
            } else {
                pool_plane(s, xp, yp, ap);
            }
        }
        free(hb);
    }
}

void rg_cpu_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax) {
    forward(s, x, y, argmax, true);
}

void rg_cpu_maxpool2d_forward_serial(const rg_pool2d_shape *s, const float *x, float *y,
                                     int32_t *argmax) {
    forward(s, x, y, argmax, false);
}

#if defined(__AVX512F__)
/* The AVX-512 copy of the row backward: each output's gradient goes to one of its four inputs,
 * the even and odd columns built a vector of outputs at a time and interleaved back into the
 * two input rows (see unpool2x2_row below for the plain loop; same arithmetic, mul then add). */
static inline void unpool_store(float *r, __m512 ev, __m512 od, __mmask16 lo, __mmask16 hi,
                                int64_t nq, float beta) {
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi = _mm512_add_epi32(ilo, _mm512_set1_epi32(8));
    __m512 x0 = _mm512_permutex2var_ps(ev, ilo, od), x1 = _mm512_permutex2var_ps(ev, ihi, od);
    if (beta != 0.0f) {
        const __m512 bv = _mm512_set1_ps(beta);
        x0 = _mm512_add_ps(x0, _mm512_mul_ps(bv, _mm512_maskz_loadu_ps(lo, r)));
        x1 = _mm512_add_ps(x1, _mm512_mul_ps(bv, _mm512_maskz_loadu_ps(hi, r + 16)));
    }
    store_prefix(r, x0, nq >= 8 ? 16 : 2 * nq);
    if (nq > 8) store_prefix(r + 16, x1, 2 * nq - 16);
}

static void unpool2x2_row(int64_t q_count, const float *restrict dy, const int32_t *restrict am,
                          int32_t base, int32_t w, float beta, const float *dy_end,
                          float *restrict r0, float *restrict r1) {
    const __m512i two_q = even_lanes();
    for (int64_t q0 = 0; q0 < q_count; q0 += 16) {
        int64_t nq = q_count - q0 < 16 ? q_count - q0 : 16;
        __mmask16 mq, lo, hi;
        chunk_masks(nq, &mq, &lo, &hi);
        __m512i a_raw;
        __m512 g;
        if (dy + q0 + 16 <= dy_end) { /* whole vectors (dy and am have the same length) */
            float *w0 = r0 + 2 * q0 + WRITE_AHEAD, *w1 = r1 + 2 * q0 + WRITE_AHEAD;
            __builtin_prefetch(w0, 1), __builtin_prefetch(w0 + 16, 1);
            __builtin_prefetch(w1, 1), __builtin_prefetch(w1 + 16, 1);
            a_raw = _mm512_loadu_si512(am + q0), g = _mm512_loadu_ps(dy + q0);
        } else {
            a_raw = _mm512_maskz_loadu_epi32(mq, am + q0), g = _mm512_maskz_loadu_ps(mq, dy + q0);
        }
        __m512i a = _mm512_sub_epi32(
            a_raw, _mm512_add_epi32(_mm512_set1_epi32(base + (int32_t)(2 * q0)), two_q));
        __m512 e0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512()), g);
        __m512 o0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_set1_epi32(1)), g);
        __m512 e1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_set1_epi32(w)), g);
        __m512 o1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_set1_epi32(w + 1)), g);
        unpool_store(r0 + 2 * q0, e0, o0, lo, hi, nq, beta);
        unpool_store(r1 + 2 * q0, e1, o1, lo, hi, nq, beta);
    }
}
#else
/* Backward of one output row of 2x2, stride 2 pooling: every input of the two rows r0, r1 gets
 * either its window's gradient or 0 in one pass, with no zeroing pass first (beta 0), or has
 * that added to beta times its old value. Branch-free, so the compiler vectorises it. */
static void unpool2x2_row(int64_t q_count, const float *restrict dy, const int32_t *restrict am,
                          int32_t base, int32_t w, float beta, const float *dy_end,
                          float *restrict r0, float *restrict r1) {
    (void)dy_end; /* only the AVX-512 copy reads whole vectors */
    for (int64_t f = 0; f < 2 * w; f += 16) __builtin_prefetch(r0 + WRITE_AHEAD + f, 1);
    if (beta == 0.0f) {
        RG_POOL_SIMD
        for (int64_t q = 0; q < q_count; q++) {
            int32_t a = am[q] - base - (int32_t)(2 * q); /* 0, 1, w or w+1 */
            float g = dy[q];
            r0[2 * q] = a == 0 ? g : 0.0f;
            r0[2 * q + 1] = a == 1 ? g : 0.0f;
            r1[2 * q] = a == w ? g : 0.0f;
            r1[2 * q + 1] = a == w + 1 ? g : 0.0f;
        }
        return;
    }
    RG_POOL_SIMD
    for (int64_t q = 0; q < q_count; q++) {
        int32_t a = am[q] - base - (int32_t)(2 * q);
        float g = dy[q];
        r0[2 * q] = (a == 0 ? g : 0.0f) + beta * r0[2 * q];
        r0[2 * q + 1] = (a == 1 ? g : 0.0f) + beta * r0[2 * q + 1];
        r1[2 * q] = (a == w ? g : 0.0f) + beta * r1[2 * q];
        r1[2 * q + 1] = (a == w + 1 ? g : 0.0f) + beta * r1[2 * q + 1];
    }
}
#endif

/* Scales (or, for beta 0, zeroes) n floats that no window covers. */
static void scale_uncovered(float *d, int64_t n, float beta) {
    for (int64_t i = 0; i < n; i++) d[i] = beta == 0.0f ? 0.0f : beta * d[i];
}

static void unpool2x2_plane(const rg_pool2d_shape *s, const float *dyp, const int32_t *ap,
                            float beta, const float *dy_end, float *dxp) {
    for (int64_t p = 0; p < s->p; p++) {
        float *r0 = dxp + 2 * p * s->w;
        unpool2x2_row(s->q, dyp + p * s->q, ap + p * s->q, (int32_t)(2 * p * s->w), (int32_t)s->w,
                      beta, dy_end, r0, r0 + s->w);
        if (s->w > 2 * s->q) { /* an odd last column */
            scale_uncovered(r0 + 2 * s->q, s->w - 2 * s->q, beta);
            scale_uncovered(r0 + s->w + 2 * s->q, s->w - 2 * s->q, beta);
        }
    }
    scale_uncovered(dxp + 2 * s->p * s->w, (s->h - 2 * s->p) * s->w, beta); /* an odd last row */
}

static void backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax, float beta,
                     float *dx, bool threads) {
    int64_t planes = s->n * s->c, hw = s->h * s->w, pq = s->p * s->q;
    bool two_by_two = rg_cpu_pool_is_2x2(s);
#pragma omp parallel for if (threads && planes * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * hw;
        const float *dyp = dy + pl * pq;
        const int32_t *ap = argmax + pl * pq;
        if (two_by_two) {
            unpool2x2_plane(s, dyp, ap, beta, dy + planes * pq, dxp);
            continue;
        }
        if (beta != 1.0f) scale_uncovered(dxp, hw, beta); /* windows may overlap: zero, then add */
        for (int64_t i = 0; i < pq; i++) dxp[ap[i]] += dyp[i];
    }
}

void rg_cpu_maxpool2d_backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax,
                               float beta, float *dx) {
    backward(s, dy, argmax, beta, dx, true);
}

void rg_cpu_maxpool2d_backward_serial(const rg_pool2d_shape *s, const float *dy,
                                      const int32_t *argmax, float beta, float *dx) {
    backward(s, dy, argmax, beta, dx, false);
}
