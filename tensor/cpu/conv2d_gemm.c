/* conv2d_gemm.c — 1x1 convolutions without padding as matrix products, through OpenBLAS.
 *
 * A 1x1 kernel reads one input pixel per output pixel, so on NCHW data each image's convolution
 * is a plain matrix product with the image as it lies in memory (stride 1) or with the pixels the
 * stride keeps gathered first (a quarter of the image at stride 2):
 *
 *   forward          y[n] (K, P*Q) = w (K, C) . xs[n] (C, P*Q)             + b[k] on every row
 *   backward data    dx[n] (C, H*W) = w^T (C, K) . dy[n] (K, P*Q)          (scattered if strided)
 *   backward filter  dw (K, C)      = sum_n dy[n] (K, P*Q) . xs[n]^T (P*Q, C)
 *
 * These are the products of ResNet-50's bottlenecks (1x1 in, 1x1 out, the downsample), and a
 * tuned GEMM runs them better than the pixel-blocked tiles of conv2d.c, which need a transposition
 * each way and run mostly on tile edges when the planes are small and the channels many: on an
 * AVX-512 Xeon, 1.1-2.3x the tiles' speed on every ResNet-50 1x1 shape (docs/PERFORMANCE.md).
 * RG_CONV_GEMM=0 sends them back to the tiles (to compare the two).
 *
 * Threads: forward and backward data give each thread whole images, each a single-threaded
 * OpenBLAS call (rg_cpu_gemm runs on the calling thread inside a parallel region; with one image
 * it shares the product out itself); backward filter gives each thread a block of rows of dw, so
 * that no partial sums need adding. A fused ReLU is applied over each image's output after its
 * product, and its mask to a copy of dy before the backward products. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"
#include "core/kernels.h"

bool rg_conv_gemm_applies(const rg_conv2d_shape *s) {
    if (s->r != 1 || s->s != 1 || s->pad_h != 0 || s->pad_w != 0) return false;
    const char *v = getenv("RG_CONV_GEMM");
    return !(v && strcmp(v, "0") == 0);
}

static bool strided(const rg_conv2d_shape *s) {
    return s->stride_h != 1 || s->stride_w != 1;
}

/* xs[c * ld + p * Q + q] = the pixels of image x (C, H, W) that the 1x1 kernel reads. */
static void gather(const rg_conv2d_shape *s, const float *x, float *xs, int64_t ld) {
    int64_t pq = s->p * s->q;
    for (int64_t c = 0; c < s->c; c++) {
        if (!strided(s)) {
            memcpy(xs + c * ld, x + c * pq, (size_t)pq * sizeof(float));
            continue;
        }
        for (int64_t p = 0; p < s->p; p++) {
            const float *src = x + (c * s->h + p * s->stride_h) * s->w;
            float *dst = xs + c * ld + p * s->q;
            for (int64_t q = 0; q < s->q; q++) dst[q] = src[q * s->stride_w];
        }
    }
}

/* The image's input as the products read it, (C, P*Q): x itself, or its gathered pixels in xs. */
static const float *image_input(const rg_conv2d_shape *s, const float *x, float *xs) {
    if (!strided(s)) return x;
    gather(s, x, xs, s->p * s->q);
    return xs;
}

void rg_conv_forward_gemm(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                          float *y) {
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w, cpq = s->c * pq;
#pragma omp parallel if (s->n > 1)
    {
        float *xs = strided(s) ? rg_conv_scratch(cpq) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++) {
            float *yn = y + n * s->k * pq;
            if (b)
                for (int64_t k = 0; k < s->k; k++)
                    for (int64_t j = 0; j < pq; j++) yn[k * pq + j] = b[k];
            rg_cpu_gemm(false, false, s->k, pq, s->c, 1.0f, w, s->c,
                        image_input(s, x + n * chw, xs), pq, b ? 1.0f : 0.0f, yn, pq);
            if (s->relu) /* the fused ReLU over the image just written */
                for (int64_t i = 0; i < s->k * pq; i++) yn[i] = rg_k_relu(yn[i]);
        }
        if (xs) rg_conv_scratch_free(xs, cpq);
    }
}

/* dx[n] = beta dx[n] + w^T dy[n] for every image: in place at stride 1, else through dcol (C,
 * P*Q) and scattered, the pixels no window reads getting only beta dx. */
static void backward_data(const rg_conv2d_shape *s, const float *dy, const float *w, float beta,
                          float *dx) {
    int64_t pq = s->p * s->q, hw = s->h * s->w, cpq = s->c * pq;
#pragma omp parallel if (s->n > 1)
    {
        float *dcol = strided(s) ? rg_conv_scratch(cpq) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++) {
            const float *dyn = dy + n * s->k * pq;
            float *dxn = dx + n * s->c * hw;
            if (!dcol) {
                rg_cpu_gemm(true, false, s->c, pq, s->k, 1.0f, w, s->c, dyn, pq, beta, dxn, pq);
                continue;
            }
            rg_cpu_gemm(true, false, s->c, pq, s->k, 1.0f, w, s->c, dyn, pq, 0.0f, dcol, pq);
            for (int64_t c = 0; c < s->c; c++)
                for (int64_t h = 0; h < s->h; h++) {
                    float *row = dxn + (c * s->h + h) * s->w;
                    for (int64_t i = 0; i < s->w; i++) row[i] = beta == 0.0f ? 0.0f : beta * row[i];
                    if (h % s->stride_h != 0 || h / s->stride_h >= s->p) continue;
                    const float *src = dcol + (c * s->p + h / s->stride_h) * s->q;
                    for (int64_t q = 0; q < s->q; q++) row[q * s->stride_w] += src[q];
                }
        }
        if (dcol) rg_conv_scratch_free(dcol, cpq);
    }
}

/* The sum of row[0..len): in SUM_LANES float partial sums (which vectorise; one double summed
 * element by element waited on each add's latency, longer than the whole filter product on
 * ResNet-50's first stage), then added up in double. */
#define SUM_LANES 16
static double row_sum(const float *row, int64_t len) {
    float part[SUM_LANES] = {0};
    int64_t j = 0;
    for (; j + SUM_LANES <= len; j += SUM_LANES)
        for (int l = 0; l < SUM_LANES; l++) part[l] += row[j + l];
    double sum = 0.0;
    for (; j < len; j++) sum += row[j];
    for (int l = 0; l < SUM_LANES; l++) sum += part[l];
    return sum;
}

/* Rows of dw per thread are whole multiples of this (OpenBLAS's register tiles). */
#define ROW_ALIGN 16
/* The filter pass reduces over G*P*Q columns a product: G images when one has fewer than this
 * many output pixels, copied side by side first. One product per image of ResNet-50's last
 * stage at 64x64 (2x2 outputs) would read and write the whole of dw for every 4 columns: it was
 * slower than the tiles until the images went in blocks. */
#define FILTER_DEPTH 256

/* dw = beta dw + sum_n dy[n] xs[n]^T, db = beta db + the sums of dy's rows, a block of rows per
 * thread, G images a product: at P*Q >= FILTER_DEPTH at stride 1 straight from x and dy, else
 * from xb (C, G*P*Q), the G images' pixels side by side, and (when G > 1) dyb, the thread's rows
 * of their dy likewise (kn, G*P*Q). */
static void backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy, float beta,
                            float *dw, float *db) {
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w;
    int64_t g = pq >= FILTER_DEPTH ? 1 : (FILTER_DEPTH + pq - 1) / pq;
    if (g > s->n) g = s->n;
    bool copy = g > 1 || strided(s);
    int nt = omp_get_max_threads();
    int64_t step = (s->k + nt - 1) / nt;
    step = (step + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    int64_t blocks = s->k > step ? (s->k + step - 1) / step : 1;
#pragma omp parallel num_threads(blocks)
    {
        int64_t k0 = omp_get_thread_num() * step, kn = s->k - k0 < step ? s->k - k0 : step;
        int64_t cols = g * pq;
        float *xb = copy ? rg_conv_scratch(s->c * cols) : NULL;
        float *dyb = g > 1 ? rg_conv_scratch(kn * cols) : NULL;
        for (int64_t n0 = 0; n0 < s->n && kn > 0; n0 += g) {
            int64_t gi = s->n - n0 < g ? s->n - n0 : g, len = gi * pq;
            const float *a = dy + (n0 * s->k + k0) * pq, *b = x + n0 * chw;
            int64_t ld = pq;
            if (copy) { /* image i's columns at i*P*Q of each row */
                for (int64_t i = 0; i < gi; i++) {
                    gather(s, x + (n0 + i) * chw, xb + i * pq, len);
                    for (int64_t k = 0; dyb && k < kn; k++)
                        memcpy(dyb + k * len + i * pq, dy + ((n0 + i) * s->k + k0 + k) * pq,
                               (size_t)pq * sizeof(float));
                }
                b = xb, ld = len;
                if (dyb) a = dyb;
            }
            rg_cpu_gemm(false, true, kn, s->c, len, 1.0f, a, dyb ? len : pq, b, ld,
                        n0 == 0 ? beta : 1.0f, dw + k0 * s->c, s->c);
        }
        for (int64_t k = k0; db && k < k0 + kn; k++) {
            double sum = 0.0;
            for (int64_t n = 0; n < s->n; n++) sum += row_sum(dy + (n * s->k + k) * pq, pq);
            db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
        }
        if (dyb) rg_conv_scratch_free(dyb, kn * cols);
        if (xb) rg_conv_scratch_free(xb, s->c * cols);
    }
}

void rg_conv_backward_gemm(const rg_conv2d_shape *s, const float *x, const float *dy,
                           const float *w, float beta_x, float *dx, float beta_w, float *dw,
                           float *db) {
    RG_CHECK(dw || !db, "conv2d: the bias gradient comes with the filter pass only");
    if (!dx && !dw) return;
    int64_t len = s->n * s->k * s->p * s->q;
    float *masked = NULL;
    if (s->relu_y) { /* dy where the fused ReLU's output is positive (or NaN), else 0 */
        masked = rg_conv_scratch(len);
#pragma omp parallel for schedule(static) if (len > RG_CPU_PAR_MIN)
        for (int64_t i = 0; i < len; i++) masked[i] = rg_k_relu_grad(s->relu_y[i], dy[i]);
        dy = masked;
    }
    if (dx) backward_data(s, dy, w, beta_x, dx);
    if (dw) backward_filter(s, x, dy, beta_w, dw, db);
    if (masked) rg_conv_scratch_free(masked, len);
}
