/* conv2d_impl.h — the pieces the CPU convolution (tensor/cpu/conv2d*.c) is built from. Private.
 *
 * The three passes are all written as one kind of register-tiled matrix product, the "tile":
 *
 *     C[i][j] (+)= sum_t  a[i][off[t]] * b[t*ldb + j]        i < RG_CONV_MR,  j < nv * RG_CONV_VL
 *
 * a[] holds one pointer per tile row and off[] one offset per reduction step: an *indirection*
 * (as in XNNPACK's indirect convolution), so a row can walk through an image's taps or pixels
 * without anyone copying an im2col matrix first. b is contiguous along j: every step loads
 * nv SIMD vectors of b, broadcasts one scalar per row, and does MR * nv fused multiply-adds on
 * accumulators that stay in registers for the whole reduction.
 *
 * Vectors mostly run along channels, so images are transposed to channels-last (NHWC) first, a
 * few at a time in a per-thread scratch that stays in cache (rg_conv_transpose). The SIMD code
 * uses GCC/Clang vector extensions: with -march=native on an AVX-512 machine a vector is one zmm
 * register; elsewhere the compiler splits it, so the code stays portable. */
#ifndef RG_CONV2D_IMPL_H
#define RG_CONV2D_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "tensor/cpu/cpu.h"

/* Floats per SIMD vector, tile rows and vectors per tile row, chosen so that the MR * NV
 * accumulators plus NV loaded vectors of b fit the register file (32 zmm; 16 ymm). */
#if defined(__AVX512F__)
#define RG_CONV_VL 16
#define RG_CONV_MR 6
#define RG_CONV_NV 4
#elif defined(__AVX__)
#define RG_CONV_VL 8
#define RG_CONV_MR 6
#define RG_CONV_NV 2
#else /* SSE2: 16 xmm registers, as AVX's 16 ymm */
#define RG_CONV_VL 4
#define RG_CONV_MR 6
#define RG_CONV_NV 2
#endif
#define RG_CONV_NR (RG_CONV_VL * RG_CONV_NV) /* tile columns */

/* Whether the comparison switch `name` (RG_CONV_GEMM, RG_GEMM_TILE, RG_CONV_DATA_AS_FORWARD) is
 * on: anything but "0", unset included. They send shapes back to the path a change replaced. */
static inline bool rg_conv_switch_on(const char *name) {
    return rg_env_switch(name, true);
}

/* One SIMD vector of floats; aligned(4) makes loads and stores through it unaligned-safe. */
typedef float rg_convvec __attribute__((vector_size(RG_CONV_VL * sizeof(float)), aligned(4)));

/* The tile above, for nv in [1, RG_CONV_NV] vectors per row. Reads b[t*ldb + j] for
 * j < nv * RG_CONV_VL and writes C[i*ldc + j] for every i < RG_CONV_MR: callers point spare rows
 * at harmless memory. accumulate: C += result, else C = result. */
void rg_conv_tile(int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
                  int64_t ldb, float *c, int64_t ldc, bool accumulate);

/* The tile with its results added to memory instead of stored: for i < dst_rows (at most
 * RG_CONV_MR), row i's vector v is added at dst[i] + col_off[v * RG_CONV_VL] (the data pass's
 * col2im straight from the registers: conv2d_backward.c). */
void rg_conv_tile_add(int nv, int64_t nt, const int32_t *off, const float *const *a, const float *b,
                      int64_t ldb, float *const *dst, const int32_t *col_off, int dst_rows);

/* One panel of a product, over every row: c[m][j] (+)= sum_{t < kd} a_m[off[t]] * b[t*NR + j] for
 * m < rows and j < nv * RG_CONV_VL, where a_m = a + arow[m] (or a + m * astride when arow is
 * NULL); accumulate: add to c, else overwrite it. The reduction runs in blocks of RG_CONV_KC
 * steps, so that a block of the packed panel b stays in cache while all the rows pass; c needs
 * rows rounded up to RG_CONV_MR. */
void rg_conv_panel_product(int nv, int64_t rows, const float *a, const int32_t *arow,
                           int64_t astride, const int32_t *off, int64_t kd, const float *b,
                           float *c, int64_t ldc, bool accumulate);

/* dst[j*ldd + i] = src[i*lds + j] + bias[j] + beta * dst[j*ldd + i]  for i < rows, j < cols.
 * bias may be NULL; beta 0 never reads dst. Blocked on RG_CONV_VL x RG_CONV_VL register tiles. */
void rg_conv_transpose(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                       int64_t ldd, const float *bias, float beta);

/* dst[dst_row[j]*ldd + i] = src[i*lds + j]: rg_conv_transpose without options, each column of src
 * landing in the row of dst that dst_row names (the forward's weights: a filter's (c,r,s) values
 * to the (r,s,c) rows of its panel in one pass). */
void rg_conv_transpose_rows(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                            int64_t ldd, const int32_t *dst_row);

/* dst[j*ldd + i] = src[i*lds + j] for int32 matrices: the bits moved as they are. */
void rg_conv_transpose_i32(int64_t rows, int64_t cols, const int32_t *src, int64_t lds,
                           int32_t *dst, int64_t ldd);

/* rg_conv_transpose with beta 0 and a ReLU on the result: dst = max(0, src^T + bias) (the
 * forward pass of a fused conv + ReLU). */
void rg_conv_transpose_relu(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                            int64_t ldd, const float *bias);

/* dst[j*ldd + i] = src[i*lds + j] as rg_conv_transpose, and sums[i] += src[i][0] + ... +
 * src[i][cols-1] (unless sums is NULL): the copy and the row sums in one pass over src. With a mask
 * (or NULL), laid out as src, a value counts only where mask > 0 (NaN in the mask keeps it): the
 * ReLU's backward on the way, the mask being the ReLU's output; the sums are of the masked values.
 */
void rg_conv_transpose_sum(int64_t rows, int64_t cols, const float *src, const float *mask,
                           int64_t lds, float *dst, int64_t ldd, float *sums);

/* A 2x2, stride-2, unpadded max-pool (rg_cpu_pool_is_2x2; other fused pools go through an NCHW
 * scratch per image: conv2d.c, conv2d_backward.c) fused onto a forward pass, on one image's output
 * while it is still channels-last: src (p*q, kpad) the convolution's output without its bias
 * (k_count channels), bias (kpad floats, zero past K) or NULL, kpad a multiple of RG_CONV_VL. out
 * (p/2 * q/2, kpad) receives, in its first k_count columns rounded up to a vector, the maximum of
 * each window's relu(v + bias) (v + bias without relu_on), argmax (same layout) the pixel that held
 * it, h*q + w, as maxpool2d.c's argmax. The values and the comparisons are those of
 * rg_conv_transpose_relu and then maxpool2d.c's, in the same order, so the result is theirs to the
 * bit. */
void rg_conv_pool2x2_nhwc(int64_t p, int64_t q, int64_t k_count, int64_t kpad, const float *src,
                          const float *bias, bool relu_on, float *out, int32_t *argmax);

/* Its backward, into a chunk's panel-major dy (dyt: panels of npix pixel rows, RG_CONV_NR floats
 * each, that the backward passes read; dyt points at this image's first pixel row): dm
 * (p/2 * q/2, kpad) the pooled gradient channels-last, masked by the ReLU, zero past K, and argmax
 * (same layout) where each maximum was. Each window's gradient goes to its argmax and +0 to its
 * other pixels, as maxpool2d.c's backward (beta 0) writes them; pixels outside every window get
 * 0. */
void rg_conv_unpool2x2_nhwc(int64_t p, int64_t q, int64_t kpad, const float *dm,
                            const int32_t *argmax, int64_t npix, float *dyt);

/* sums[i] += the sum over pq pixel rows of column i of one panel of dyt (rows RG_CONV_NR floats
 * apart), for i < kn: the sums rg_conv_transpose_sum adds when it transposes that panel's dy, in
 * its order (blocks of RG_CONV_VL pixels summed, then the block totals added; the pixels past the
 * last whole block and the channels past the last whole vector one at a time), so to the bit. */
void rg_conv_panel_sums(int64_t kn, int64_t pq, const float *dyt, float *sums);

/* dst[j*ldd + i] = src[i*lds + j] for a matrix narrower than a vector (cols < RG_CONV_VL: a
 * filter's (C, R*S) weights of a 3x3 kernel), without options; with dst_row (else NULL) column j
 * goes to row dst_row[j] instead, as in rg_conv_transpose_rows. Reads whole vectors from each row,
 * into the rows after it, wherever they end before src_end (the end of the readable source);
 * element by element elsewhere. Wider matrices go to rg_conv_transpose. */
void rg_conv_transpose_narrow(int64_t rows, int64_t cols, const float *src, int64_t lds,
                              const float *src_end, float *dst, int64_t ldd,
                              const int32_t *dst_row);

/* n rounded up to a multiple of m. */
static inline int64_t rg_conv_round_up(int64_t n, int64_t m) {
    return (n + m - 1) / m * m;
}

/* Vectors a tile needs for the panel of columns starting at n0, when there are n columns. */
static inline int rg_conv_panel_vectors(int64_t n, int64_t n0) {
    int64_t v = (n - n0 + RG_CONV_VL - 1) / RG_CONV_VL;
    return (int)(v < RG_CONV_NV ? v : RG_CONV_NV);
}

/* Geometry of one image in the channels-last scratch, padded so that every tap is in bounds:
 * pixel (h, w) of the padded image starts at float (h * wp + w) * c. */
typedef struct {
    int64_t hp, wp;   /* padded height and width */
    int64_t pq, crs;  /* output pixels, and the reduction length of the forward pass */
    int64_t xpad_len; /* floats of one padded channels-last image */
} rg_conv_geom;

rg_conv_geom rg_conv_geom_of(const rg_conv2d_shape *s);

/* Offset of output pixel `pix` (p*Q + q) in the padded image: where its window starts. */
static inline int64_t rg_conv_pixel_offset(const rg_conv2d_shape *s, const rg_conv_geom *g,
                                           int64_t pix) {
    int64_t p = pix / s->q, q = pix % s->q;
    return (p * s->stride_h * g->wp + q * s->stride_w) * s->c;
}

/* Offset of tap (r, t) of the window relative to the window's start. */
static inline int64_t rg_conv_tap_offset(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t r,
                                         int64_t t) {
    return (r * g->wp + t) * s->c;
}

/* Copies image x (C,H,W) into the padded channels-last scratch xpad (hp,wp,C), zeroing the
 * border. */
void rg_conv_to_padded_nhwc(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *x,
                            float *xpad);

/* Where each (r, s, c) of a window lies relative to the window's start: tap offset of (r, s) + c,
 * listed in (r,s,c) order, so that consecutive entries are consecutive floats of one pixel (every
 * pass reduces or tiles in that order: see conv2d.c); n >= C*R*S entries, the spare ones
 * repeating the last. Free with rg_conv_scratch_free(off, n). */
int32_t *rg_conv_window_offsets(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t n);

/* ---- chunks: a thread's unit of work ----
 * A thread converts G images at a time to channels-last and treats their G*P*Q output pixels as
 * the rows of one product. One image is enough when it has many pixels; a layer with few (7x7 in
 * ResNet's last stage) takes several, so that each block of weights, once in cache, serves enough
 * rows to pay for bringing it there. */
typedef struct {
    int64_t images; /* G: images per chunk (the last chunk may have fewer) */
    int64_t count;  /* chunks covering the batch */
    int64_t npix;   /* G*P*Q */
    int32_t *pix;   /* pix[t] for t < G*P*Q: where the window of the chunk's output pixel t starts
                     * in the chunk's scratch, image t / (P*Q) being at (t / (P*Q)) * xpad_len */
} rg_conv_chunks;

rg_conv_chunks rg_conv_chunks_new(const rg_conv2d_shape *s, const rg_conv_geom *g);
void rg_conv_chunks_free(rg_conv_chunks *ch);

/* Reduction steps per block of a product: a (RG_CONV_KC x RG_CONV_NR) block of b (256 KiB) stays
 * in L2 while the tiles of a whole chunk stream past it. Longer blocks amortise each tile's loads
 * and stores of its accumulators. 256 measured best while the forward reduced in (c,r,s) order;
 * in (r,s,c) order a block covers whole taps of up to 1024 channels, and 1024 ran ResNet's 3x3
 * forwards 1-7% faster than 256 on Zen 5 (the data passes, whose reduction is K, and the CNN's step
 * the same; docs/PERFORMANCE.md). */
#define RG_CONV_KC 1024

/* The forward pass with vectors along output pixels (conv2d_direct.c), for short reductions and
 * for 1x1 kernels, whose input needs no transposition that way. */
#define RG_CONV_DIRECT_MAX_CRS 32
void rg_conv_forward_direct(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *x,
                            const float *w, const float *b, float *y);
/* Its filter pass for the shapes it takes by output rows (stride 1, no padding, C*R*S <= 9;
 * RG_CONV_DIRECT_ROWS=0 turns it off): dw = beta dw + the gradient, db likewise (db may be NULL),
 * dy masked by s->relu_y when a ReLU was fused. A fused pool's gradient must be unpooled first
 * (s->pool NULL). */
bool rg_conv_filter_rows_applies(const rg_conv2d_shape *s);
void rg_conv_backward_filter_rows(const rg_conv2d_shape *s, const float *x, const float *dy,
                                  float beta, float *dw, float *db);

/* 1x1 kernels without padding as OpenBLAS products on the NCHW data (conv2d_gemm.c): whether a
 * shape takes that path (RG_CONV_GEMM=0 turns it off), and its forward and backward passes, with
 * the arguments of rg_cpu_conv2d_forward and rg_cpu_conv2d_backward (either of dx, dw may be
 * NULL). */
bool rg_conv_gemm_applies(const rg_conv2d_shape *s);
/* Whether a larger kernel's filter pass goes there (im2col and a product; conv2d_gemm.c says for
 * which shapes): rg_conv_backward_gemm then takes dx NULL. */
bool rg_conv_gemm_filter_applies(const rg_conv2d_shape *s);
void rg_conv_forward_gemm(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                          float *y);
void rg_conv_backward_gemm(const rg_conv2d_shape *s, const float *x, const float *dy,
                           const float *w, float beta_x, float *dx, float beta_w, float *dw,
                           float *db);

/* The data pass of a stride-1 convolution whose output keeps the input's size, as a forward pass
 * of dy with the filters flipped (conv2d.c): whether a shape takes it (RG_CONV_DATA_AS_FORWARD=0
 * turns it off), and the pass itself, dx = beta dx + the gradient, with the arguments of
 * rg_cpu_conv2d_backward_data (a fused ReLU or pool is the caller's to undo first). */
bool rg_conv_data_as_forward_applies(const rg_conv2d_shape *s);
void rg_conv_data_as_forward(const rg_conv2d_shape *s, const float *dy, const float *w, float beta,
                             float *dx);

/* 3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) (conv2d_winograd.c): whether a shape takes it
 * (RG_CONV_WINOGRAD=0 turns it off); the filters transformed and packed for the products
 * (w (kout, cin, 3, 3), or with flipped (cin, kout, 3, 3) turned by 180 degrees, as the data pass
 * of rg_conv_data_as_forward reads it; free with rg_conv_scratch_free(u, _weights_len)); and one
 * chunk's forward product: yc (pixels, kpad) = conv(xpad), the job rg_conv_panel_product does in
 * forward_tiles, in scratch of rg_conv_winograd_scratch_len floats. */
bool rg_conv_winograd_applies(const rg_conv2d_shape *s);
int64_t rg_conv_winograd_weights_len(int64_t cin, int64_t kout);
float *rg_conv_winograd_weights(int64_t kout, int64_t cin, const float *w, bool flipped);
int64_t rg_conv_winograd_scratch_len(int64_t c, int64_t kpad);
void rg_conv_winograd_chunk(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t images,
                            const float *xpad, const float *u, float *yc, int64_t kpad,
                            float *scratch);
/* The filter pass of a shape rg_conv_winograd_applies to, by the same transforms: dw = beta dw +
 * the gradient, and db likewise unless NULL, from x and the plain dy (no fused ReLU or pool). */
void rg_conv_winograd_filter(const rg_conv2d_shape *s, const float *x, const float *dy, float beta,
                             float *dw, float *db);

/* Scratch memory from the CPU caching allocator; stops (RG_CHECK) when memory runs out. */
float *rg_conv_scratch(int64_t floats);
void rg_conv_scratch_free(float *p, int64_t floats);

#endif
