/* conv2d_gemm.c — convolutions as matrix products through OpenBLAS: 1x1 kernels without padding,
 * and the filter pass of larger kernels on small planes.
 *
 * A 1x1 kernel reads one input pixel per output pixel, so on NCHW data a convolution is a plain
 * matrix product with the images as they lie in memory (stride 1), or with the pixels the stride
 * keeps gathered first (a quarter of each image at stride 2). With xs the (C, P*Q) pixels read:
 *
 *   forward          y[n] (K, P*Q)  = w (K, C) . xs[n] (C, P*Q)              + b[k] on row k
 *   backward data    dx[n] (C, H*W) = w^T (C, K) . dy[n] (K, P*Q)           (scattered if strided)
 *   backward filter  dw (K, C)      = sum_n dy[n] (K, P*Q) . xs[n]^T (P*Q, C)
 *
 * These are ResNet-50's bottleneck convolutions (1x1 in, 1x1 out, the downsample). The tiles of
 * conv2d.c need a transposition each way for them and run mostly on tile edges when planes are
 * small and channels many; a tuned GEMM needs neither. An image with fewer than ALONE_PIXELS
 * output pixels goes into a product with the next ones, their rows copied side by side into a
 * scratch block (G images: (C, G*P*Q) of x, (K, G*P*Q) of dy or y), so that no product is only a
 * few columns wide.
 *
 * Larger kernels on small planes with many channels (ResNet's stage 3-4 3x3s) bring only their
 * filter pass here: dw = sum over blocks of dy's block times the block's im2col matrix transposed
 * (forward through im2col measured slower than the tiles on three of those four shapes, and the
 * data pass would need a col2im). RG_CONV_GEMM=0 sends every shape back to the tiles (to compare).
 *
 * Threads: forward and backward data give each thread whole blocks of images, each product a
 * single-threaded OpenBLAS call (rg_cpu_gemm stays on its thread inside a parallel region; with
 * one block it shares the product out itself); backward filter gives each thread a slice of dw,
 * rows for 1x1 and columns (of the im2col matrix's rows, which each thread builds for itself)
 * for larger kernels, so that no partial sums need adding. A fused ReLU is applied to each block's
 * output after its product, and its mask to a copy of dy before the backward products. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"
#include "core/kernels.h"

static bool gemm_enabled(void) {
    const char *v = getenv("RG_CONV_GEMM");
    return !(v && strcmp(v, "0") == 0);
}

static bool one_by_one(const rg_conv2d_shape *s) {
    return s->r == 1 && s->s == 1 && s->pad_h == 0 && s->pad_w == 0;
}

bool rg_conv_gemm_applies(const rg_conv2d_shape *s) {
    return one_by_one(s) && gemm_enabled();
}

/* Larger kernels run the filter pass through im2col and a product when the output plane is
 * small (at most SMALL_PLANE pixels, or STRIDED_PLANE at a stride) and the reduction of
 * the forward pass long (C*R*S >= LONG_CRS): ResNet's stride-2 3x3s of stages 3-4 and its 7x7
 * 3x3s, where the tiles starve (few pixels a chunk against many channels; on an AVX-512 Xeon their
 * filter pass took 1.5-3.7x as long as this one, docs/PERFORMANCE.md). */
#define SMALL_PLANE 64
#define STRIDED_PLANE 196
#define LONG_CRS 2048

bool rg_conv_gemm_filter_applies(const rg_conv2d_shape *s) {
    if (!gemm_enabled()) return false;
    if (one_by_one(s)) return true;
    int64_t pq = s->p * s->q;
    bool stride = s->stride_h > 1 || s->stride_w > 1;
    return s->c * s->r * s->s >= LONG_CRS && (pq <= SMALL_PLANE || (stride && pq <= STRIDED_PLANE));
}

static bool strided(const rg_conv2d_shape *s) {
    return s->stride_h != 1 || s->stride_w != 1;
}

/* An image with fewer than ALONE_PIXELS output pixels goes into a product with the next ones, G
 * images side by side, G * P*Q >= BLOCK_COLUMNS columns: one product per image of ResNet-50's
 * last stage at 64x64 input (2x2 outputs) would be 4 columns wide, and in the filter pass would
 * read and write the whole of dw for every 4 columns of its reduction. Measured on ResNet-50's
 * shapes: at 7x7 blocks of 6 images beat blocks of 3 (1.05-1.15x), at 14x14 one image alone
 * beat blocks of 2 (1.05-1.15x: the copies cost more than the wider product gains). */
#define ALONE_PIXELS 128
#define BLOCK_COLUMNS 256

/* G, for blocks shared out among `threads` threads: when there are several, a multiple of
 * `threads` of them (ResNet-50's 7x7 planes, 16 images: 4 blocks of 4 rather than 3 of 6, one
 * thread with two and the other one). */
static int64_t block_images(const rg_conv2d_shape *s, int threads) {
    int64_t n = s->n > 0 ? s->n : 1, pq = s->p * s->q;
    int64_t g = pq >= ALONE_PIXELS ? 1 : (BLOCK_COLUMNS + pq - 1) / pq;
    int64_t blocks = (n + g - 1) / g;
    if (blocks > 1 && threads > 1) blocks = (blocks + threads - 1) / threads * threads;
    return (n + blocks - 1) / blocks;
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

/* Copies len floats for each row r < rows of images i < g, between image-major data (row r of
 * image i at (i * image_rows + r) * len) and a block holding the images' rows side by side (at
 * (r * g + i) * len): into the block, or with to_images back out of it. */
static void block_copy(int64_t g, int64_t rows, int64_t image_rows, int64_t len, const float *src,
                       float *dst, bool to_images) {
    for (int64_t i = 0; i < g; i++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t image = (i * image_rows + r) * len, block = (r * g + i) * len;
            memcpy(dst + (to_images ? image : block), src + (to_images ? block : image),
                   (size_t)len * sizeof(float));
        }
}

/* out (K, len), a product's output: the bias added to row k, and the fused ReLU, still in cache. */
static void finish_output(const rg_conv2d_shape *s, const float *b, float *out, int64_t len) {
    for (int64_t k = 0; k < s->k; k++) {
        float *row = out + k * len;
        if (b)
            for (int64_t j = 0; j < len; j++) row[j] += b[k];
        if (s->relu)
            for (int64_t j = 0; j < len; j++) row[j] = rg_k_relu(row[j]);
    }
}

void rg_conv_forward_gemm(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                          float *y) {
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w, g = block_images(s, omp_get_max_threads());
    int64_t cols = g * pq, nblocks = (s->n + g - 1) / g;
    bool in_place = g == 1 && !strided(s); /* x and y as they are */
#pragma omp parallel if (nblocks > 1)
    {
        float *xb = in_place ? NULL : rg_conv_scratch(s->c * cols);
        float *yb = g > 1 ? rg_conv_scratch(s->k * cols) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < nblocks; bi++) {
            int64_t n0 = bi * g, gi = s->n - n0 < g ? s->n - n0 : g, len = gi * pq;
            float *yn = y + n0 * s->k * pq, *out = yb ? yb : yn;
            for (int64_t i = 0; xb && i < gi; i++) gather(s, x + (n0 + i) * chw, xb + i * pq, len);
            rg_cpu_gemm(false, false, s->k, len, s->c, 1.0f, w, s->c, xb ? xb : x + n0 * chw, len,
                        0.0f, out, len);
            finish_output(s, b, out, len);
            if (yb) block_copy(gi, s->k, s->k, pq, yb, yn, true);
        }
        if (yb) rg_conv_scratch_free(yb, s->k * cols);
        if (xb) rg_conv_scratch_free(xb, s->c * cols);
    }
}

/* dx[n] = beta dx[n] + w^T dy[n], G images a product: in place for one image at stride 1, else
 * through dcol (C, G*P*Q) and written out, the pixels no window reads getting only beta dx. */
static void backward_data(const rg_conv2d_shape *s, const float *dy, const float *w, float beta,
                          float *dx) {
    int64_t pq = s->p * s->q, hw = s->h * s->w, g = block_images(s, omp_get_max_threads());
    int64_t cols = g * pq, nblocks = (s->n + g - 1) / g;
    bool in_place = g == 1 && !strided(s);
#pragma omp parallel if (nblocks > 1)
    {
        float *dcol = in_place ? NULL : rg_conv_scratch(s->c * cols);
        float *dyb = g > 1 ? rg_conv_scratch(s->k * cols) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < nblocks; bi++) {
            int64_t n0 = bi * g, gi = s->n - n0 < g ? s->n - n0 : g, len = gi * pq;
            const float *dyn = dy + n0 * s->k * pq;
            float *dxn = dx + n0 * s->c * hw;
            if (in_place) {
                rg_cpu_gemm(true, false, s->c, pq, s->k, 1.0f, w, s->c, dyn, pq, beta, dxn, pq);
                continue;
            }
            if (dyb) block_copy(gi, s->k, s->k, pq, dyn, dyb, false);
            rg_cpu_gemm(true, false, s->c, len, s->k, 1.0f, w, s->c, dyb ? dyb : dyn, len, 0.0f,
                        dcol, len);
            for (int64_t i = 0; i < gi; i++)
                for (int64_t c = 0; c < s->c; c++)
                    for (int64_t h = 0; h < s->h; h++) {
                        float *row = dxn + ((i * s->c + c) * s->h + h) * s->w;
                        const float *src = dcol + c * len + i * pq;
                        if (!strided(s)) {
                            src += h * s->w;
                            for (int64_t q = 0; q < s->w; q++)
                                row[q] = src[q] + (beta == 0.0f ? 0.0f : beta * row[q]);
                            continue;
                        }
                        for (int64_t q = 0; q < s->w; q++)
                            row[q] = beta == 0.0f ? 0.0f : beta * row[q];
                        if (h % s->stride_h != 0 || h / s->stride_h >= s->p) continue;
                        src += h / s->stride_h * s->q;
                        for (int64_t q = 0; q < s->q; q++) row[q * s->stride_w] += src[q];
                    }
        }
        if (dyb) rg_conv_scratch_free(dyb, s->k * cols);
        if (dcol) rg_conv_scratch_free(dcol, s->c * cols);
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

/* Rows or columns of dw per thread are whole multiples of this (OpenBLAS's register tiles). */
#define SLICE_ALIGN 16

/* Cuts len rows or columns into slices for the threads: returns the slice length, *parts the
 * number of slices (at least 1). */
static int64_t thread_slices(int64_t len, int *parts) {
    int nt = omp_get_max_threads();
    int64_t step = (len + nt - 1) / nt;
    step = (step + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    *parts = len > step ? (int)((len + step - 1) / step) : 1;
    return step;
}

/* db[k] = beta db[k] + the sum of dy's row k over every image, for k in [k0, k1). */
static void bias_rows(const rg_conv2d_shape *s, const float *dy, float beta, float *db, int64_t k0,
                      int64_t k1) {
    int64_t pq = s->p * s->q;
    for (int64_t k = k0; k < k1; k++) {
        double sum = 0.0;
        for (int64_t n = 0; n < s->n; n++) sum += row_sum(dy + (n * s->k + k) * pq, pq);
        db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
    }
}

/* dw = beta dw + sum_n dy[n] xs[n]^T, db = beta db + the sums of dy's rows, a block of rows per
 * thread, G images a product: for one image at stride 1 straight from x and dy, else from xb (C,
 * G*P*Q), the G images' pixels side by side, and (when G > 1) dyb, the thread's rows of their dy
 * likewise (kn, G*P*Q). */
static void backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy, float beta,
                            float *dw, float *db) {
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w, g = block_images(s, 1), cols = g * pq;
    bool in_place = g == 1 && !strided(s);
    int parts;
    int64_t step = thread_slices(s->k, &parts);
#pragma omp parallel num_threads(parts)
    {
        int64_t k0 = omp_get_thread_num() * step, kn = s->k - k0 < step ? s->k - k0 : step;
        float *xb = in_place ? NULL : rg_conv_scratch(s->c * cols);
        float *dyb = g > 1 ? rg_conv_scratch(kn * cols) : NULL;
        for (int64_t n0 = 0; n0 < s->n && kn > 0; n0 += g) {
            int64_t gi = s->n - n0 < g ? s->n - n0 : g, len = gi * pq;
            const float *dyn = dy + (n0 * s->k + k0) * pq;
            for (int64_t i = 0; xb && i < gi; i++) gather(s, x + (n0 + i) * chw, xb + i * pq, len);
            if (dyb) block_copy(gi, kn, s->k, pq, dyn, dyb, false);
            rg_cpu_gemm(false, true, kn, s->c, len, 1.0f, dyb ? dyb : dyn, len,
                        xb ? xb : x + n0 * chw, len, n0 == 0 ? beta : 1.0f, dw + k0 * s->c, s->c);
        }
        if (db) bias_rows(s, dy, beta, db, k0, k0 + kn);
        if (dyb) rg_conv_scratch_free(dyb, kn * cols);
        if (xb) rg_conv_scratch_free(xb, s->c * cols);
    }
}

/* col[(t - t0) * ld + p * Q + q] for t = (c, r, u) in [t0, t1): what tap (r, u) of output pixel
 * (p, q)'s window reads in channel c of image x (C, H, W), 0 in the padding. */
static void im2col(const rg_conv2d_shape *s, const float *x, int64_t t0, int64_t t1, float *col,
                   int64_t ld) {
    int64_t rs = s->r * s->s;
    for (int64_t t = t0; t < t1; t++) {
        int64_t c = t / rs, r = t % rs / s->s, u = t % s->s;
        float *dst = col + (t - t0) * ld;
        for (int64_t p = 0; p < s->p; p++, dst += s->q) {
            int64_t h = p * s->stride_h - s->pad_h + r;
            if (h < 0 || h >= s->h) {
                memset(dst, 0, (size_t)s->q * sizeof(float));
                continue;
            }
            const float *row = x + (c * s->h + h) * s->w;
            for (int64_t q = 0; q < s->q; q++) {
                int64_t w = q * s->stride_w - s->pad_w + u;
                dst[q] = w >= 0 && w < s->w ? row[w] : 0.0f;
            }
        }
    }
}

/* The filter pass of a larger kernel: dw (K, C*R*S) = beta dw + sum over blocks of G images of
 * dy's block (K, G*P*Q) times the block's im2col matrix (C*R*S, G*P*Q) transposed. Each thread
 * takes a block of columns of dw, (c, r, u) in [t0, t0 + tn), and builds only those rows of the
 * im2col matrix (nine times the input at 3x3: built once, by the thread that needs them). */
static void backward_filter_im2col(const rg_conv2d_shape *s, const float *x, const float *dy,
                                   float beta, float *dw, float *db) {
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w, crs = s->c * s->r * s->s;
    int64_t g = block_images(s, 1), cols = g * pq;
    int parts;
    int64_t step = thread_slices(crs, &parts);
#pragma omp parallel num_threads(parts)
    {
        int64_t t0 = omp_get_thread_num() * step, tn = crs - t0 < step ? crs - t0 : step;
        float *col = rg_conv_scratch(tn * cols), *dyb = g > 1 ? rg_conv_scratch(s->k * cols) : NULL;
        for (int64_t n0 = 0; n0 < s->n && tn > 0; n0 += g) {
            int64_t gi = s->n - n0 < g ? s->n - n0 : g, len = gi * pq;
            const float *dyn = dy + n0 * s->k * pq;
            for (int64_t i = 0; i < gi; i++)
                im2col(s, x + (n0 + i) * chw, t0, t0 + tn, col + i * pq, len);
            if (dyb) block_copy(gi, s->k, s->k, pq, dyn, dyb, false);
            rg_cpu_gemm(false, true, s->k, tn, len, 1.0f, dyb ? dyb : dyn, len, col, len,
                        n0 == 0 ? beta : 1.0f, dw + t0, crs);
        }
        if (dyb) rg_conv_scratch_free(dyb, s->k * cols);
        rg_conv_scratch_free(col, tn * cols);
    }
    if (db) {
#pragma omp parallel for schedule(static) if (s->k > 1)
        for (int64_t k = 0; k < s->k; k++) bias_rows(s, dy, beta, db, k, k + 1);
    }
}

void rg_conv_backward_gemm(const rg_conv2d_shape *s, const float *x, const float *dy,
                           const float *w, float beta_x, float *dx, float beta_w, float *dw,
                           float *db) {
    RG_CHECK(dw || !db, "conv2d: the bias gradient comes with the filter pass only");
    RG_CHECK(one_by_one(s) || !dx, "conv2d: only a 1x1 kernel's data pass runs as a product");
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
    if (dw && one_by_one(s))
        backward_filter(s, x, dy, beta_w, dw, db);
    else if (dw)
        backward_filter_im2col(s, x, dy, beta_w, dw, db);
    if (masked) rg_conv_scratch_free(masked, len);
}
