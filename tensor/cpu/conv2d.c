/* conv2d.c — convolution on the CPU by im2col + GEMM, one image at a time.
 *
 * im2col lays out, for one image, every input patch a filter sees as one column:
 *   col (C*R*S, P*Q),  col[(c,r,s), (p,q)] = x[c, p*sh - ph + r, q*sw - pw + s]  (0 outside)
 * so that the convolution is one matrix product:  y[n] (K, P*Q) = w (K, C*R*S) col.
 * Backward data is the transpose product followed by col2im (scatter-add), and backward filter
 * is dy[n] (K,P*Q) col^T summed over images. */
#include <stdlib.h>

#include "tensor/cpu/cpu.h"

static void im2col(const rg_conv2d_shape *s, const float *x, float *col) {
    int64_t pq = s->p * s->q;
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t r = 0; r < s->r; r++)
            for (int64_t t = 0; t < s->s; t++) {
                float *dst = col + ((c * s->r + r) * s->s + t) * pq;
                for (int64_t p = 0; p < s->p; p++) {
                    int64_t h = p * s->stride_h - s->pad_h + r;
                    for (int64_t q = 0; q < s->q; q++) {
                        int64_t w = q * s->stride_w - s->pad_w + t;
                        bool in = h >= 0 && h < s->h && w >= 0 && w < s->w;
                        dst[p * s->q + q] = in ? x[(c * s->h + h) * s->w + w] : 0.0f;
                    }
                }
            }
}

static void col2im_add(const rg_conv2d_shape *s, const float *col, float *x) {
    int64_t pq = s->p * s->q;
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t r = 0; r < s->r; r++)
            for (int64_t t = 0; t < s->s; t++) {
                const float *src = col + ((c * s->r + r) * s->s + t) * pq;
                for (int64_t p = 0; p < s->p; p++) {
                    int64_t h = p * s->stride_h - s->pad_h + r;
                    if (h < 0 || h >= s->h) continue;
                    for (int64_t q = 0; q < s->q; q++) {
                        int64_t w = q * s->stride_w - s->pad_w + t;
                        if (w >= 0 && w < s->w) x[(c * s->h + h) * s->w + w] += src[p * s->q + q];
                    }
                }
            }
}

static float *col_buffer(const rg_conv2d_shape *s) {
    float *col = rg_cpu_alloc((size_t)(s->c * s->r * s->s * s->p * s->q) * sizeof(float));
    RG_CHECK(col, "conv2d: out of host memory for the im2col buffer");
    return col;
}

static void free_col(const rg_conv2d_shape *s, float *col) {
    rg_cpu_free(col, (size_t)(s->c * s->r * s->s * s->p * s->q) * sizeof(float));
}

void rg_cpu_conv2d_forward(const rg_conv2d_shape *s, const float *x, const float *w,
                           const float *b, float *y) {
    int64_t crs = s->c * s->r * s->s, pq = s->p * s->q;
    float *col = col_buffer(s);
    for (int64_t n = 0; n < s->n; n++) {
        float *yn = y + n * s->k * pq;
        im2col(s, x + n * s->c * s->h * s->w, col);
        rg_cpu_gemm(false, false, s->k, pq, crs, 1.0f, w, crs, col, pq, 0.0f, yn, pq);
        if (b)
            for (int64_t k = 0; k < s->k; k++)
                for (int64_t i = 0; i < pq; i++) yn[k * pq + i] += b[k];
    }
    free_col(s, col);
}

void rg_cpu_conv2d_backward_data(const rg_conv2d_shape *s, const float *dy, const float *w,
                                 float beta, float *dx) {
    int64_t crs = s->c * s->r * s->s, pq = s->p * s->q, chw = s->c * s->h * s->w;
    float *col = col_buffer(s);
    if (beta == 0.0f) rg_cpu_fill(s->n * chw, 0.0f, dx);
    else if (beta != 1.0f) rg_cpu_axpby(s->n * chw, 0.0f, dx, beta, dx);
    for (int64_t n = 0; n < s->n; n++) {
        /* dcol (CRS, PQ) = w^T (CRS, K) dy[n] (K, PQ) */
        rg_cpu_gemm(true, false, crs, pq, s->k, 1.0f, w, crs, dy + n * s->k * pq, pq, 0.0f, col, pq);
        col2im_add(s, col, dx + n * chw);
    }
    free_col(s, col);
}

void rg_cpu_conv2d_backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy,
                                   float beta, float *dw, float *db) {
    int64_t crs = s->c * s->r * s->s, pq = s->p * s->q;
    float *col = col_buffer(s);
    for (int64_t n = 0; n < s->n; n++) {
        const float *dyn = dy + n * s->k * pq;
        im2col(s, x + n * s->c * s->h * s->w, col);
        /* dw (K, CRS) += dy[n] (K, PQ) col^T (PQ, CRS) */
        rg_cpu_gemm(false, true, s->k, crs, pq, 1.0f, dyn, pq, col, pq, n == 0 ? beta : 1.0f, dw,
                    crs);
    }
    if (s->n == 0 && beta != 1.0f) rg_cpu_axpby(s->k * crs, 0.0f, dw, beta, dw);
    free_col(s, col);
    if (!db) return;
    for (int64_t k = 0; k < s->k; k++) {
        double sum = 0.0;
        for (int64_t n = 0; n < s->n; n++)
            for (int64_t i = 0; i < pq; i++) sum += dy[(n * s->k + k) * pq + i];
        db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
    }
}
