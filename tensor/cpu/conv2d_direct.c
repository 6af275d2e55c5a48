/* conv2d_direct.c — the forward pass for convolutions with a short reduction (few input channels
 * and a small kernel, like the first layer of an MNIST CNN: C*R*S = 9) and for padded 1x1 kernels
 * (those without padding are OpenBLAS products, conv2d_gemm.c, unless RG_CONV_GEMM=0).
 *
 * The channels-last plan (conv2d.c) spends its time transposing, not multiplying, when each output
 * is a sum of only a handful of products, and a strided 1x1 kernel would have it transpose four
 * times the pixels it reads. Here vectors run along output pixels instead, so the output is
 * written straight into NCHW and only the pixels read are copied: for a panel of RG_CONV_NR
 * consecutive output pixels,
 *
 *   col[t][j] = x[c, p*stride - pad + r, q*stride - pad + s]   t = (c,r,s), pixel j = (p,q)
 *   col[C*R*S][j] = 1                                           (so the bias is one more weight)
 *   y[k][j] = sum_t w[k][t] col[t][j]                            (rg_conv_tile, rows = filters)
 *
 * This is im2col, but only one small panel at a time, which stays in L1. Unpadded stride-1 shapes
 * with at most 9 products an output (the CNN's conv1) skip even that: see "by output rows" below.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tensor/cpu/conv2d_impl.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR

/* col[t][0..np) for t = (c,r,s) < crs, the pixels j0.. of the image x (C,H,W); then the row of
 * ones, then zeros in columns np..NR. */
static void build_panel(const rg_conv2d_shape *s, int64_t crs, const float *x, int64_t j0,
                        int64_t np, float *col) {
    for (int64_t t = 0; t < crs; t++) {
        int64_t c = t / (s->r * s->s), r = t / s->s % s->r, tap = t % s->s;
        float *dst = col + t * NR;
        for (int64_t j = 0; j < np;) {
            int64_t p = (j0 + j) / s->q, q0 = (j0 + j) % s->q;
            int64_t len = s->q - q0 < np - j ? s->q - q0 : np - j; /* the rest of output row p */
            int64_t h = p * s->stride_h - s->pad_h + r;
            if (h < 0 || h >= s->h) {
                memset(dst + j, 0, (size_t)len * sizeof(float));
            } else if (s->stride_w == 1 && s->pad_w == 0) { /* the whole row segment is inside */
                memcpy(dst + j, x + (c * s->h + h) * s->w + q0 + tap, (size_t)len * sizeof(float));
            } else if (s->stride_w == 2 && s->pad_w == 0) { /* a constant stride vectorises */
                const float *src = x + (c * s->h + h) * s->w + 2 * q0 + tap;
                for (int64_t i = 0; i < len; i++) dst[j + i] = src[2 * i];
            } else {
                const float *row = x + (c * s->h + h) * s->w;
                for (int64_t i = 0; i < len; i++) {
                    int64_t w = (q0 + i) * s->stride_w - s->pad_w + tap;
                    dst[j + i] = w >= 0 && w < s->w ? row[w] : 0.0f;
                }
            }
            j += len;
        }
        memset(dst + np, 0, (size_t)(NR - np) * sizeof(float));
    }
    for (int64_t j = 0; j < NR; j++) col[crs * NR + j] = j < np ? 1.0f : 0.0f;
}

/* One image: every panel of output pixels, every group of MR filters. */
static void direct_image(const rg_conv2d_shape *s, int64_t crs, const float *x, const float *wb,
                         const int32_t *iota, float *col, float *tile, float *y) {
    int64_t pq = s->p * s->q;
    for (int64_t j0 = 0; j0 < pq; j0 += NR) {
        int64_t np = pq - j0 < NR ? pq - j0 : NR;
        int nv = rg_conv_panel_vectors(np, 0);
        build_panel(s, crs, x, j0, np, col);
        for (int64_t k0 = 0; k0 < s->k; k0 += MR) {
            const float *a[MR];
            for (int i = 0; i < MR; i++) a[i] = wb + (k0 + i) * (crs + 1);
            if (np == NR && k0 + MR <= s->k) { /* a whole tile: straight into y */
                rg_conv_tile(nv, crs + 1, iota, a, col, NR, y + k0 * pq + j0, pq, false);
                continue;
            }
            rg_conv_tile(nv, crs + 1, iota, a, col, NR, tile, NR, false);
            for (int64_t i = 0; i < MR && k0 + i < s->k; i++)
                memcpy(y + (k0 + i) * pq + j0, tile + i * NR, (size_t)np * sizeof(float));
        }
        if (s->relu) /* the fused ReLU over the panel just written, still in L1 */
            for (int64_t k = 0; k < s->k; k++) {
                float *yk = y + k * pq + j0;
                for (int64_t j = 0; j < np; j++) yk[j] = rg_k_relu(yk[j]);
            }
    }
}

/* ---- by output rows: stride 1, no padding, at most ROW_TAPS products an output (conv1) ----
 *
 * There the panels above spend their time on everything but the products: building each panel
 * (a memcpy per tap and output row it crosses), six tile calls of 10 steps for 32 filters, a
 * second pass for the ReLU; conv1's forward ran at 12 GFLOP/s, 4 ms of the CNN step at one thread,
 * for 11 MB of output. Here a vector of VL output pixels of one output row takes its crs input
 * vectors into registers once (tap (c, r, u) of pixels q..q+VL-1 is a contiguous row segment of
 * x), and every filter is then crs broadcasts and multiply-adds on them, with the bias and the
 * ReLU applied in the register and one store straight into y. A row's last vector overlaps the
 * one before it when Q is not a multiple of VL (the overlapping pixels are computed twice, the same
 * way, and stored twice). Each output is the same sum, in the same order (t = 0 .. crs-1, then the
 * bias), as the tile computes it: the same bits as the panels. conv1's forward at batch 128 took
 * 1.9 ms instead of 4.2 at one thread (Zen 3, CPU clock; 2.8 instead of 5.7-6.1 inside the CNN
 * step, 1.5 instead of 3.5-4.0 at two threads: docs/PERFORMANCE.md). */
#define ROW_TAPS 9
#define VL RG_CONV_VL

static bool rows_apply(const rg_conv2d_shape *s, int64_t crs) {
    return crs <= ROW_TAPS && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 &&
           s->pad_w == 0 && s->q >= VL && rg_conv_switch_on("RG_CONV_DIRECT_ROWS");
}

typedef int32_t rows_ivec __attribute__((vector_size(VL * sizeof(int32_t))));

/* tap[t] for the taps t = (c, r, u) of a row-path shape: where each reads, from the output pixel
 * (0, 0) in the image x (C, H, W). Returns whether the shape is one channel's 3x3, which
 * tap_vector then computes with constants. */
static bool row_taps(const rg_conv2d_shape *s, int64_t tap[ROW_TAPS]) {
    for (int64_t t = 0; t < s->c * s->r * s->s; t++)
        tap[t] = (t / (s->r * s->s) * s->h + t / s->s % s->r) * s->w + t % s->s;
    return s->c == 1 && s->r == 3 && s->s == 3;
}

/* The input vector tap t reads for the output pixels starting at xq's: from the table, or with
 * k3 (a constant after inlining) t / 3 rows of xw floats and t % 3 floats on, so that once the loop
 * over t is unrolled each load is one of three row pointers plus a constant. */
static inline __attribute__((always_inline)) rg_convvec
tap_vector(const float *xq, int64_t t, bool k3, int64_t xw, const int64_t *tap) {
    const float *p = k3 ? (t < 3 ? xq : t < 6 ? xq + xw : xq + 2 * xw) + t % 3 : xq + tap[t];
    return *(const rg_convvec *)p; /* aligned(4): any float's address */
}

/* Filters a step: each output is a chain of crs dependent multiply-adds, so four run side by side
 * (with 9 input vectors, 4 sums and a broadcast: 14 of AVX2's 16 registers). */
#define ROW_FILTERS 4

/* dst = the sum acc plus filter k's bias, through the ReLU if fused */
static inline __attribute__((always_inline)) void
row_store(const rg_conv2d_shape *s, const float *b, int64_t k, rg_convvec acc, float *dst) {
    acc += b ? b[k] : 0.0f;
    if (s->relu) /* rg_k_relu: 0 where acc < 0, acc (NaN included) elsewhere */
        acc = (rg_convvec)((rows_ivec)acc & ~(rows_ivec)(acc < (rg_convvec){0}));
    *(rg_convvec *)dst = acc; /* aligned(4): any float's address */
}

/* The outputs of one image for crs = CRS taps (a constant after inlining, so that the input
 * vectors stay in registers). */
static inline __attribute__((always_inline)) void
rows_image(const int64_t crs, const bool k3, const rg_conv2d_shape *s, const int64_t *tap,
           const float *x, const float *w, const float *b, float *y) {
    int64_t pq = s->p * s->q, xw = s->w;
    for (int64_t p = 0; p < s->p; p++)
        for (int64_t q0 = 0; q0 < s->q; q0 += VL) {
            int64_t q = q0 + VL <= s->q ? q0 : s->q - VL;
            const float *xq = x + p * s->w + q;
            rg_convvec in[ROW_TAPS];
            for (int64_t t = 0; t < crs; t++) in[t] = tap_vector(xq, t, k3, xw, tap);
            float *yq = y + p * s->q + q;
            int64_t k = 0;
            for (; k + ROW_FILTERS <= s->k; k += ROW_FILTERS) { /* independent sums interleaved */
                rg_convvec acc[ROW_FILTERS] = {{0}};
                for (int64_t t = 0; t < crs; t++)
#pragma GCC unroll 4
                    for (int f = 0; f < ROW_FILTERS; f++) acc[f] += w[(k + f) * crs + t] * in[t];
#pragma GCC unroll 4
                for (int f = 0; f < ROW_FILTERS; f++)
                    row_store(s, b, k + f, acc[f], yq + (k + f) * pq);
            }
            for (; k < s->k; k++) {
                rg_convvec acc = {0};
                for (int64_t t = 0; t < crs; t++) acc += w[k * crs + t] * in[t];
                row_store(s, b, k, acc, yq + k * pq);
            }
        }
}

/* One channel's 3x3 with 32 vector registers (AVX-512), both passes, by columns of vectors: down
 * a column, the three input rows a step reads are the step before's lower two and one new row, so
 * the nine input vectors stay in registers and a step loads three, not nine; and each step serves
 * two filters. By rows, each step's nine unaligned 64-byte input loads (most straddle two cache
 * lines) held the filter pass to about 15 cycles a step; the same loop compiled for constant
 * shapes kept the rows in registers this way and ran in half the time. With AVX2's 16 registers
 * the filter pass's sums alone fill the file, and the column order spilled (1.7 against 1.2 ms),
 * so those builds keep the rows. Zen 5, batch 128, one thread (docs/PERFORMANCE.md): conv1's
 * forward 0.73-0.80 -> 0.60-0.61 ms, its filter pass 1.2-1.3 -> 0.5-0.7 ms. */
#define K3_COLUMNS (VL == 16)
#define K3_FILTERS 2

/* The outputs of filters k0 .. k0 + nf - 1 (nf <= K3_FILTERS, a constant after inlining) by
 * columns: the filters' 18 weights broadcast once into registers (18 + 9 inputs + 2 sums: 29
 * registers). Each output is the rows' sum in the rows' order, so the same bits. */
static inline __attribute__((always_inline)) void
k3_columns_forward_block(const int nf, const rg_conv2d_shape *s, const float *x, const float *w,
                         const float *b, int64_t k0, float *y) {
    int64_t pq = s->p * s->q, xw = s->w;
    rg_convvec wt[K3_FILTERS][ROW_TAPS];
    for (int f = 0; f < nf; f++)
        for (int t = 0; t < ROW_TAPS; t++) wt[f][t] = (rg_convvec){0} + w[(k0 + f) * ROW_TAPS + t];
    for (int64_t q0 = 0; q0 < s->q; q0 += VL) {
        int64_t q = q0 + VL <= s->q ? q0 : s->q - VL;
        const float *xq = x + q;
        rg_convvec r0[3], r1[3], r2[3];
        for (int u = 0; u < 3; u++)
            r0[u] = *(const rg_convvec *)(xq + u), r1[u] = *(const rg_convvec *)(xq + xw + u);
        for (int64_t p = 0; p < s->p; p++) {
            for (int u = 0; u < 3; u++) r2[u] = *(const rg_convvec *)(xq + (p + 2) * xw + u);
            for (int f = 0; f < nf; f++) {
                rg_convvec acc = {0};
                for (int u = 0; u < 3; u++) acc += wt[f][u] * r0[u];
                for (int u = 0; u < 3; u++) acc += wt[f][3 + u] * r1[u];
                for (int u = 0; u < 3; u++) acc += wt[f][6 + u] * r2[u];
                row_store(s, b, k0 + f, acc, y + (k0 + f) * pq + p * s->q + q);
            }
            for (int u = 0; u < 3; u++) r0[u] = r1[u], r1[u] = r2[u];
        }
    }
}

static void k3_columns_forward_image(const rg_conv2d_shape *s, const float *x, const float *w,
                                     const float *b, float *y) {
    int64_t k = 0;
    for (; k + K3_FILTERS <= s->k; k += K3_FILTERS)
        k3_columns_forward_block(K3_FILTERS, s, x, w, b, k, y);
    for (; k < s->k; k++) k3_columns_forward_block(1, s, x, w, b, k, y);
}

static void forward_rows(const rg_conv2d_shape *s, int64_t crs, const float *x, const float *w,
                         const float *b, float *y) {
    int64_t chw = s->c * s->h * s->w, kpq = s->k * s->p * s->q;
    int64_t tap[ROW_TAPS];
    bool three_by_three = row_taps(s, tap);
#pragma omp parallel for schedule(static) if (s->n > 1)
    for (int64_t n = 0; n < s->n; n++) {
        if (three_by_three && K3_COLUMNS)
            k3_columns_forward_image(s, x + n * chw, w, b, y + n * kpq);
        else if (three_by_three) /* one channel's 3x3: the taps' loop unrolled, constant offsets */
            rows_image(ROW_TAPS, true, s, tap, x + n * chw, w, b, y + n * kpq);
        else
            rows_image(crs, false, s, tap, x + n * chw, w, b, y + n * kpq);
    }
}

/* The filter pass of the same shapes, by the same rows: for each filter k, a vector of output
 * pixels of dy (masked by the fused ReLU's output) times the crs input vectors its taps read,
 * summed into crs vectors (and one more for the bias), which stay in registers over the whole
 * image. A row's overlapping last vector counts only its new pixels. Each image's sums go to its
 * own slot (summed lane by lane in double), and the slots are added in image order afterwards: the
 * result does not depend on the thread count. The general path (conv2d_backward.c) first wrote dy
 * masked by the ReLU, then transposed it and x to channels-last for the tile: conv1's filter pass
 * took 3.7 ms of the CNN step at one thread, 2.1 this way (1.7-2.1 and 1.2 at two threads). Each
 * step is 9 multiply-adds on 9 accumulators, one each, and nine unaligned input loads: with
 * AVX-512 the loads bound it, and one channel's 3x3 goes down columns instead (K3_COLUMNS, above).
 */
#define ROW_BLOCK 256 /* images whose sums are kept apart at a time (a block of doubles each) */

bool rg_conv_filter_rows_applies(const rg_conv2d_shape *s) {
    return rows_apply(s, s->c * s->r * s->s);
}

static inline __attribute__((always_inline)) double lanes_sum(rg_convvec v) {
    double t = 0.0;
    for (int l = 0; l < VL; l++) t += v[l];
    return t;
}

/* part[k * (crs + 1) + t]: image x's sum for filter k and tap t (t = crs: the bias) */
static inline __attribute__((always_inline)) void
filter_rows_image(const int64_t crs, const bool k3, const rg_conv2d_shape *s, const int64_t *tap,
                  const float *x, const float *dy, const float *relu_y, double *part) {
    int64_t pq = s->p * s->q, xw = s->w;
    rows_ivec lane;
    for (int l = 0; l < VL; l++) lane[l] = l;
    for (int64_t k = 0; k < s->k; k++) {
        rg_convvec acc[ROW_TAPS] = {{0}}, accb = {0};
        const float *dyk = dy + k * pq, *yk = relu_y ? relu_y + k * pq : NULL;
        for (int64_t p = 0; p < s->p; p++)
            for (int64_t q0 = 0; q0 < s->q; q0 += VL) {
                int64_t q = q0 + VL <= s->q ? q0 : s->q - VL;
                rg_convvec g = *(const rg_convvec *)(dyk + p * s->q + q);
                if (yk) /* rg_k_relu_grad: 0 where y <= 0, dy elsewhere (NaN in y included) */
                    g = (rg_convvec)((rows_ivec)g &
                                     ~(rows_ivec)(*(const rg_convvec *)(yk + p * s->q + q) <=
                                                  (rg_convvec){0}));
                if (q != q0) /* the overlap: pixels q .. q0 - 1 were counted already */
                    g = (rg_convvec)((rows_ivec)g & (lane >= (rows_ivec){0} + (int32_t)(q0 - q)));
                const float *xq = x + p * s->w + q;
                accb += g;
                for (int64_t t = 0; t < crs; t++) acc[t] += g * tap_vector(xq, t, k3, xw, tap);
            }
        for (int64_t t = 0; t < crs; t++) part[k * (crs + 1) + t] = lanes_sum(acc[t]);
        part[k * (crs + 1) + crs] = lanes_sum(accb);
    }
}

/* The filter pass of one channel's 3x3 by columns (K3_COLUMNS, above): 9 inputs, 18 sums, 2 bias
 * sums, 2 gradients: 31 registers. */
static inline __attribute__((always_inline)) void
k3_columns_filter_block(const int nf, const rg_conv2d_shape *s, const float *x, const float *dy,
                        const float *relu_y, int64_t k0, double *part) {
    int64_t pq = s->p * s->q, xw = s->w;
    rows_ivec lane;
    for (int l = 0; l < VL; l++) lane[l] = l;
    rg_convvec acc[K3_FILTERS][ROW_TAPS] = {{{0}}}, accb[K3_FILTERS] = {{0}};
    for (int64_t q0 = 0; q0 < s->q; q0 += VL) {
        int64_t q = q0 + VL <= s->q ? q0 : s->q - VL;
        rows_ivec keep = lane >= (rows_ivec){0} + (int32_t)(q0 - q); /* the overlap's new pixels */
        const float *xq = x + q;
        rg_convvec r0[3], r1[3], r2[3];
        for (int u = 0; u < 3; u++)
            r0[u] = *(const rg_convvec *)(xq + u), r1[u] = *(const rg_convvec *)(xq + xw + u);
        for (int64_t p = 0; p < s->p; p++) {
            /* two lines a step of the next filters' dy (and y): a column's steps are Q floats
             * apart, a stride the prefetchers did not run ahead of (0.85-0.93 ms without). After
             * the last filters this reaches the next image's, or past the end (a prefetch never
             * faults). */
            int64_t ahead = (k0 + nf) * pq + ((q0 / VL) * s->p + p) * 2 * 16;
            __builtin_prefetch(dy + ahead), __builtin_prefetch(dy + ahead + 16);
            if (relu_y) __builtin_prefetch(relu_y + ahead), __builtin_prefetch(relu_y + ahead + 16);
            for (int u = 0; u < 3; u++) r2[u] = *(const rg_convvec *)(xq + (p + 2) * xw + u);
            for (int f = 0; f < nf; f++) {
                int64_t off = (k0 + f) * pq + p * s->q + q;
                rg_convvec g = *(const rg_convvec *)(dy + off);
                if (relu_y) /* rg_k_relu_grad: 0 where y <= 0, dy elsewhere (NaN in y included) */
                    g = (rg_convvec)((rows_ivec)g &
                                     ~(rows_ivec)(*(const rg_convvec *)(relu_y + off) <=
                                                  (rg_convvec){0}));
                g = (rg_convvec)((rows_ivec)g & keep);
                accb[f] += g;
                for (int u = 0; u < 3; u++) {
                    acc[f][u] += g * r0[u];
                    acc[f][3 + u] += g * r1[u];
                    acc[f][6 + u] += g * r2[u];
                }
            }
            for (int u = 0; u < 3; u++) r0[u] = r1[u], r1[u] = r2[u];
        }
    }
    for (int f = 0; f < nf; f++) {
        double *out = part + (k0 + f) * (ROW_TAPS + 1);
        for (int64_t t = 0; t < ROW_TAPS; t++) out[t] = lanes_sum(acc[f][t]);
        out[ROW_TAPS] = lanes_sum(accb[f]);
    }
}

static void k3_columns_filter_image(const rg_conv2d_shape *s, const float *x, const float *dy,
                                    const float *relu_y, double *part) {
    int64_t k = 0;
    for (; k + K3_FILTERS <= s->k; k += K3_FILTERS)
        k3_columns_filter_block(K3_FILTERS, s, x, dy, relu_y, k, part);
    for (; k < s->k; k++) k3_columns_filter_block(1, s, x, dy, relu_y, k, part);
}

void rg_conv_backward_filter_rows(const rg_conv2d_shape *s, const float *x, const float *dy,
                                  float beta, float *dw, float *db) {
    RG_CHECK(!s->pool, "conv2d: the filter pass by rows takes a pool's gradient unpooled");
    int64_t crs = s->c * s->r * s->s, chw = s->c * s->h * s->w, kpq = s->k * s->p * s->q;
    int64_t slot = s->k * (crs + 1);
    int64_t tap[ROW_TAPS];
    bool three_by_three = row_taps(s, tap);
    int64_t block = s->n < ROW_BLOCK ? (s->n > 0 ? s->n : 1) : ROW_BLOCK;
    double *part = rg_xcalloc((size_t)block * (size_t)slot, sizeof(double),
                              "conv2d: the filter pass's per-image sums");
    double *sum = rg_xcalloc((size_t)slot, sizeof(double), "conv2d: the filter pass's sums");
    for (int64_t n0 = 0; n0 < s->n; n0 += block) {
        int64_t nb = s->n - n0 < block ? s->n - n0 : block;
#pragma omp parallel for schedule(static) if (nb > 1)
        for (int64_t i = 0; i < nb; i++) {
            int64_t n = n0 + i;
            const float *ry = s->relu_y ? s->relu_y + n * kpq : NULL;
            if (three_by_three && K3_COLUMNS)
                k3_columns_filter_image(s, x + n * chw, dy + n * kpq, ry, part + i * slot);
            else if (three_by_three)
                filter_rows_image(ROW_TAPS, true, s, tap, x + n * chw, dy + n * kpq, ry,
                                  part + i * slot);
            else
                filter_rows_image(crs, false, s, tap, x + n * chw, dy + n * kpq, ry,
                                  part + i * slot);
        }
        for (int64_t i = 0; i < nb; i++) /* image after image, whatever the threads */
            for (int64_t j = 0; j < slot; j++) sum[j] += part[i * slot + j];
    }
    for (int64_t k = 0; k < s->k; k++)
        for (int64_t t = 0; t <= crs; t++) {
            float *out = t < crs ? &dw[k * crs + t] : db ? &db[k] : NULL;
            if (out) *out = (float)sum[k * (crs + 1) + t] + (beta == 0.0f ? 0.0f : beta * *out);
        }
    free(sum), free(part);
}

void rg_conv_forward_direct(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *x,
                            const float *w, const float *b, float *y) {
    if (rows_apply(s, g->crs)) {
        forward_rows(s, g->crs, x, w, b, y);
        return;
    }
    int64_t crs = g->crs, kpad = rg_conv_round_up(s->k, MR), wbn = kpad * (crs + 1);
    /* wb[k] = (w[k][0..crs), b[k]), zero rows past K: the filters with the bias as a last weight */
    float *wb = rg_conv_scratch(wbn);
    int32_t *iota = (int32_t *)rg_conv_scratch(crs + 1);
    memset(wb, 0, (size_t)wbn * sizeof(float));
    for (int64_t k = 0; k < s->k; k++) {
        memcpy(wb + k * (crs + 1), w + k * crs, (size_t)crs * sizeof(float));
        wb[k * (crs + 1) + crs] = b ? b[k] : 0.0f;
    }
    for (int64_t t = 0; t <= crs; t++) iota[t] = (int32_t)t;
#pragma omp parallel if (s->n > 1)
    {
        float *col = rg_conv_scratch((crs + 1) * NR), *tile = rg_conv_scratch(MR * NR);
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++)
            direct_image(s, crs, x + n * s->c * s->h * s->w, wb, iota, col, tile,
                         y + n * s->k * s->p * s->q);
        rg_conv_scratch_free(tile, MR * NR);
        rg_conv_scratch_free(col, (crs + 1) * NR);
    }
    rg_conv_scratch_free((float *)iota, crs + 1);
    rg_conv_scratch_free(wb, wbn);
}
