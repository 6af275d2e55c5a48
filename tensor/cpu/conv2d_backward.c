/* conv2d_backward.c — the two backward passes of the CPU convolution (the plan is in conv2d.c).
 *
 * Backward data is a product and a scatter: for each output pixel, dcol[(r,s,c)] =
 * sum_k dy[pixel][k] w[k,c,r,s] is the gradient of every input value its window read, and is
 * added back into dx there (col2im). Windows overlap, so a thread owns a whole image's dx.
 * (A stride-1 convolution whose output keeps its input's size, as ResNet's 3x3s, runs its data
 * pass as a forward pass instead: rg_conv_data_as_forward in conv2d.c.)
 *
 * Backward filter reduces over pixels: dw[(r,s,c)][k] = sum_pixel x[window + tap + c] dy[pixel][k].
 * Each thread sums its images into its own (R*S*C x K) buffer; the buffers are added and
 * transposed into dw's (K, C, R, S) at the end, which is also where beta is applied. A tile's six
 * rows are six consecutive channels of one tap, which each pixel step reads from one cache line.
 *
 * One function, backward(), runs either pass or both, chunk by chunk: training needs both, and
 * together the chunk's dy is read and transposed (and masked by a fused ReLU) once for both,
 * while it is in cache: on the CNN's conv2 that took 9% off the step (docs/PERFORMANCE.md). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"
#include "core/alloc.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR
#define VL RG_CONV_VL

/* Pixels per reduction block of the filter gradient: long enough to amortise each tile's loads
 * and stores of its accumulators (512 measured best), short enough to keep the block's dy in L2. */
#define PIXEL_BLOCK 512

/* ---- backward data ---- */

/* wt[panel][k][j] = w[k][c][r][s] for column panel*NR + j = (r*S + s)*C + c, zero past C*R*S.
 * One filter at a time: its (C, R*S) weights are transposed to (R*S, C) in a small buffer that
 * stays in L1 (in vector blocks: element by element this was 3% of ResNet-18's step), which is
 * then exactly the filter's row of every panel, copied out NR at a time. (Copying the panels of
 * 8 filters at a time, as contiguous runs, measured no faster.)
 * (Transposing all of w to (C*R*S, K) first and gathering panels from that took two passes
 * over the weights with strides of R*S*K floats: a quarter of the pass on ResNet's last stage.) */
static float *pack_data_weights(const rg_conv2d_shape *s, int64_t crs, const float *w) {
    int64_t npanel = (crs + NR - 1) / NR, rs = s->r * s->s;
    float *wt = rg_conv_scratch(npanel * s->k * NR);
#pragma omp parallel if (npanel * s->k * NR > RG_CPU_PAR_MIN)
    {
        float *row = rg_conv_scratch(npanel * NR);
        memset(row + crs, 0, (size_t)(npanel * NR - crs) * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t k = 0; k < s->k; k++) {
            rg_conv_transpose_narrow(s->c, rs, w + k * crs, rs, w + s->k * crs, row, s->c, NULL);
            for (int64_t jp = 0; jp < npanel; jp++)
                memcpy(wt + (jp * s->k + k) * NR, row + jp * NR, NR * sizeof(float));
        }
        rg_conv_scratch_free(row, npanel * NR);
    }
    return wt;
}

/* Adds rows x (nv vectors) of a tile of dcol, for the chunk pixels whose windows start at
 * pix[0..rows) and for columns n0.., into dxpad. When C is a multiple of the vector length a
 * vector never straddles two taps. */
static void col2im_tile(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *tile,
                        int rows, int nv, const int32_t *pix, int64_t n0, const int32_t *col_off,
                        float *dxpad) {
    for (int i = 0; i < rows; i++) {
        float *base = dxpad + pix[i];
        const float *src = tile + i * NR;
        if (s->c % VL == 0) {
            for (int v = 0; v < nv; v++)
                *(rg_convvec *)(base + col_off[n0 + v * VL]) += *(const rg_convvec *)(src + v * VL);
        } else {
            for (int64_t j = 0; j < nv * VL && n0 + j < g->crs; j++)
                base[col_off[n0 + j]] += src[j];
        }
    }
}

/* Whether a chunk's col2im runs straight from the tile's registers (rg_conv_tile_add): when every
 * vector of a tile row lies within one tap (C a multiple of the vector length) and the whole
 * reduction over K fits one block of the tile (RG_CONV_KC), so that the tile ends with finished
 * sums. Otherwise each panel goes through dcol in memory first. Adding from the registers saves
 * dcol's store and reload: the CNN's conv2 data pass (26x26, 32 channels) took 7% less time
 * (15.0-15.3 against 13.9-14.2 ms, Zen 5, one thread). The adds into dxpad come in the same order
 * either way (panel by panel, rows in order), so the bits are the same. */
static bool col2im_in_tile(const rg_conv2d_shape *s) {
    return s->c % VL == 0 && s->k <= RG_CONV_KC;
}

/* One chunk: dxpad = col2im(dyt wt), a panel of NR columns of dcol at a time. dyt is the chunk's
 * panel-major dy (see backward below): pixel m's dy for filter k is dyt[m * NR + koff[k]]. */
static void data_chunk(const rg_conv2d_shape *s, const rg_conv_geom *g, const rg_conv_chunks *ch,
                       int64_t images, const float *wt, const int32_t *koff, const int32_t *col_off,
                       const float *dyt, float *dcol, float *dxpad) {
    int64_t rows = images * g->pq;
    memset(dxpad, 0, (size_t)(images * g->xpad_len) * sizeof(float));
    if (col2im_in_tile(s)) {
        for (int64_t n0 = 0; n0 < g->crs; n0 += NR) {
            int nv = rg_conv_panel_vectors(g->crs, n0);
            for (int64_t m0 = 0; m0 < rows; m0 += MR) {
                const float *a[MR];
                float *dst[MR];
                for (int i = 0; i < MR; i++) {
                    int64_t m = m0 + i < rows ? m0 + i : rows - 1;
                    a[i] = dyt + m * NR, dst[i] = dxpad + ch->pix[m];
                }
                rg_conv_tile_add(nv, s->k, koff, a, wt + n0 * s->k, NR, dst, col_off + n0,
                                 (int)(rows - m0 < MR ? rows - m0 : MR));
            }
        }
        return;
    }
    for (int64_t n0 = 0; n0 < g->crs; n0 += NR) {
        int nv = rg_conv_panel_vectors(g->crs, n0);
        rg_conv_panel_product(nv, rows, dyt, NULL, NR, koff, s->k, wt + n0 * s->k, dcol, NR, false);
        for (int64_t m0 = 0; m0 < rows; m0 += MR)
            col2im_tile(s, g, dcol + m0 * NR, (int)(rows - m0 < MR ? rows - m0 : MR), nv,
                        ch->pix + m0, n0, col_off, dxpad);
    }
}

/* dx (C,H,W) = beta dx + the interior of dxpad, transposed back to channels-first. The interior's
 * rows first slide left to be contiguous (destroying dxpad), so that one transposition in whole
 * vector blocks covers the image. */
static void write_dx(const rg_conv2d_shape *s, const rg_conv_geom *g, float *dxpad, float beta,
                     float *dx) {
    int64_t hw = s->h * s->w, row = g->wp * s->c, wc = s->w * s->c;
    float *body = dxpad + s->pad_h * row;
    if (s->pad_w > 0)
        for (int64_t h = 0; h < s->h; h++)
            memmove(body + h * wc, body + h * row + s->pad_w * s->c, (size_t)wc * sizeof(float));
    rg_conv_transpose(hw, s->c, body, s->c, dx, hw, NULL, beta);
}

/* ---- backward filter ---- */

/* One chunk: acc (rows, kpad) += xpad windows x dyt, for a panel of NR filters at a time and a
 * block of pixels at a time, so that the block of dyt stays in L1 while every row passes. dyt is
 * panel-major, (kpad / NR, npix, NR): a block of a panel is one contiguous run. */
static void filter_chunk(const rg_conv2d_shape *s, const rg_conv_chunks *ch, int64_t images,
                         int64_t pq, const int32_t *row_off, int64_t rows, const float *xpad,
                         const float *dyt, int64_t kpad, float *acc) {
    int64_t npix = images * pq;
    for (int64_t n0 = 0; n0 < s->k; n0 += NR) {
        int nv = rg_conv_panel_vectors(s->k, n0);
        for (int64_t t0 = 0; t0 < npix; t0 += PIXEL_BLOCK) {
            int64_t nt = npix - t0 < PIXEL_BLOCK ? npix - t0 : PIXEL_BLOCK;
            for (int64_t m0 = 0; m0 < rows; m0 += MR) {
                const float *a[MR];
                for (int i = 0; i < MR; i++) a[i] = xpad + row_off[m0 + i];
                rg_conv_tile(nv, nt, ch->pix + t0, a, dyt + n0 * ch->npix + t0 * NR, NR,
                             acc + m0 * kpad + n0, kpad, true);
            }
        }
    }
}

/* A thread's share of the filter gradient: NULL members if OpenMP gave us fewer threads. */
typedef struct {
    float *acc; /* (rows, kpad): dw^T, rows in (r,s,c) order */
    double *db; /* (K): the bias gradient */
} filter_partial;

/* Converts one image's dy (masked by relu_y when a ReLU was fused, NULL otherwise) into the
 * chunk's panel-major dyt, whose panels lie npix * NR apart (dyt points at the image's first
 * pixel), adding it into the thread's bias gradient on the way; and x into xpad, unless x is NULL
 * (the data pass alone). */
static void load_image(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *x,
                       const float *dy, const float *relu_y, int64_t npix, float *xpad, float *dyt,
                       float *sums, double *db) {
    if (x) rg_conv_to_padded_nhwc(s, g, x, xpad);
    memset(sums, 0, (size_t)s->k * sizeof(float));
    for (int64_t n0 = 0; n0 < s->k; n0 += NR)
        rg_conv_transpose_sum(s->k - n0 < NR ? s->k - n0 : NR, g->pq, dy + n0 * g->pq,
                              relu_y ? relu_y + n0 * g->pq : NULL, g->pq, dyt + n0 * npix, NR,
                              sums + n0);
    for (int64_t k = 0; k < s->k; k++) db[k] += sums[k];
}

/* Reduction rows (about) per block of the partials' transposition to dw. The partials' rows run
 * in (r,s,c) order, dw's columns in (c,r,s): a block is a run of channels at every tap,
 * transposed tap by tap into a (K x R*S*block) stage that stays in L2 and then, filter by
 * filter, into the block's contiguous run of dw's row (R*S x block to block x R*S).
 * Transposing straight into dw, whose rows lie C*R*S floats apart, wrote K scattered lines per
 * 16 rows and ran at a quarter of memcpy's speed on the 9.4 MB of ResNet's last stage. */
#define REDUCE_ROWS 256

/* dw = beta dw + the sum of the threads' partials (transposed to (K, C*R*S)), likewise db.
 * Called by every thread of the team: channel blocks are shared out. */
static void filter_reduce(const rg_conv2d_shape *s, int64_t crs, int64_t kpad,
                          const filter_partial *part, int nparts, float beta, float *dw,
                          float *db) {
    /* a whole number of vectors of channels, so that both transpositions run on whole blocks */
    int64_t rs = s->r * s->s, block = (REDUCE_ROWS / rs + RG_CONV_VL / 2) / RG_CONV_VL * RG_CONV_VL;
    if (block < RG_CONV_VL) block = RG_CONV_VL;
    float *stage = rg_conv_scratch(s->k * rs * block);
#pragma omp for schedule(static)
    for (int64_t c0 = 0; c0 < s->c; c0 += block) {
        int64_t nc = s->c - c0 < block ? s->c - c0 : block;
        for (int64_t tap = 0; tap < rs; tap++) {
            int64_t m0 = tap * s->c + c0;
            float *acc0 = part[0].acc + m0 * kpad;
            for (int t = 1; t < nparts; t++)
                if (part[t].acc)
                    for (int64_t i = 0; i < nc * kpad; i++) acc0[i] += part[t].acc[m0 * kpad + i];
            rg_conv_transpose(nc, s->k, acc0, kpad, stage + tap * nc, rs * nc, NULL, 0.0f);
        }
        for (int64_t k = 0; k < s->k; k++)
            rg_conv_transpose(rs, nc, stage + k * rs * nc, nc, dw + k * crs + c0 * rs, rs, NULL,
                              beta);
    }
    rg_conv_scratch_free(stage, s->k * rs * block);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < (db ? s->k : 0); k++) {
        double sum = 0.0;
        for (int t = 0; t < nparts; t++) sum += part[t].db ? part[t].db[k] : 0.0;
        db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
    }
}

static void backward(const rg_conv2d_shape *s, const float *x, const float *dy, const float *w,
                     float beta_x, float *dx, float beta_w, float *dw, float *db);

/* The gradient of the convolution's own output when a ReLU or a max-pool was fused onto it, in a
 * scratch of *len floats, as the unfused ops' backward passes would have written it: dy masked by
 * the ReLU's output (at the pooled positions when pooled), then routed back to the pool's maxima.
 */
static float *unfused_dy(const rg_conv2d_shape *s, const float *dy, int64_t *len) {
    int64_t out = s->n * s->k * s->p * s->q;
    if (!s->pool) {
        float *dz = rg_conv_scratch(out);
        rg_cpu_relu_backward(out, s->relu_y, dy, 0.0f, dz);
        *len = out;
        return dz;
    }
    int64_t pooled = s->n * s->k * s->pool->p * s->pool->q;
    float *masked = s->relu_y ? rg_conv_scratch(pooled) : NULL, *dz = rg_conv_scratch(out);
    if (masked) rg_cpu_relu_backward(pooled, s->relu_y, dy, 0.0f, masked);
    rg_cpu_maxpool2d_backward(s->pool, masked ? masked : dy, s->pool_argmax, 0.0f, dz);
    if (masked) rg_conv_scratch_free(masked, pooled);
    *len = out;
    return dz;
}

/* A fused max-pool on passes that do not fuse it (1x1 products, the filter pass of small planes
 * and the one by output rows of conv2d_direct.c): the plain passes on unfused_dy. */
static void backward_unpooled(const rg_conv2d_shape *s, const float *x, const float *dy,
                              const float *w, float beta_x, float *dx, float beta_w, float *dw,
                              float *db) {
    rg_conv2d_shape plain = *s;
    plain.pool = NULL, plain.pool_argmax = NULL, plain.relu_y = NULL;
    int64_t len;
    float *dz = unfused_dy(s, dy, &len);
    backward(&plain, x, dz, w, beta_x, dx, beta_w, dw, db);
    rg_conv_scratch_free(dz, len);
}

/* One image's gradient of the convolution's output, from that of its fused pool (see
 * rg_conv2d_shape.pool): dy masked by the ReLU's output (relu_y, when one was fused, at the
 * pooled positions, where it equals the pool's output) into dm, then routed back to the maxima
 * into dimg, zero elsewhere. */
static void unpool_image(const rg_pool2d_shape *one, const float *dy, const float *relu_y,
                         const int32_t *argmax, float *dm, float *dimg) {
    int64_t pooled = one->c * one->p * one->q;
    if (relu_y) {
        for (int64_t j = 0; j < pooled; j++) dm[j] = rg_k_relu_grad(relu_y[j], dy[j]);
        dy = dm;
    }
    rg_cpu_maxpool2d_backward_serial(one, dy, argmax, 0.0f, dimg);
}

/* A fused 2x2/2 pool's gradient for one image, straight into the chunk's panel-major dyt (dyt
 * pointing at the image's first pixel row), and its bias sums, as load_image would have made
 * them from the unpooled dy: dy (K, PP*QQ) masked by relu_y (or not, when NULL) as it is
 * transposed to channels-last, its argmax transposed too, and unpooled there
 * (rg_conv_unpool2x2_nhwc). scratch holds two (PP*QQ, kpad) blocks whose columns past K are
 * zero. */
static void unpool_nhwc_image(const rg_conv2d_shape *s, int64_t kpad, const float *dy,
                              const float *relu_y, const int32_t *argmax, float *scratch,
                              int64_t npix, float *dyt, float *sums, double *db) {
    int64_t ppq = s->pool->p * s->pool->q;
    float *dmt = scratch;
    int32_t *amt = (int32_t *)(dmt + ppq * kpad);
    rg_conv_transpose_sum(s->k, ppq, dy, relu_y, ppq, dmt, kpad, NULL); /* masked, no sums */
    rg_conv_transpose_i32(s->k, ppq, argmax, ppq, amt, kpad);
    rg_conv_unpool2x2_nhwc(s->p, s->q, kpad, dmt, amt, npix, dyt);
    memset(sums, 0, (size_t)s->k * sizeof(float));
    for (int64_t n0 = 0; n0 < s->k; n0 += NR)
        rg_conv_panel_sums(s->k - n0 < NR ? s->k - n0 : NR, s->p * s->q, dyt + n0 * npix,
                           sums + n0);
    for (int64_t k = 0; k < s->k; k++) db[k] += sums[k];
}

/* The two backward passes of one convolution, or either alone (dx or dw NULL), over the same
 * chunks. Together they share the chunk's transposition of dy (masked, when a ReLU was fused, and
 * unpooled first, when a pool was):
 * the filter pass's panel-major dyt, (kpad / NR, npix, NR), is also the data pass's left operand,
 * read through koff[k] = (k / NR) * npix * NR + k % NR with pixels NR floats apart. */
static void backward(const rg_conv2d_shape *s, const float *x, const float *dy, const float *w,
                     float beta_x, float *dx, float beta_w, float *dw, float *db) {
    if (s->pool && (rg_conv_gemm_applies(s) ||
                    (dw && (rg_conv_gemm_filter_applies(s) || rg_conv_filter_rows_applies(s))))) {
        backward_unpooled(s, x, dy, w, beta_x, dx, beta_w, dw, db);
        return;
    }
    if (rg_conv_gemm_applies(s)) { /* 1x1: see conv2d_gemm.c */
        rg_conv_backward_gemm(s, x, dy, w, beta_x, dx, beta_w, dw, db);
        return;
    }
    /* The passes that read the plain dy: the data pass as a forward pass (stride 1: see conv2d.c)
     * and Winograd's filter pass (3x3, stride 1: see conv2d_winograd.c). The fused ops are undone
     * once, for both; whatever pass is left runs below, on the fused dy. */
    bool data_fwd = dx && rg_conv_data_as_forward_applies(s);
    bool wino_filter = dw && rg_conv_winograd_applies(s);
    if (data_fwd || wino_filter) {
        int64_t len = 0;
        float *dz = s->pool || s->relu_y ? unfused_dy(s, dy, &len) : NULL;
        if (data_fwd) {
            rg_conv_data_as_forward(s, dz ? dz : dy, w, beta_x, dx);
            dx = NULL;
        }
        if (wino_filter) {
            rg_conv_winograd_filter(s, x, dz ? dz : dy, beta_w, dw, db);
            dw = NULL, db = NULL;
        }
        if (dz) rg_conv_scratch_free(dz, len);
        if (!dx && !dw) return;
    }
    if (dw && rg_conv_filter_rows_applies(s)) { /* short unpadded kernels: conv2d_direct.c */
        rg_conv_backward_filter_rows(s, x, dy, beta_w, dw, db);
        if (!dx) return;
        dw = NULL, db = NULL; /* the data pass on the tiles, below */
    }
    if (dw && rg_conv_gemm_filter_applies(s)) { /* small planes, many channels: conv2d_gemm.c */
        rg_conv_backward_gemm(s, x, dy, w, 0.0f, NULL, beta_w, dw, db);
        if (!dx) return;
        dw = NULL, db = NULL; /* the data pass on the tiles, below */
    }
    rg_conv_geom g = rg_conv_geom_of(s);
    rg_conv_chunks ch = rg_conv_chunks_new(s, &g);
    int64_t rows = rg_conv_round_up(g.crs, MR), kpad = rg_conv_round_up(s->k, NR);
    int64_t accn = rows * kpad, xn = ch.images * g.xpad_len, dyn = ch.npix * kpad;
    int64_t chw = s->c * s->h * s->w, kpq = s->k * g.pq;
    int64_t drows = rg_conv_round_up(ch.npix, MR);
    RG_CHECK(dyn < INT32_MAX, "conv2d: a chunk's dy of %lld floats is too large for int32",
             (long long)dyn);
    RG_CHECK(dw || !db, "conv2d: the bias gradient comes with the filter pass only");
    int32_t *row_off = dw ? rg_conv_window_offsets(s, &g, rows) : NULL;
    float *wt = dx ? pack_data_weights(s, g.crs, w) : NULL;
    int32_t *col_off = dx ? rg_conv_window_offsets(s, &g, g.crs) : NULL;
    int32_t *koff = (int32_t *)rg_conv_scratch(s->k);
    for (int64_t k = 0; k < s->k; k++) koff[k] = (int32_t)(k / NR * ch.npix * NR + k % NR);
    int nthreads = ch.count > 1 ? omp_get_max_threads() : 1;
    filter_partial *part =
        rg_xcalloc((size_t)nthreads, sizeof *part, "conv2d: per-thread partials");
    /* A fused pool: a 2x2/2 one's gradient goes straight into dyt (unpool_nhwc_image); any
     * other is unpooled image by image into a scratch of each thread (unpool_image). */
    int64_t ppq = s->pool ? s->pool->p * s->pool->q : 0, pooled = s->k * ppq;
    rg_pool2d_shape one = s->pool ? *s->pool : (rg_pool2d_shape){0};
    one.n = 1;
    bool nhwc_pool = s->pool && rg_cpu_pool_is_2x2(s->pool);
    int64_t pscr_n = 2 * ppq * kpad;
#pragma omp parallel num_threads(nthreads)
    {
        filter_partial *mine = &part[omp_get_thread_num()];
        float *xpad = dw ? rg_conv_scratch(xn) : NULL, *dyt = rg_conv_scratch(dyn),
              *sums = rg_conv_scratch(kpad);
        float *dimg = s->pool && !nhwc_pool ? rg_conv_scratch(kpq) : NULL,
              *dm = dimg && s->relu_y ? rg_conv_scratch(pooled) : NULL,
              *pscr = nhwc_pool ? rg_conv_scratch(pscr_n) : NULL;
        if (pscr) /* the channels-last blocks' columns past K stay zero */
            memset(pscr, 0, (size_t)pscr_n * sizeof(float));
        float *dxpad = dx ? rg_conv_scratch(xn) : NULL,
              *dcol = dx && !col2im_in_tile(s) ? rg_conv_scratch(drows * NR) : NULL;
        memset(dyt, 0, (size_t)dyn * sizeof(float)); /* columns past K stay zero */
        if (dw) {
            mine->acc = rg_conv_scratch(accn);
            memset(mine->acc, 0, (size_t)accn * sizeof(float));
        }
        mine->db = rg_xcalloc((size_t)s->k + 1, sizeof(double), "conv2d: bias-gradient partials");
        /* static, unlike the other passes: which images a thread's partial sums then depends on
         * the thread count only, so dw rounds the same way in every run (with dynamic scheduling
         * it changed with timing, by an ulp or two) */
#pragma omp for schedule(static)
        for (int64_t ci = 0; ci < ch.count; ci++) {
            int64_t n0 = ci * ch.images, images = s->n - n0 < ch.images ? s->n - n0 : ch.images;
            for (int64_t i = 0; i < images; i++) {
                if (pscr) {
                    if (dw)
                        rg_conv_to_padded_nhwc(s, &g, x + (n0 + i) * chw, xpad + i * g.xpad_len);
                    unpool_nhwc_image(s, kpad, dy + (n0 + i) * pooled,
                                      s->relu_y ? s->relu_y + (n0 + i) * pooled : NULL,
                                      s->pool_argmax + (n0 + i) * pooled, pscr, ch.npix,
                                      dyt + i * g.pq * NR, sums, mine->db);
                    continue;
                }
                const float *dyi = dy + (n0 + i) * kpq,
                            *mask = s->relu_y ? s->relu_y + (n0 + i) * kpq : NULL;
                if (dimg) {
                    unpool_image(&one, dy + (n0 + i) * pooled,
                                 s->relu_y ? s->relu_y + (n0 + i) * pooled : NULL,
                                 s->pool_argmax + (n0 + i) * pooled, dm, dimg);
                    dyi = dimg, mask = NULL;
                }
                load_image(s, &g, dw ? x + (n0 + i) * chw : NULL, dyi, mask, ch.npix,
                           dw ? xpad + i * g.xpad_len : NULL, dyt + i * g.pq * NR, sums, mine->db);
            }
            if (dw) filter_chunk(s, &ch, images, g.pq, row_off, rows, xpad, dyt, kpad, mine->acc);
            if (dx) {
                data_chunk(s, &g, &ch, images, wt, koff, col_off, dyt, dcol, dxpad);
                for (int64_t i = 0; i < images; i++)
                    write_dx(s, &g, dxpad + i * g.xpad_len, beta_x, dx + (n0 + i) * chw);
            }
        }
        /* the implicit barrier above: every partial is complete */
        if (dw) filter_reduce(s, g.crs, kpad, part, nthreads, beta_w, dw, db);
        if (dcol) rg_conv_scratch_free(dcol, drows * NR);
        if (dxpad) rg_conv_scratch_free(dxpad, xn);
        if (pscr) rg_conv_scratch_free(pscr, pscr_n);
        if (dm) rg_conv_scratch_free(dm, pooled);
        if (dimg) rg_conv_scratch_free(dimg, kpq);
        rg_conv_scratch_free(sums, kpad);
        rg_conv_scratch_free(dyt, dyn);
        if (xpad) rg_conv_scratch_free(xpad, xn);
    }
    for (int t = 0; t < nthreads; t++) {
        if (part[t].acc) rg_conv_scratch_free(part[t].acc, accn);
        free(part[t].db);
    }
    free(part);
    rg_conv_scratch_free((float *)koff, s->k);
    if (col_off) rg_conv_scratch_free((float *)col_off, g.crs);
    if (wt) rg_conv_scratch_free(wt, (g.crs + NR - 1) / NR * s->k * NR);
    if (row_off) rg_conv_scratch_free((float *)row_off, rows);
    rg_conv_chunks_free(&ch);
}

void rg_cpu_conv2d_backward_data(const rg_conv2d_shape *s, const float *dy, const float *w,
                                 float beta, float *dx) {
    backward(s, NULL, dy, w, beta, dx, 0.0f, NULL, NULL);
}

void rg_cpu_conv2d_backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy,
                                   float beta, float *dw, float *db) {
    backward(s, x, dy, NULL, 0.0f, NULL, beta, dw, db);
}

void rg_cpu_conv2d_backward(const rg_conv2d_shape *s, const float *x, const float *dy,
                            const float *w, float beta_x, float *dx, float beta_w, float *dw,
                            float *db) {
    backward(s, x, dy, w, beta_x, dx, beta_w, dw, db);
}
