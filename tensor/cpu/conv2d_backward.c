/* conv2d_backward.c — the two backward passes of the CPU convolution (the plan is in conv2d.c).
 *
 * Backward data is a product and a scatter: for each output pixel, dcol[(r,s,c)] =
 * sum_k dy[pixel][k] w[k,c,r,s] is the gradient of every input value its window read, and is
 * added back into dx there (col2im). Windows overlap, so a thread owns a whole image's dx.
 *
 * Backward filter reduces over pixels: dw[(c,r,s)][k] = sum_pixel x[window + tap + c] dy[pixel][k].
 * Each thread sums its images into its own (C*R*S x K) buffer; the buffers are added and
 * transposed into dw at the end, which is also where beta is applied. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR
#define VL RG_CONV_VL

/* Output pixels per block of the filter gradient: the block's dy (pixels x K) stays in L1. */
#define PIXEL_BLOCK 96

/* ---- backward data ---- */

/* wt[panel][k][j] = w[k][c][r][s] for column panel*NR + j = (r*S + s)*C + c, zero past C*R*S. */
static float *pack_data_weights(const rg_conv2d_shape *s, int64_t crs, const float *w) {
    int64_t npanel = (crs + NR - 1) / NR, rs = s->r * s->s;
    float *wt = rg_conv_scratch(npanel * s->k * NR);
#pragma omp parallel for schedule(static) if (npanel * s->k * NR > RG_CPU_PAR_MIN)
    for (int64_t jp = 0; jp < npanel; jp++)
        for (int64_t k = 0; k < s->k; k++)
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = jp * NR + j, tap = col / s->c, c = col % s->c;
                wt[(jp * s->k + k) * NR + j] = col < crs ? w[(k * s->c + c) * rs + tap] : 0.0f;
            }
    return wt;
}

/* Adds rows x (nv vectors) of a tile of dcol, for output pixels pix0.. and columns n0.., into
 * dxpad. When C is a multiple of the vector length a vector never straddles two taps. */
static void col2im_tile(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *tile,
                        int rows, int nv, int64_t pix0, int64_t n0, const int32_t *col_off,
                        float *dxpad) {
    for (int i = 0; i < rows; i++) {
        float *base = dxpad + rg_conv_pixel_offset(s, g, pix0 + i);
        const float *src = tile + i * NR;
        if (s->c % VL == 0) {
            for (int v = 0; v < nv; v++)
                *(rg_convvec *)(base + col_off[n0 + v * VL]) += *(const rg_convvec *)(src + v * VL);
        } else {
            for (int64_t j = 0; j < nv * VL && n0 + j < g->crs; j++) base[col_off[n0 + j]] += src[j];
        }
    }
}

/* One image: dxpad = col2im(dyp (P*Q, K) wt). */
static void data_image(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *dyp,
                       const float *wt, const int32_t *iota, const int32_t *col_off, float *tile,
                       float *dxpad) {
    memset(dxpad, 0, (size_t)g->xpad_len * sizeof(float));
    for (int64_t n0 = 0; n0 < g->crs; n0 += NR) {
        int nv = rg_conv_panel_vectors(g->crs, n0);
        for (int64_t i0 = 0; i0 < g->pq; i0 += MR) {
            const float *a[MR];
            for (int i = 0; i < MR; i++)
                a[i] = dyp + (i0 + i < g->pq ? i0 + i : g->pq - 1) * s->k;
            rg_conv_tile(nv, s->k, iota, a, wt + n0 * s->k, NR, tile, NR, false);
            int rows = (int)(g->pq - i0 < MR ? g->pq - i0 : MR);
            col2im_tile(s, g, tile, rows, nv, i0, n0, col_off, dxpad);
        }
    }
}

/* dx (C,H,W) = beta dx + the interior of dxpad, transposed back to channels-first. */
static void write_dx(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *dxpad,
                     float beta, float *dx) {
    int64_t hw = s->h * s->w, row = g->wp * s->c;
    if (s->pad_w == 0) {
        rg_conv_transpose(hw, s->c, dxpad + s->pad_h * row, s->c, dx, hw, NULL, beta);
        return;
    }
    for (int64_t h = 0; h < s->h; h++)
        rg_conv_transpose(s->w, s->c, dxpad + (s->pad_h + h) * row + s->pad_w * s->c, s->c,
                          dx + h * s->w, hw, NULL, beta);
}

void rg_cpu_conv2d_backward_data(const rg_conv2d_shape *s, const float *dy, const float *w,
                                 float beta, float *dx) {
    rg_conv_geom g = rg_conv_geom_of(s);
    float *wt = pack_data_weights(s, g.crs, w);
    int32_t *col_off = rg_conv_tap_offsets(s, &g), *iota = (int32_t *)rg_conv_scratch(s->k);
    for (int64_t k = 0; k < s->k; k++) iota[k] = (int32_t)k;
#pragma omp parallel if (s->n > 1)
    {
        float *dyp = rg_conv_scratch(g.pq * s->k), *dxpad = rg_conv_scratch(g.xpad_len);
        float *tile = rg_conv_scratch(MR * NR);
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++) {
            rg_conv_transpose(s->k, g.pq, dy + n * s->k * g.pq, g.pq, dyp, s->k, NULL, 0.0f);
            data_image(s, &g, dyp, wt, iota, col_off, tile, dxpad);
            write_dx(s, &g, dxpad, beta, dx + n * s->c * s->h * s->w);
        }
        rg_conv_scratch_free(tile, MR * NR);
        rg_conv_scratch_free(dxpad, g.xpad_len);
        rg_conv_scratch_free(dyp, g.pq * s->k);
    }
    rg_conv_scratch_free((float *)iota, s->k);
    rg_conv_scratch_free((float *)col_off, g.crs);
    rg_conv_scratch_free(wt, (g.crs + NR - 1) / NR * s->k * NR);
}

/* ---- backward filter ---- */

/* The rows of the filter gradient in (c,r,s) order, as offsets from a window's start; the
 * spare rows up to a multiple of MR repeat the last one. */
static int32_t *filter_row_offsets(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t rows) {
    int32_t *off = (int32_t *)rg_conv_scratch(rows);
    for (int64_t m = 0; m < rows; m++) {
        int64_t mm = m < g->crs ? m : g->crs - 1, rs = mm % (s->r * s->s), c = mm / (s->r * s->s);
        off[m] = (int32_t)(rg_conv_tap_offset(s, g, rs / s->s, rs % s->s) + c);
    }
    return off;
}

/* One image: acc (crs_pad, kpad) += xpad windows x dy, a block of output pixels at a time. */
static void filter_image(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *xpad,
                         const float *dy, const int32_t *row_off, const int32_t *pix_off,
                         int64_t rows, int64_t kpad, float *dyblk, float *acc) {
    for (int64_t t0 = 0; t0 < g->pq; t0 += PIXEL_BLOCK) {
        int64_t nt = g->pq - t0 < PIXEL_BLOCK ? g->pq - t0 : PIXEL_BLOCK;
        rg_conv_transpose(s->k, nt, dy + t0, g->pq, dyblk, kpad, NULL, 0.0f);
        for (int64_t n0 = 0; n0 < s->k; n0 += NR) {
            int nv = rg_conv_panel_vectors(s->k, n0);
            for (int64_t m0 = 0; m0 < rows; m0 += MR) {
                const float *a[MR];
                for (int i = 0; i < MR; i++) a[i] = xpad + row_off[m0 + i];
                rg_conv_tile(nv, nt, pix_off + t0, a, dyblk + n0, kpad, acc + m0 * kpad + n0,
                             kpad, true);
            }
        }
    }
}

/* db[k] = beta db[k] + sum over images and pixels of dy[n][k]. */
static void bias_grad(const rg_conv2d_shape *s, int64_t pq, const float *dy, float beta,
                      float *db) {
#pragma omp parallel for schedule(static) if (s->n * s->k * pq > RG_CPU_PAR_MIN)
    for (int64_t k = 0; k < s->k; k++) {
        double sum = 0.0;
        for (int64_t n = 0; n < s->n; n++) sum += rg_conv_sum(dy + (n * s->k + k) * pq, pq);
        db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
    }
}

void rg_cpu_conv2d_backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy,
                                   float beta, float *dw, float *db) {
    rg_conv_geom g = rg_conv_geom_of(s);
    int64_t rows = rg_conv_round_up(g.crs, MR), kpad = rg_conv_round_up(s->k, NR);
    int64_t accn = rows * kpad, blkn = PIXEL_BLOCK * kpad;
    int32_t *row_off = filter_row_offsets(s, &g, rows), *pix_off = (int32_t *)rg_conv_scratch(g.pq);
    for (int64_t i = 0; i < g.pq; i++) pix_off[i] = (int32_t)rg_conv_pixel_offset(s, &g, i);
    int nthreads = s->n > 1 ? omp_get_max_threads() : 1;
    float **acc = calloc((size_t)nthreads, sizeof *acc);
    RG_CHECK(acc, "conv2d: out of host memory");
#pragma omp parallel num_threads(nthreads)
    {
        int tid = omp_get_thread_num();
        float *xpad = rg_conv_scratch(g.xpad_len), *dyblk = rg_conv_scratch(blkn);
        memset(dyblk, 0, (size_t)blkn * sizeof(float)); /* columns past K stay zero */
        acc[tid] = rg_conv_scratch(accn);
        memset(acc[tid], 0, (size_t)accn * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++) {
            rg_conv_to_padded_nhwc(s, &g, x + n * s->c * s->h * s->w, xpad);
            filter_image(s, &g, xpad, dy + n * s->k * g.pq, row_off, pix_off, rows, kpad, dyblk,
                         acc[tid]);
        }
        /* implicit barrier: every partial sum is complete */
#pragma omp for schedule(static)
        for (int64_t m0 = 0; m0 < g.crs; m0 += VL) {
            int64_t nm = g.crs - m0 < VL ? g.crs - m0 : VL;
            for (int t = 1; t < nthreads; t++)
                if (acc[t]) /* NULL if OpenMP gave us fewer threads */
                    for (int64_t i = m0 * kpad; i < (m0 + nm) * kpad; i++) acc[0][i] += acc[t][i];
            rg_conv_transpose(nm, s->k, acc[0] + m0 * kpad, kpad, dw + m0, g.crs, NULL, beta);
        }
        rg_conv_scratch_free(dyblk, blkn);
        rg_conv_scratch_free(xpad, g.xpad_len);
#pragma omp barrier
        rg_conv_scratch_free(acc[tid], accn);
    }
    free(acc);
    rg_conv_scratch_free((float *)pix_off, g.pq);
    rg_conv_scratch_free((float *)row_off, rows);
    if (db) bias_grad(s, g.pq, dy, beta, db);
}
