/* conv2d_gemm.c — convolutions as matrix products through OpenBLAS: 1x1 kernels without padding,
 * and the filter pass of larger kernels on small planes.
 *
 * A 1x1 kernel reads one input pixel per output pixel, so on NCHW data a convolution is a plain
 * matrix product with the images as they lie in memory (stride 1), or with the pixels the stride
 * keeps gathered first (a quarter of each image at stride 2: the im2col matrix of a 1x1 kernel).
 * With xs the (C, P*Q) pixels read:
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
 * single-threaded OpenBLAS call (rg_cpu_gemm_blas stays on its thread inside a parallel region;
 * with one block it shares the product out itself); backward filter gives each thread a slice of
 * dw's columns (c, r, s), for which it builds only its rows of the im2col matrix (for a 1x1 kernel
 * these are channels of x, read in place at stride 1), so that no partial sums need adding; a
 * block's dy, which every slice's product reads whole, is copied once, shared out among them (each
 * thread copying all of it took 5% of ResNet-50's 7x7 1x1 filter passes at two threads). A fused
 * ReLU is applied to each block's output after its product, and its mask to a copy of dy before the
 * backward products.
 *
 * Whose product: OpenBLAS's (rg_cpu_gemm_blas), except in the AVX-512 copy when OpenBLAS runs no
 * AVX-512 kernels itself (tile_products): there rg_cpu_gemm runs them on the register tile of
 * gemm_tile.c (and the data pass reads a copy of w^T, made once a pass). OpenBLAS's AVX2 kernels,
 * which OPENBLAS_CORETYPE=Haswell selects (as this project's Zen 5 VMs set it) and which an
 * OpenBLAS that predates the CPU falls back to, took 1.6-1.9x the tile's time on ResNet-50's 1x1
 * shapes, and the ResNet-50 step at 64 px 1.18x (one thread) and 1.16x (two); OpenBLAS's AVX-512
 * kernels are the faster ones by a few per cent at one thread (the step: 420 against 441 ms; the
 * same at two threads), so they keep the products when they run (Zen 5, 2026-11-29,
 * docs/PERFORMANCE.md). On the tile each output is the same in-order sum whichever images share
 * its product, so a batch split across ranks gives the same bits. In the AVX-512 copy, small planes
 * with many channels take neither: the tile runs over the whole batch's columns at once, which a
 * product an image cannot do on NCHW data without a copy (run_tile_pass and backward_filter_tiles,
 * below). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"
#include "core/kernels.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

static bool one_by_one(const rg_conv2d_shape *s) {
    return s->r == 1 && s->s == 1 && s->pad_h == 0 && s->pad_w == 0;
}

bool rg_conv_gemm_applies(const rg_conv2d_shape *s) {
    return one_by_one(s) && rg_conv_switch_on("RG_CONV_GEMM");
}

/* Larger kernels run the filter pass through im2col and a product when the output plane is
 * small (at most SMALL_PLANE pixels) and the reduction of the forward pass long (C*R*S >=
 * LONG_CRS): ResNet's 7x7 3x3s of stage 4 (stride 1 and 2), where the tiles starve (few pixels a
 * chunk against many channels: 1.1-1.3x as long as this path on Zen 5). Stride-2 planes of 14x14
 * (ResNet-50's stage 3) came here too until the tiles' rows ran in (r,s,c) order; now the tiles
 * take 0.85x this path's time there with AVX-512 (docs/PERFORMANCE.md). */
#if defined(__AVX512F__)
#define SMALL_PLANE 64
#define LONG_CRS 2048
#else
/* Without AVX-512 the tile has half the registers and half the width, and more shapes starve on
 * it: the 14x14 planes of the stride-2 3x3s of stage 3 run here too. On the Zen 3 (AVX2, one
 * thread / two, thirtieth session, docs/PERFORMANCE.md) ResNet-50's 256-channel one took 77-85 /
 * 50-56 ms on the tiles against 50-57 / 29-33 here, ResNet-18's 128-channel one 41-46 / 24-30
 * against 29-31 / 15-16; the ResNet-18 and -50 steps at 64 px, whose stage-3 planes are 4x4,
 * took 0.90-1.02x their time with these limits (five of six alternated runs faster). */
#define SMALL_PLANE 256
#define LONG_CRS 1024
#endif

bool rg_conv_gemm_filter_applies(const rg_conv2d_shape *s) {
    if (!rg_conv_switch_on("RG_CONV_GEMM")) return false;
    if (one_by_one(s)) return true;
    return s->c * s->r * s->s >= LONG_CRS && s->p * s->q <= SMALL_PLANE;
}

static bool strided(const rg_conv2d_shape *s) {
    return s->stride_h != 1 || s->stride_w != 1;
}

/* An image with fewer than ALONE_PIXELS output pixels goes into a product with the next ones, G
 * images side by side, G * P*Q >= BLOCK_COLUMNS columns (FILTER_COLUMNS in the filter pass):
 * one product per image of ResNet-50's last stage at 64x64 input (2x2 outputs) would be 4
 * columns wide, and in the filter pass would read and write the whole of dw for every 4 columns
 * of its reduction. Measured on ResNet-50's shapes: at 7x7 blocks of 6 images beat blocks of 3
 * (1.05-1.15x), at 14x14 one image alone beat blocks of 2 (1.05-1.15x: the copies cost more than
 * the wider product gains). The forward and data passes copy the same bytes whatever the block,
 * so at 7x7 theirs take the whole batch (16 images, 784 columns) at one thread and half of it
 * each at two: ResNet-50's stage-4 1x1s took 0.93-0.98x the time of blocks of 6 at one thread.
 * The filter pass keeps blocks of 6 (FILTER_COLUMNS): its products reduce over the block's
 * columns, and whole-batch blocks took 1.05-1.2x as long at two threads (Zen 5,
 * docs/PERFORMANCE.md). */
#define ALONE_PIXELS 128
#define BLOCK_COLUMNS 1024
#define FILTER_COLUMNS 256

typedef struct {
    int64_t g;     /* images a block (the last may have fewer) */
    int64_t count; /* blocks covering the batch */
    int64_t cols;  /* columns of a full block, G*P*Q */
    bool in_place; /* one image a block and a 1x1 kernel at stride 1: x, y, dy, dx as they are */
} image_blocks;

/* The blocks of a pass shared out among `threads` threads: a multiple of `threads` of them when
 * there are at least as many images as threads (ResNet-50's 7x7 planes, 16 images, two threads:
 * 2 blocks of 8, a product per thread, rather than one block whose product rg_cpu_gemm_blas would
 * cut in two after a copy by one thread, or 3 blocks, one thread with two and the other one). */
static image_blocks blocks_of(const rg_conv2d_shape *s, int threads, int64_t columns) {
    int64_t n = s->n > 0 ? s->n : 1, pq = s->p * s->q;
    int64_t g = pq >= ALONE_PIXELS ? 1 : (columns + pq - 1) / pq;
    int64_t count = (n + g - 1) / g;
    if (threads > 1 && n >= threads) count = (count + threads - 1) / threads * threads;
    g = (n + count - 1) / count;
    image_blocks b = {.g = g, .count = (n + g - 1) / g, .cols = g * pq};
    b.in_place = g == 1 && one_by_one(s) && !strided(s);
    return b;
}

/* off[tap * P*Q + j]: where output pixel j's window reads at tap (r, u) in a channel's (H, W)
 * plane, or -1 in the padding. From the scratch pool; free with rg_conv_scratch_free(off,
 * tap_table_len(s)). NULL for the shapes whose im2col copies without it. */
static int64_t tap_table_len(const rg_conv2d_shape *s) {
    return s->r * s->s * s->p * s->q;
}

/* Whether im2col copies shifted planes (im2col_shifted): stride 1 with the output plane the input's
 * size (a 3x3 kernel with padding 1), small enough for its masks. */
#define SHIFTED_MAX_PIXELS 64
#define SHIFTED_MAX_TAPS 64
static bool shifted_planes(const rg_conv2d_shape *s) {
#if defined(__AVX512F__)
    return s->stride_h == 1 && s->stride_w == 1 && s->p == s->h && s->q == s->w &&
           s->p * s->q <= SHIFTED_MAX_PIXELS && s->r * s->s <= SHIFTED_MAX_TAPS;
#else
    (void)s;
    return false;
#endif
}

/* Whether im2col reads the table: not for a 1x1 kernel at stride 1 or 2 (plain copies), nor
 * for shifted planes. */
static bool reads_tap_table(const rg_conv2d_shape *s) {
    return !(one_by_one(s) && (!strided(s) || s->stride_w == 2)) && !shifted_planes(s);
}

#if defined(__AVX512F__)
/* im2col (below) where the output plane is the input's (stride 1, H x W both): tap (r, u) of
 * output pixel j = p W + q reads input pixel j + (r - pad_h) W + (u - pad_w), so a row of the
 * matrix is the channel's plane shifted, with the pixels whose window falls in the padding set
 * to 0. Each vector of 16 is one load under a mask of the pixels that read inside the plane
 * (the load reads nothing in the lanes it leaves out, so nothing before x or past it, and they
 * read as 0) and one store, masked only at the plane's end. Through the table, one element at a
 * time, this copy was 15% of ResNet-18's stage-4 3x3 filter pass (docs/PERFORMANCE.md). */
static void im2col_shifted(const rg_conv2d_shape *s, const float *x, int64_t t0, int64_t t1,
                           float *col, int64_t ld) {
    const int64_t rs = s->r * s->s, hw = s->h * s->w, nv = (hw + 15) / 16;
    __mmask16 mask[SHIFTED_MAX_TAPS * (SHIFTED_MAX_PIXELS / 16)] = {0};
    for (int64_t tap = 0; tap < rs; tap++)
        for (int64_t j = 0; j < hw; j++) {
            int64_t h = j / s->w + tap / s->s - s->pad_h, w = j % s->w + tap % s->s - s->pad_w;
            if (h >= 0 && h < s->h && w >= 0 && w < s->w)
                mask[tap * nv + j / 16] |= (__mmask16)(1u << (j % 16));
        }
    const __mmask16 tail = (__mmask16)(hw % 16 ? (1u << (hw % 16)) - 1u : 0xffffu);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t tap = t % rs;
        const int64_t delta = (tap / s->s - s->pad_h) * s->w + (tap % s->s - s->pad_w);
        /* may lie a pixel or a row before x (delta < 0) in lanes the masks leave out: an
         * address, not a C pointer into x */
        const uintptr_t src = (uintptr_t)(x + t / rs * hw) + (uintptr_t)(delta * 4);
        float *dst = col + (t - t0) * ld;
        for (int64_t v = 0; v < nv; v++) {
            __m512 val = _mm512_maskz_loadu_ps(mask[tap * nv + v], (const void *)(src + 64 * v));
            if (v < nv - 1)
                _mm512_storeu_ps(dst + 16 * v, val);
            else
                _mm512_mask_storeu_ps(dst + 16 * v, tail, val);
        }
    }
}
#endif

static int32_t *tap_table(const rg_conv2d_shape *s) {
    if (!reads_tap_table(s)) return NULL;
    int32_t *off = (int32_t *)rg_conv_scratch(tap_table_len(s));
    int32_t *o = off;
    for (int64_t r = 0; r < s->r; r++)
        for (int64_t u = 0; u < s->s; u++)
            for (int64_t p = 0; p < s->p; p++)
                for (int64_t q = 0; q < s->q; q++) {
                    int64_t h = p * s->stride_h - s->pad_h + r, w = q * s->stride_w - s->pad_w + u;
                    *o++ = h >= 0 && h < s->h && w >= 0 && w < s->w ? (int32_t)(h * s->w + w) : -1;
                }
    return off;
}

/* col[(t - t0) * ld + j] for t = (c, r, u) in [t0, t1) and output pixel j: what tap (r, u) of
 * pixel j's window reads in channel c of image x (C, H, W), 0 in the padding; off is
 * tap_table(s). For a 1x1 kernel these are the pixels of channels t0..t1 that the stride keeps.
 * One branch-free loop over the table per row (the compiler gathers): a loop per output row with
 * its own bounds tests cost more than the copying on the small planes this path takes. A 1x1
 * kernel has no bounds to test: at stride 1 a row is a copy of the channel, at stride 2 every
 * other pixel of every other input row, a constant stride the compiler vectorises with shuffles.
 * Through the table's gathers those took 0.5-0.8 ms of ResNet-50's 7x7 1x1 passes (8 ms, the
 * whole batch in one block) and 7% of ResNet-18's 1x1/2 ones (docs/PERFORMANCE.md). With
 * AVX-512, a kernel whose output plane is its input's (3x3, padding 1) copies shifted planes under
 * masks (im2col_shifted). */
static void im2col(const rg_conv2d_shape *s, const int32_t *off, const float *x, int64_t t0,
                   int64_t t1, float *col, int64_t ld) {
    int64_t rs = s->r * s->s, pq = s->p * s->q, hw = s->h * s->w;
    if (one_by_one(s) && !strided(s)) { /* the identity table: whole rows */
        for (int64_t t = t0; t < t1; t++)
            memcpy(col + (t - t0) * ld, x + t * hw, (size_t)pq * sizeof(float));
        return;
    }
    if (one_by_one(s) && s->stride_w == 2) { /* every other pixel of every stride_h-th row */
        for (int64_t t = t0; t < t1; t++)
            for (int64_t p = 0; p < s->p; p++) {
                const float *row = x + t * hw + p * s->stride_h * s->w;
                float *dst = col + (t - t0) * ld + p * s->q;
                for (int64_t q = 0; q < s->q; q++) dst[q] = row[2 * q];
            }
        return;
    }
#if defined(__AVX512F__)
    if (shifted_planes(s)) {
        im2col_shifted(s, x, t0, t1, col, ld);
        return;
    }
#endif
    for (int64_t t = t0; t < t1; t++) {
        const float *xc = x + t / rs * hw;
        const int32_t *o = off + t % rs * pq;
        float *dst = col + (t - t0) * ld;
        for (int64_t j = 0; j < pq; j++) {
            int32_t i = o[j];
            dst[j] = i >= 0 ? xc[i] : 0.0f;
        }
    }
}

/* Copies len floats for each row r < rows of images i < g, between image-major data (row r of
 * image i at (i * image_rows + r) * len) and a block holding the images' rows side by side (at
 * (r * g + i) * len): into the block, or with to_images back out of it. */
static void block_copy_row(int64_t g, int64_t rows, int64_t image_rows, int64_t len,
                           const float *src, float *dst, bool to_images, int64_t ir) {
    int64_t i = ir / rows, r = ir % rows; /* image i's row r */
    int64_t image = (i * image_rows + r) * len, block = (r * g + i) * len;
    memcpy(dst + (to_images ? image : block), src + (to_images ? block : image),
           (size_t)len * sizeof(float));
}

static void block_copy(int64_t g, int64_t rows, int64_t image_rows, int64_t len, const float *src,
                       float *dst, bool to_images) {
    for (int64_t ir = 0; ir < g * rows; ir++)
        block_copy_row(g, rows, image_rows, len, src, dst, to_images, ir);
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

/* w^T (C x K) of a 1x1 kernel's w (K x C), from the scratch pool (free with
 * rg_conv_scratch_free(wt, C * K)): the tile reads its rows' reduction steps one after the other
 * (reading w's columns in place, C floats apart, cost up to 1.2x the time of a data pass). */
static float *transposed_weights(const rg_conv2d_shape *s, const float *w) {
    float *wt = rg_conv_scratch(s->c * s->k);
#pragma omp parallel for schedule(static)
    for (int64_t k0 = 0; k0 < s->k; k0 += RG_CONV_NR) /* filters k0.. become columns k0.. */
        rg_conv_transpose(s->k - k0 < RG_CONV_NR ? s->k - k0 : RG_CONV_NR, s->c, w + k0 * s->c,
                          s->c, wt + k0, s->k, NULL, 0.0f);
    return wt;
}

#if defined(__AVX512F__)
/* ---- 1x1 passes on the register tile, for deep channels on small planes (AVX-512) ----
 *
 * On planes of at most TILE_PIXELS output pixels, reducing over at least TILE_REDUCTION channels
 * (ResNet-50's stage 3-4 1x1s: 14x14 and 7x7 planes, 256-2048 channels), the forward pass and the
 * stride-1 data pass run on rg_conv_tile instead of OpenBLAS, over the batch's columns as one
 * matrix: column j is pixel j % (P*Q) of image j / (P*Q), and a panel of RG_CONV_NR columns may
 * straddle two images. Each panel is packed (reduction x NR) straight from x (forward) or dy
 * (data pass) — the pack a GEMM makes anyway — every output row runs over it (a filter's row of
 * w; for the data pass a row of w^T, transposed once a pass: reading w's columns in place through
 * the tile's offsets t*C measured 0.9-1.05x OpenBLAS, the copy 1.06-1.11x), and the panel's result
 * is written out image by image, with the bias and the ReLU (forward) or beta (data pass).
 * What this saves: OpenBLAS, called once an image, packs the whole weight matrix again for every
 * image (2-4 MB per call on these shapes) and runs a 196-column product on 3 full panels and a
 * sliver; at 7x7, where a product an image is too narrow, the images went through a copy into one
 * block first (8% of the pass). Measured at one thread on Zen 5 (docs/PERFORMANCE.md, a hot
 * driver and ringgrad-bench): 1.03-1.08x OpenBLAS's SkylakeX kernels an image at 14x14, and at
 * 7x7 about the speed of one OpenBLAS call on the whole batch without the copy; from 256 channels
 * (TILE_REDUCTION 512 until the twenty-sixth session) 1.02-1.05x on the three passes it added,
 * ResNet-18's 14x14/2 forward and ResNet-50's stage-3 1x1e forward and 1x1b data pass; at 28x28
 * and on 128 channels no gain (0.98-1.00), so those stay with OpenBLAS, as do strided forwards on
 * planes over TILE_STRIDED_PIXELS (gathering their panels cost more than the product gained:
 * 0.94x on ResNet-50's 28x28/2) and strided data passes (dx scattered). Each output is the same
 * in-order sum of products whatever panel or thread computes it: a batch split across ranks gives
 * the same bits. RG_GEMM_TILE=0 keeps OpenBLAS here too (to compare). */
#define TILE_PIXELS 256
#define TILE_REDUCTION 256
#define TILE_STRIDED_PIXELS 64

static bool tile_forward_applies(const rg_conv2d_shape *s) {
    int64_t pq = s->p * s->q;
    return s->c >= TILE_REDUCTION && pq <= (strided(s) ? TILE_STRIDED_PIXELS : TILE_PIXELS) &&
           rg_conv_switch_on("RG_GEMM_TILE");
}

static bool tile_data_applies(const rg_conv2d_shape *s) {
    return !strided(s) && s->k >= TILE_REDUCTION && s->p * s->q <= TILE_PIXELS &&
           rg_conv_switch_on("RG_GEMM_TILE");
}

/* One pass: dst[image, m, pixel] = epilogue(sum_t a_m[off[t]] * src[image, t, pixel(column)]). */
typedef struct {
    int64_t rows, red; /* output channels (K forward, C data pass), reduction (C, K) */
    const float *a;    /* row m at a + m * astride, step t at off[t] */
    int64_t astride;
    const int32_t *off;
    const float *src;   /* (N, red, src_plane) */
    int64_t src_plane;  /* H*W of x, P*Q of dy */
    const int32_t *pix; /* strided forward: each output pixel's offset in a plane of x; else NULL */
    int64_t pq, cols;   /* output pixels an image; columns in all, N*P*Q */
    float *dst;         /* (N, rows, pq) */
    const float *bias;  /* or NULL */
    bool relu;
    float beta; /* dst = beta dst + result (beta 0 never reads dst) */
} tile_pass;

/* One panel's columns [j0, j0 + nn) as runs within one image: image n, first pixel i, len pixels,
 * starting at column d of the panel. */
typedef struct {
    int64_t n, i, len, d;
} column_run;

static int panel_runs(int64_t pq, int64_t j0, int64_t nn, column_run *runs) {
    int count = 0;
    for (int64_t d = 0; d < nn;) {
        int64_t j = j0 + d, i = j % pq, len = pq - i < nn - d ? pq - i : nn - d;
        runs[count++] = (column_run){.n = j / pq, .i = i, .len = len, .d = d};
        d += len;
    }
    return count;
}

/* pack[t * NR + d] = src[image, t, pixel of column d], zero past nn columns. */
static void pack_columns(const tile_pass *tp, const column_run *runs, int count, int64_t nn,
                         float *pack) {
    int64_t plane = tp->src_plane;
    for (int r = 0; r < count; r++) {
        const float *sn = tp->src + runs[r].n * tp->red * plane;
        float *dst = pack + runs[r].d;
        if (!tp->pix) {
            for (int64_t t = 0; t < tp->red; t++)
                memcpy(dst + t * RG_CONV_NR, sn + t * plane + runs[r].i,
                       (size_t)runs[r].len * sizeof(float));
            continue;
        }
        const int32_t *o = tp->pix + runs[r].i;
        for (int64_t t = 0; t < tp->red; t++)
            for (int64_t q = 0; q < runs[r].len; q++)
                dst[t * RG_CONV_NR + q] = sn[t * plane + o[q]];
    }
    if (nn < RG_CONV_NR)
        for (int64_t t = 0; t < tp->red; t++)
            memset(pack + t * RG_CONV_NR + nn, 0, (size_t)(RG_CONV_NR - nn) * sizeof(float));
}

/* dst[image, m, pixel of column d] = out[m * NR + d] + bias[m], then the ReLU; or with beta; for
 * rows m in [m0, m1). */
static void write_columns(const tile_pass *tp, const float *out, const column_run *runs, int count,
                          int64_t m0, int64_t m1) {
    for (int r = 0; r < count; r++)
        for (int64_t m = m0; m < m1; m++) {
            const float *src = out + m * RG_CONV_NR + runs[r].d;
            float *dst = tp->dst + (runs[r].n * tp->rows + m) * tp->pq + runs[r].i;
            float bias = tp->bias ? tp->bias[m] : 0.0f;
            int64_t len = runs[r].len;
            if (tp->relu)
                for (int64_t q = 0; q < len; q++) dst[q] = rg_k_relu(src[q] + bias);
            else if (tp->beta != 0.0f)
                for (int64_t q = 0; q < len; q++) dst[q] = tp->beta * dst[q] + src[q];
            else
                for (int64_t q = 0; q < len; q++) dst[q] = src[q] + bias;
        }
}

/* Threads: each panel's output rows are cut into one part a thread, and the work items (panel,
 * part) dealt out in order, so that the threads' shares differ by at most one part and a thread
 * packs a panel once for all its parts of it (only the panel where the shares meet is packed
 * twice). Whole panels a thread left the 7x7 passes' 13 panels split 7 and 6. */
static void run_tile_pass(const tile_pass *tp) {
    int64_t npanel = (tp->cols + RG_CONV_NR - 1) / RG_CONV_NR;
    int64_t rows = rg_conv_round_up(tp->rows, RG_CONV_MR);
    int64_t parts = npanel > 1 ? omp_get_max_threads() : 1;
    int64_t part_rows = rg_conv_round_up((tp->rows + parts - 1) / parts, RG_CONV_MR);
#pragma omp parallel if (npanel > 1)
    {
        float *pack = rg_conv_scratch(tp->red * RG_CONV_NR);
        float *out = rg_conv_scratch(rows * RG_CONV_NR);
        column_run runs[RG_CONV_NR]; /* a run has at least one column */
        int64_t packed = -1, nn = 0;
        int count = 0;
#pragma omp for schedule(static)
        for (int64_t item = 0; item < npanel * parts; item++) {
            int64_t jp = item / parts, m0 = item % parts * part_rows;
            if (m0 >= tp->rows) continue;
            int64_t m1 = tp->rows - m0 < part_rows ? tp->rows : m0 + part_rows;
            if (jp != packed) {
                int64_t j0 = jp * RG_CONV_NR;
                nn = tp->cols - j0 < RG_CONV_NR ? tp->cols - j0 : RG_CONV_NR;
                count = panel_runs(tp->pq, j0, nn, runs);
                pack_columns(tp, runs, count, nn, pack);
                packed = jp;
            }
            rg_conv_panel_product((int)((nn + RG_CONV_VL - 1) / RG_CONV_VL), m1 - m0,
                                  tp->a + m0 * tp->astride, NULL, tp->astride, tp->off, tp->red,
                                  pack, out + m0 * RG_CONV_NR, RG_CONV_NR, false);
            write_columns(tp, out, runs, count, m0, m1);
        }
        rg_conv_scratch_free(out, rows * RG_CONV_NR);
        rg_conv_scratch_free(pack, tp->red * RG_CONV_NR);
    }
}

/* off[t] = t for t < n (rows read in order), from the scratch pool (free with
 * rg_conv_scratch_free(off, n)). */
static int32_t *in_order(int64_t n) {
    int32_t *off = (int32_t *)rg_conv_scratch(n);
    for (int64_t t = 0; t < n; t++) off[t] = (int32_t)t;
    return off;
}

static void forward_tiles(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                          float *y) {
    int64_t pq = s->p * s->q;
    int32_t *pix = NULL;
    if (strided(s)) {
        pix = (int32_t *)rg_conv_scratch(pq);
        for (int64_t i = 0; i < pq; i++)
            pix[i] = (int32_t)(i / s->q * s->stride_h * s->w + i % s->q * s->stride_w);
    }
    tile_pass tp = {.rows = s->k,
                    .red = s->c,
                    .a = w,
                    .astride = s->c,
                    .off = in_order(s->c),
                    .src = x,
                    .src_plane = s->h * s->w,
                    .pix = pix,
                    .pq = pq,
                    .cols = s->n * pq,
                    .dst = y,
                    .bias = b,
                    .relu = s->relu};
    run_tile_pass(&tp);
    if (pix) rg_conv_scratch_free((float *)pix, pq);
    rg_conv_scratch_free((float *)tp.off, s->c);
}

/* dx[n] = beta dx[n] + w^T dy[n], w^T (C x K) copied first. */
static void backward_data_tiles(const rg_conv2d_shape *s, const float *dy, const float *w,
                                float beta, float *dx) {
    int64_t pq = s->p * s->q;
    float *wt = transposed_weights(s, w);
    tile_pass tp = {.rows = s->c,
                    .red = s->k,
                    .a = wt,
                    .astride = s->k,
                    .off = in_order(s->k),
                    .src = dy,
                    .src_plane = pq,
                    .pq = pq,
                    .cols = s->n * pq,
                    .dst = dx,
                    .beta = beta};
    run_tile_pass(&tp);
    rg_conv_scratch_free((float *)tp.off, s->k);
    rg_conv_scratch_free(wt, s->c * s->k);
}

/* The stride-1 filter pass on planes of ALONE_PIXELS to TILE_PIXELS output pixels (14x14), when
 * the batch has at least TILE_FILTER_COLUMNS columns to reduce over: dw (K x C) = beta dw +
 * dy (K x N*P*Q) . x^T (N*P*Q x C) over the whole batch at once. Rows are filters, read from dy
 * through the offsets of the batch's columns (image n's pixel j at n*K*P*Q + j); vectors run along
 * channels, x transposed into a panel of NR channels at a time (N*P*Q x NR). OpenBLAS took the
 * product an image at a time at 0.85-0.97 of one SGEMM; this 1.02-1.06x faster than that on
 * ResNet-50's three 14x14 1x1s. On 7x7 planes it lost (0.86-1.0x; dy's rows jump to the next
 * image every 49 columns, which the prefetchers do not follow, and copying dy into one block
 * first only made it even), so those keep OpenBLAS's blocks of 6 images. Threads take whole
 * panels of channels (256-1024 channels: 4-16 panels). */
#define TILE_FILTER_COLUMNS 512

static bool tile_filter_applies(const rg_conv2d_shape *s) {
    int64_t pq = s->p * s->q, cols = s->n * pq;
    return one_by_one(s) && !strided(s) && pq >= ALONE_PIXELS && pq <= TILE_PIXELS &&
           cols >= TILE_FILTER_COLUMNS && s->c >= RG_CONV_NR &&
           (double)s->n * (double)s->k * (double)(s->p * s->q) < INT32_MAX &&
           rg_conv_switch_on("RG_GEMM_TILE");
}

static void backward_filter_tiles(const rg_conv2d_shape *s, const float *x, const float *dy,
                                  float beta, float *dw) {
    int64_t pq = s->p * s->q, cols = s->n * pq, chw = s->c * pq;
    int64_t npanel = (s->c + RG_CONV_NR - 1) / RG_CONV_NR,
            rows = rg_conv_round_up(s->k, RG_CONV_MR);
    int32_t *off = (int32_t *)rg_conv_scratch(cols); /* column (n, j) of filter k's row */
    for (int64_t t = 0; t < cols; t++) off[t] = (int32_t)(t / pq * s->k * pq + t % pq);
#pragma omp parallel if (npanel > 1)
    {
        float *pack = rg_conv_scratch(cols * RG_CONV_NR);
        float *out = rg_conv_scratch(rows * RG_CONV_NR);
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < npanel; jp++) {
            int64_t c0 = jp * RG_CONV_NR, nc = s->c - c0 < RG_CONV_NR ? s->c - c0 : RG_CONV_NR;
            for (int64_t n = 0; n < s->n; n++) /* channels c0.. of image n, pixel by pixel */
                rg_conv_transpose(nc, pq, x + n * chw + c0 * pq, pq, pack + n * pq * RG_CONV_NR,
                                  RG_CONV_NR, NULL, 0.0f);
            if (nc < RG_CONV_NR)
                for (int64_t t = 0; t < cols; t++)
                    memset(pack + t * RG_CONV_NR + nc, 0,
                           (size_t)(RG_CONV_NR - nc) * sizeof(float));
            rg_conv_panel_product((int)((nc + RG_CONV_VL - 1) / RG_CONV_VL), s->k, dy, NULL, pq,
                                  off, cols, pack, out, RG_CONV_NR, false);
            for (int64_t k = 0; k < s->k; k++) {
                float *dst = dw + k * s->c + c0;
                const float *src = out + k * RG_CONV_NR;
                if (beta != 0.0f)
                    for (int64_t j = 0; j < nc; j++) dst[j] = beta * dst[j] + src[j];
                else
                    memcpy(dst, src, (size_t)nc * sizeof(float));
            }
        }
        rg_conv_scratch_free(out, rows * RG_CONV_NR);
        rg_conv_scratch_free(pack, cols * RG_CONV_NR);
    }
    rg_conv_scratch_free((float *)off, cols);
}
#endif

/* Where this pass's products run: rg_cpu_gemm (gemm_tile.c), or OpenBLAS (see the top of the
 * file for both, and rg_cpu_conv_products_on_blas). */
static bool tile_products(void) {
#if defined(__AVX512F__)
    return rg_conv_switch_on("RG_GEMM_TILE") && !rg_cpu_conv_products_on_blas();
#else
    return false;
#endif
}

static void product(bool tile, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                    int64_t ldc) {
    if (tile)
        rg_cpu_gemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else
        rg_cpu_gemm_blas(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void rg_conv_forward_gemm(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                          float *y) {
#if defined(__AVX512F__)
    if (tile_forward_applies(s)) {
        forward_tiles(s, x, w, b, y);
        return;
    }
#endif
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w;
    image_blocks ib = blocks_of(s, omp_get_max_threads(), BLOCK_COLUMNS);
    int32_t *off = ib.in_place ? NULL : tap_table(s);
    bool tile = tile_products();
#pragma omp parallel if (ib.count > 1)
    {
        float *xb = ib.in_place ? NULL : rg_conv_scratch(s->c * ib.cols);
        float *yb = ib.g > 1 ? rg_conv_scratch(s->k * ib.cols) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < ib.count; bi++) {
            int64_t n0 = bi * ib.g, gi = s->n - n0 < ib.g ? s->n - n0 : ib.g, len = gi * pq;
            float *yn = y + n0 * s->k * pq, *out = yb ? yb : yn;
            for (int64_t i = 0; xb && i < gi; i++)
                im2col(s, off, x + (n0 + i) * chw, 0, s->c, xb + i * pq, len);
            product(tile, false, false, s->k, len, s->c, w, s->c, xb ? xb : x + n0 * chw, len, 0.0f,
                    out, len);
            finish_output(s, b, out, len);
            if (yb) block_copy(gi, s->k, s->k, pq, yb, yn, true);
        }
        if (yb) rg_conv_scratch_free(yb, s->k * ib.cols);
        if (xb) rg_conv_scratch_free(xb, s->c * ib.cols);
    }
    if (off) rg_conv_scratch_free((float *)off, tap_table_len(s));
}

/* dx = beta dx + dcol for one image, dcol (C, P*Q) with rows ld apart: the 1x1 kernel's data
 * gradient added where its windows read, the pixels a stride skips getting only beta dx. */
static void write_dx(const rg_conv2d_shape *s, const float *dcol, int64_t ld, float beta,
                     float *dx) {
    int64_t hw = s->h * s->w;
    for (int64_t c = 0; c < s->c; c++) {
        float *dxc = dx + c * hw;
        const float *src = dcol + c * ld;
        for (int64_t i = 0; i < hw; i++) dxc[i] = beta == 0.0f ? 0.0f : beta * dxc[i];
        for (int64_t p = 0; p < s->p; p++)
            for (int64_t q = 0; q < s->q; q++)
                dxc[p * s->stride_h * s->w + q * s->stride_w] += src[p * s->q + q];
    }
}

/* dx[n] = beta dx[n] + w^T dy[n], a block of images a product: in place for one image at stride
 * 1, else through dcol (C, G*P*Q), written out image by image. */
static void backward_data(const rg_conv2d_shape *s, const float *dy, const float *w, float beta,
                          float *dx) {
#if defined(__AVX512F__)
    if (tile_data_applies(s)) {
        backward_data_tiles(s, dy, w, beta, dx);
        return;
    }
#endif
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w;
    image_blocks ib = blocks_of(s, omp_get_max_threads(), BLOCK_COLUMNS);
    float *wt = tile_products() ? transposed_weights(s, w) : NULL; /* the tile reads w^T */
#pragma omp parallel if (ib.count > 1)
    {
        float *dcol = ib.in_place ? NULL : rg_conv_scratch(s->c * ib.cols);
        float *dyb = ib.g > 1 ? rg_conv_scratch(s->k * ib.cols) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < ib.count; bi++) {
            int64_t n0 = bi * ib.g, gi = s->n - n0 < ib.g ? s->n - n0 : ib.g, len = gi * pq;
            const float *dyn = dy + n0 * s->k * pq;
            if (ib.in_place) {
                product(wt != NULL, !wt, false, s->c, pq, s->k, wt ? wt : w, wt ? s->k : s->c, dyn,
                        pq, beta, dx + n0 * chw, pq);
                continue;
            }
            if (dyb) block_copy(gi, s->k, s->k, pq, dyn, dyb, false);
            product(wt != NULL, !wt, false, s->c, len, s->k, wt ? wt : w, wt ? s->k : s->c,
                    dyb ? dyb : dyn, len, 0.0f, dcol, len);
            for (int64_t i = 0; i < gi; i++)
                write_dx(s, dcol + i * pq, len, beta, dx + (n0 + i) * chw);
        }
        if (dyb) rg_conv_scratch_free(dyb, s->k * ib.cols);
        if (dcol) rg_conv_scratch_free(dcol, s->c * ib.cols);
    }
    if (wt) rg_conv_scratch_free(wt, s->c * s->k);
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

/* Columns of dw per thread are whole multiples of this (OpenBLAS's register tiles). */
#define SLICE_ALIGN 16

/* db[k] = beta db[k] + the sum of dy's row k over the batch. */
static void bias_gradient(const rg_conv2d_shape *s, const float *dy, float beta, float *db) {
    int64_t pq = s->p * s->q;
#pragma omp parallel for schedule(static) if (s->k > 1)
    for (int64_t k = 0; k < s->k; k++) {
        double sum = 0.0;
        for (int64_t n = 0; n < s->n; n++) sum += row_sum(dy + (n * s->k + k) * pq, pq);
        db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
    }
}

/* dw (K, C*R*S) = beta dw + sum over blocks of images of dy's block (K, G*P*Q) times the block's
 * im2col matrix (C*R*S, G*P*Q) transposed, db = beta db + the sums of dy's rows. Each thread
 * takes a slice of dw's columns, (c, r, u) in [t0, t0 + tn), and builds only those rows of the
 * im2col matrix (nine times the input at 3x3: built once, by the thread that needs them); in
 * place (one image a block, 1x1 at stride 1) they are channels t0.. of x as it lies. */
static void backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy, float beta,
                            float *dw, float *db) {
#if defined(__AVX512F__)
    if (tile_filter_applies(s)) {
        backward_filter_tiles(s, x, dy, beta, dw);
        if (db) bias_gradient(s, dy, beta, db);
        return;
    }
#endif
    int64_t pq = s->p * s->q, chw = s->c * s->h * s->w, crs = s->c * s->r * s->s;
    image_blocks ib = blocks_of(s, 1, FILTER_COLUMNS);
    int nt = omp_get_max_threads();
    int64_t step = (crs + nt - 1) / nt;
    step = (step + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
    int parts = crs > step ? (int)((crs + step - 1) / step) : 1;
    int32_t *off = ib.in_place ? NULL : tap_table(s);
    /* the block's dy, which every thread's product reads whole: copied once, by all of them */
    float *dyb = ib.g > 1 ? rg_conv_scratch(s->k * ib.cols) : NULL;
    bool tile = tile_products();
#pragma omp parallel num_threads(parts)
    {
        int64_t t0 = omp_get_thread_num() * step, tn = crs - t0 < step ? crs - t0 : step;
        float *col = ib.in_place || tn <= 0 ? NULL : rg_conv_scratch(tn * ib.cols);
        for (int64_t n0 = 0; n0 < s->n; n0 += ib.g) {
            int64_t gi = s->n - n0 < ib.g ? s->n - n0 : ib.g, len = gi * pq;
            const float *dyn = dy + n0 * s->k * pq;
            for (int64_t i = 0; col && i < gi; i++)
                im2col(s, off, x + (n0 + i) * chw, t0, t0 + tn, col + i * pq, len);
            if (dyb) {
#pragma omp barrier /* every product of the block before is done with dyb */
#pragma omp for schedule(static)
                for (int64_t ir = 0; ir < gi * s->k; ir++) /* block_copy, shared out */
                    block_copy_row(gi, s->k, s->k, pq, dyn, dyb, false, ir);
            }
            if (tn > 0)
                product(tile, false, true, s->k, tn, len, dyb ? dyb : dyn, len,
                        col ? col : x + n0 * chw + t0 * pq, len, n0 == 0 ? beta : 1.0f, dw + t0,
                        crs);
        }
        if (col) rg_conv_scratch_free(col, tn * ib.cols);
    }
    if (dyb) rg_conv_scratch_free(dyb, s->k * ib.cols);
    if (off) rg_conv_scratch_free((float *)off, tap_table_len(s));
    if (db) bias_gradient(s, dy, beta, db);
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
    if (dw) backward_filter(s, x, dy, beta_w, dw, db);
    if (masked) rg_conv_scratch_free(masked, len);
}
