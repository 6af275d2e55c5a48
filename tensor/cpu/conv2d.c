/* conv2d.c — 2-D convolution on the CPU: the forward pass, and how all three passes are built.
 *
 * The textbook CPU convolution is im2col + GEMM: copy every input window into a column of a
 * matrix, then multiply by the weights. It spends memory bandwidth writing and re-reading a
 * matrix R*S times larger than the input, and hands the GEMM awkward shapes (conv1 of the CNN
 * reduces over only 9 values). Here every pass is a register-tiled product (rg_conv_tile in
 * conv2d_kernels.c) that reads the input through an indirection instead:
 *
 *   forward          y[pixel][k] = sum_{r,s,c} xpad[window(pixel) + tap(r,s) + c] w[k,c,r,s]
 *   backward data    dcol[pixel][(r,s,c)] = sum_k dy[pixel][k] w[k,c,r,s], then added into dx
 *                    at window(pixel) + tap(r,s) + c (col2im)             (conv2d_backward.c),
 *                    or, at stride 1 with dx the size of dy, the forward pass of dy with the
 *                    filters flipped (rg_conv_data_as_forward, below)
 *   backward filter  dw[(r,s,c)][k] = sum_pixel xpad[window(pixel) + tap(r,s) + c] dy[pixel][k]
 *
 * Every pass walks a window tap by tap and, within a tap, along the channels: (r,s,c) order,
 * in which consecutive steps (forward) or tile rows (filter) read consecutive floats of one
 * channels-last pixel. In w's own (c,r,s) order each step jumped to another tap, another cache
 * line; with a stride of 2 a chunk's padded images outgrow L2 and the tile waited on those
 * loads: ResNet-50's last 3x3/2 forward took 1.35x as long, its 56->28 3x3/2 filter pass 1.45x
 * (docs/PERFORMANCE.md).
 *
 * Vectors run along output channels k (forward, filter) or along (r,s,c) (data), so a thread
 * first transposes a chunk of images to channels-last in a scratch that stays in cache, and
 * transposes the results back to NCHW, adding the bias on the way. Threads (OpenMP) take whole
 * chunks; the filter gradient keeps one partial sum per thread and adds them at the end. Weights
 * are packed once per call into the order the tile reads them. A fused ReLU (rg_conv2d_relu) costs
 * nothing extra: it is applied in that last transposition, and its backward's mask in the first
 * transposition of dy in each backward pass. Convolutions with a short reduction (conv1) or a
 * padded 1x1 kernel run the forward pass with vectors along pixels instead (conv2d_direct.c).
 * 1x1 kernels without padding skip all of this: they are plain matrix products on the NCHW data,
 * which OpenBLAS runs (conv2d_gemm.c), as it runs the filter pass of larger kernels on small
 * planes with many channels. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR

/* wp[panel][(r,s,c)][j] = w[panel*NR + j][c][r][s], zero past the last filter: each panel is the
 * contiguous (crs x NR) block of b that the forward tile streams through. Each panel's filters are
 * one (NR x C*R*S) matrix in w, read as whole vectors along (c,r,s); its transposition sends column
 * (c,r,s) to row (r,s,c) of the panel, in one pass: 0.5 ms of ResNet-18's last 3x3 forward (16.5
 * ms; Zen 5, one thread, weights in cache), where transposing each filter to (r,s,c) order first
 * and the panel after (two passes, the first on rows of R*S floats, narrower than a vector) took
 * 1.2. */
static float *pack_forward_weights(const rg_conv2d_shape *s, const float *w, int64_t crs) {
    int64_t npanel = (s->k + NR - 1) / NR, rs = s->r * s->s;
    float *wp = rg_conv_scratch(npanel * crs * NR);
    int32_t *row = (int32_t *)rg_conv_scratch(crs); /* row[(c,r,s)] = (r,s,c) */
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t tap = 0; tap < rs; tap++) row[c * rs + tap] = (int32_t)(tap * s->c + c);
#pragma omp parallel for schedule(static) if (npanel * crs * NR > RG_CPU_PAR_MIN)
    for (int64_t jp = 0; jp < npanel; jp++) {
        int64_t kn = s->k - jp * NR < NR ? s->k - jp * NR : NR;
        if (kn < NR) memset(wp + jp * crs * NR, 0, (size_t)(crs * NR) * sizeof(float));
        rg_conv_transpose_rows(kn, crs, w + jp * NR * crs, crs, wp + jp * crs * NR, NR, row);
    }
    rg_conv_scratch_free((float *)row, crs);
    return wp;
}

/* A fused max-pool on a forward pass that does not fuse it (1x1 products, the direct pass): the
 * convolution's output in a temporary, then the pool over it. */
static void forward_then_pool(const rg_conv2d_shape *s, const float *x, const float *w,
                              const float *b, float *y) {
    rg_conv2d_shape plain = *s;
    plain.pool = NULL, plain.pool_argmax = NULL;
    int64_t len = s->n * s->k * s->p * s->q;
    float *t = rg_conv_scratch(len);
    rg_cpu_conv2d_forward(&plain, x, w, b, t);
    rg_cpu_maxpool2d_forward(s->pool, t, y, s->pool_argmax);
    rg_conv_scratch_free(t, len);
}

/* One image's fused 2x2/2 pool: src (P*Q, kpad) is its output in yc; y and argmax its pooled
 * planes; scratch holds PP*QQ * kpad floats and as many int32s. */
static void pool_nhwc_image(const rg_conv2d_shape *s, const float *src, int64_t kpad,
                            const float *bias, float *scratch, float *y, int32_t *argmax) {
    int64_t ppq = s->pool->p * s->pool->q;
    float *out = scratch;
    int32_t *am = (int32_t *)(out + ppq * kpad);
    rg_conv_pool2x2_nhwc(s->p, s->q, s->k, kpad, src, bias, s->relu, out, am);
    rg_conv_transpose(ppq, s->k, out, kpad, y, ppq, NULL, 0.0f);
    rg_conv_transpose_i32(ppq, s->k, am, kpad, argmax, ppq);
}

/* The forward pass on the tiles, its weights packed by pack_forward_weights (or in that layout):
 * y = conv(x) + b, or, when neither a ReLU nor a pool is fused, y = beta y + conv(x) + b. With wu
 * (rg_conv_winograd_weights) instead of wp, each chunk's product is Winograd's
 * (conv2d_winograd.c); all else is the same. */
static void forward_tiles(const rg_conv2d_shape *s, const rg_conv_geom *gp, const float *x,
                          const float *wp, const float *wu, const float *b, float beta, float *y) {
    RG_CHECK(beta == 0.0f || (!s->relu && !s->pool), "conv2d: beta with a fused ReLU or pool");
    const rg_conv_geom g = *gp;
    rg_conv_chunks ch = rg_conv_chunks_new(s, &g);
    int64_t kpad = rg_conv_round_up(s->k, NR), chw = s->c * s->h * s->w;
    int64_t xn = ch.images * g.xpad_len, yn = rg_conv_round_up(ch.npix, MR) * kpad;
    int32_t *off = wu ? NULL : rg_conv_window_offsets(s, &g, g.crs);
    int64_t wn = wu ? rg_conv_winograd_scratch_len(s->c, kpad) : 0;
    /* A fused pool: only the pooled output reaches memory. A 2x2/2 one pools each image while
     * it is channels-last in yc (rg_conv_pool2x2_nhwc), and then only a quarter of the pixels
     * need transposing; any other pool takes the image's (K, P*Q) output transposed into a
     * scratch of each thread, and pools that while it is in cache. */
    int64_t kpq = s->k * g.pq, ppq = s->pool ? s->pool->p * s->pool->q : 0, pooled = s->k * ppq;
    rg_pool2d_shape one = s->pool ? *s->pool : (rg_pool2d_shape){0};
    one.n = 1;
    bool nhwc_pool = s->pool && rg_cpu_pool_is_2x2(s->pool);
    float *bpad = nhwc_pool && b ? rg_conv_scratch(kpad) : NULL; /* the bias, zero past K */
    if (bpad) {
        memset(bpad, 0, (size_t)kpad * sizeof(float));
        memcpy(bpad, b, (size_t)s->k * sizeof(float));
    }
#pragma omp parallel if (ch.count > 1)
    {
        float *xpad = rg_conv_scratch(xn), *yc = rg_conv_scratch(yn);
        float *wscratch = wu ? rg_conv_scratch(wn) : NULL;
        float *yimg = s->pool && !nhwc_pool ? rg_conv_scratch(kpq) : NULL;
        float *pnhwc = nhwc_pool ? rg_conv_scratch(2 * ppq * kpad) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t ci = 0; ci < ch.count; ci++) {
            int64_t n0 = ci * ch.images, images = s->n - n0 < ch.images ? s->n - n0 : ch.images;
            for (int64_t i = 0; i < images; i++)
                rg_conv_to_padded_nhwc(s, &g, x + (n0 + i) * chw, xpad + i * g.xpad_len);
            if (wu) /* yc (pixels, kpad) = conv(xpad) */
                rg_conv_winograd_chunk(s, &g, images, xpad, wu, yc, kpad, wscratch);
            else
                for (int64_t n0 = 0; n0 < s->k; n0 += NR)
                    rg_conv_panel_product(rg_conv_panel_vectors(s->k, n0), images * g.pq, xpad,
                                          ch.pix, 0, off, g.crs, wp + n0 * g.crs, yc + n0, kpad,
                                          false);
            for (int64_t i = 0; i < images; i++) { /* back to (K, P*Q), adding the bias */
                const float *src = yc + i * g.pq * kpad;
                if (pnhwc) {
                    pool_nhwc_image(s, src, kpad, bpad, pnhwc, y + (n0 + i) * pooled,
                                    s->pool_argmax + (n0 + i) * pooled);
                    continue;
                }
                float *dst = yimg ? yimg : y + (n0 + i) * kpq;
                if (s->relu) /* the fused ReLU, while the tile's results are still in cache */
                    rg_conv_transpose_relu(g.pq, s->k, src, kpad, dst, g.pq, b);
                else
                    rg_conv_transpose(g.pq, s->k, src, kpad, dst, g.pq, b, beta);
                if (yimg)
                    rg_cpu_maxpool2d_forward_serial(&one, yimg, y + (n0 + i) * pooled,
                                                    s->pool_argmax + (n0 + i) * pooled);
            }
        }
        if (yimg) rg_conv_scratch_free(yimg, kpq);
        if (pnhwc) rg_conv_scratch_free(pnhwc, 2 * ppq * kpad);
        if (wscratch) rg_conv_scratch_free(wscratch, wn);
        rg_conv_scratch_free(yc, yn);
        rg_conv_scratch_free(xpad, xn);
    }
    if (bpad) rg_conv_scratch_free(bpad, kpad);
    if (off) rg_conv_scratch_free((float *)off, g.crs);
    rg_conv_chunks_free(&ch);
}

void rg_cpu_conv2d_forward(const rg_conv2d_shape *s, const float *x, const float *w, const float *b,
                           float *y) {
    bool direct = s->c * s->r * s->s <= RG_CONV_DIRECT_MAX_CRS || (s->r == 1 && s->s == 1);
    if (s->pool && (direct || rg_conv_gemm_applies(s))) {
        forward_then_pool(s, x, w, b, y);
        return;
    }
    if (rg_conv_gemm_applies(s)) { /* 1x1: see conv2d_gemm.c */
        rg_conv_forward_gemm(s, x, w, b, y);
        return;
    }
    rg_conv_geom g = rg_conv_geom_of(s);
    if (direct) { /* see conv2d_direct.c */
        rg_conv_forward_direct(s, &g, x, w, b, y);
        return;
    }
    if (rg_conv_winograd_applies(s)) { /* see conv2d_winograd.c */
        float *wu = rg_conv_winograd_weights(s->k, s->c, w, false);
        forward_tiles(s, &g, x, NULL, wu, b, 0.0f, y);
        rg_conv_scratch_free(wu, rg_conv_winograd_weights_len(s->c, s->k));
        return;
    }
    float *wp = pack_forward_weights(s, w, g.crs);
    forward_tiles(s, &g, x, wp, NULL, b, 0.0f, y);
    rg_conv_scratch_free(wp, (s->k + NR - 1) / NR * g.crs * NR);
}

/* ---- the data pass of a stride-1 "same" convolution, as a forward pass ----
 *
 * dx[c][h][w] = sum_{k,r,s} dy[k][h + pad - r][w + pad - s] w[k][c][r][s]: a convolution of dy
 * (K channels) with the filters flipped in both axes and K and C swapped, padded by R-1-pad. When
 * the output keeps the input's size (stride 1, pad (R-1)/2) this reads no more windows than the
 * forward pass does, and then the forward's tiles write each dx value once, where the data pass
 * of conv2d_backward.c forms every window's gradient (dcol) and adds it into dx, R*S adds per
 * value (col2im): ResNet-18's 3x3 data passes took 1.05-1.27x their forward's time that way.
 * Channel counts below the tile's width (ResNet-20's 16 and 32 on AVX-512) run on narrower tiles
 * and still gain: ResNet-20's step 8% faster. A convolution whose output is smaller than its
 * input (no padding) would multiply the zeros of the wider padding too, and with a fused pool
 * lose the fused unpooling: the CNN's conv2 (26 -> 24) took 4% less time alone but its step 3%
 * more, so those keep col2im, unless Winograd's product runs the flipped shape (below). */

/* That convolution's shape: dy in, dx out. */
static rg_conv2d_shape flipped_shape(const rg_conv2d_shape *s) {
    return (rg_conv2d_shape){.n = s->n,
                             .c = s->k,
                             .h = s->p,
                             .w = s->q,
                             .k = s->c,
                             .r = s->r,
                             .s = s->s,
                             .p = s->h,
                             .q = s->w,
                             .stride_h = 1,
                             .stride_w = 1,
                             .pad_h = (int)s->r - 1 - s->pad_h,
                             .pad_w = (int)s->s - 1 - s->pad_w};
}

/* With Winograd's product (conv2d_winograd.c) the zeros of a wider padding cost less than col2im's
 * adds: the CNN's conv2 (26 -> 24, fused ReLU and pool) takes that path too. */
bool rg_conv_data_as_forward_applies(const rg_conv2d_shape *s) {
    if (!rg_conv_switch_on("RG_CONV_DATA_AS_FORWARD")) return false;
    if (s->stride_h != 1 || s->stride_w != 1 || s->r * s->s == 1) return false;
    if (s->p == s->h && s->q == s->w) return true;
    rg_conv2d_shape f = flipped_shape(s);
    return s->pad_h <= s->r - 1 && s->pad_w <= s->s - 1 && rg_conv_winograd_applies(&f);
}

/* wp[panel][(r',s',k)][j] = w[k][panel*NR + j][R-1-r'][S-1-s'], zero past the last channel: the
 * weights of that convolution in pack_forward_weights' layout. For each panel, filter after
 * filter, the panel's channels' (NR, R*S) weights are transposed straight into it, tap t to row
 * (R*S-1-t, k): a panel's R*S rows advance together, NR floats a filter. Packing 16 filters to
 * (R*S, C) in a buffer first and copying its rows out to the panels took 0.95 ms of ResNet-18's
 * last 3x3 data pass (16 ms); this takes 0.5 (Zen 5, one thread, weights in cache). Filter-major
 * order, each filter writing to all the panels at once (R*S*C/NR scattered runs), took 0.7-1.0. */
static float *pack_flipped_weights(const rg_conv2d_shape *s, const float *w) {
    int64_t rs = s->r * s->s, crs = s->c * rs, kd = s->k * rs, npanel = (s->c + NR - 1) / NR;
    float *wp = rg_conv_scratch(npanel * kd * NR);
    int64_t last = s->c - (npanel - 1) * NR; /* channels in the last panel */
    if (last < NR)                           /* its columns past C */
        for (int64_t t = 0; t < kd; t++)
            memset(wp + ((npanel - 1) * kd + t) * NR + last, 0,
                   (size_t)(NR - last) * sizeof(float));
    int32_t *row = (int32_t *)rg_conv_scratch(rs); /* tap t to the rows (R*S-1-t, k) */
    for (int64_t t = 0; t < rs; t++) row[t] = (int32_t)((rs - 1 - t) * s->k);
#pragma omp parallel for collapse(2) schedule(static) if (npanel * kd * NR > RG_CPU_PAR_MIN)
    for (int64_t jp = 0; jp < npanel; jp++)
        for (int64_t k = 0; k < s->k; k++) {
            int64_t cn = jp < npanel - 1 ? NR : last;
            rg_conv_transpose_narrow(cn, rs, w + k * crs + jp * NR * rs, rs, w + s->k * crs,
                                     wp + jp * kd * NR + k * NR, NR, row);
        }
    rg_conv_scratch_free((float *)row, rs);
    return wp;
}

void rg_conv_data_as_forward(const rg_conv2d_shape *s, const float *dy, const float *w, float beta,
                             float *dx) {
    rg_conv2d_shape f = flipped_shape(s);
    rg_conv_geom g = rg_conv_geom_of(&f);
    if (rg_conv_winograd_applies(&f)) { /* see conv2d_winograd.c */
        float *wu = rg_conv_winograd_weights(f.k, f.c, w, true);
        forward_tiles(&f, &g, dy, NULL, wu, NULL, beta, dx);
        rg_conv_scratch_free(wu, rg_conv_winograd_weights_len(f.c, f.k));
        return;
    }
    float *wp = pack_flipped_weights(s, w);
    forward_tiles(&f, &g, dy, wp, NULL, NULL, beta, dx);
    rg_conv_scratch_free(wp, g.crs * rg_conv_round_up(s->c, NR));
}
