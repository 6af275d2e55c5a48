/* conv2d.c — 2-D convolution on the CPU: the forward pass, and how all three passes are built.
 *
 * The textbook CPU convolution is im2col + GEMM: copy every input window into a column of a
 * matrix, then multiply by the weights. It spends memory bandwidth writing and re-reading a
 * matrix R*S times larger than the input, and hands the GEMM awkward shapes (conv1 of the CNN
 * reduces over only 9 values). Here every pass is a register-tiled product (rg_conv_tile in
 * conv2d_kernels.c) that reads the input through an indirection instead:
 *
 *   forward      y[pixel][k]       = sum_{r,s,c} xpad[window(pixel) + tap(r,s) + c] * w[k,c,r,s]
 *   backward data  (conv2d_backward.c) dcol[pixel][(r,s,c)] = sum_k dy[pixel][k] * w[k,c,r,s],
 *                  scatter-added into dx at window(pixel) + tap(r,s) + c  (col2im)
 *   backward filter (conv2d_backward.c) dw[(c,r,s)][k] = sum_pixel xpad[window(pixel) + tap(r,s)
 *                  + c] * dy[pixel][k]
 *
 * Vectors run along output channels k (forward, filter) or along (r,s,c) (data), so each image is
 * first transposed to channels-last in a per-thread scratch that stays in cache, and results are
 * transposed back to NCHW, adding the bias on the way. Threads (OpenMP) take whole images; the
 * filter gradient keeps one partial sum per thread and adds them at the end. Weights are packed
 * once per call into the order the tile reads them. */
#include <omp.h>

#include "tensor/cpu/conv2d_impl.h"

int rg_conv_exp_flag; /* EXPERIMENT: remove */
#define NR RG_CONV_NR
#define MR RG_CONV_MR

/* Output pixels per block of the forward pass: a multiple of MR and of the vector length, so the
 * block's (pixels x K) results stay in cache and transpose in whole vector blocks. */
#define PIXEL_BLOCK 96

/* wp[panel][(r,s,c)][j] = w[panel*NR + j][c][r][s], zero past the last filter: each panel is the
 * contiguous (crs x NR) block of b that the forward tile streams through. */
static float *pack_forward_weights(const rg_conv2d_shape *s, const float *w, int64_t crs) {
    int64_t npanel = (s->k + NR - 1) / NR;
    float *wp = rg_conv_scratch(npanel * crs * NR);
#pragma omp parallel for schedule(static) if (npanel * crs * NR > RG_CPU_PAR_MIN)
    for (int64_t jp = 0; jp < npanel; jp++)
        for (int64_t j = 0; j < NR; j++) {
            int64_t k = jp * NR + j;
            float *dst = wp + jp * crs * NR + j;
            for (int64_t c = 0; c < s->c; c++)
                for (int64_t rs = 0; rs < s->r * s->s; rs++)
                    dst[(rs * s->c + c) * NR] = k < s->k ? w[(k * s->c + c) * s->r * s->s + rs] : 0;
        }
    return wp;
}

/* One image: y (K, P*Q) = conv(xpad) + b, block by block of output pixels. */
static void forward_image(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *xpad,
                          const float *wp, const int32_t *off, const float *b, float *yblk,
                          int64_t kpad, float *y) {
    for (int64_t pb0 = 0; pb0 < g->pq; pb0 += PIXEL_BLOCK) {
        int64_t np = g->pq - pb0 < PIXEL_BLOCK ? g->pq - pb0 : PIXEL_BLOCK;
        for (int64_t n0 = 0; n0 < s->k; n0 += NR) {
            int nv = rg_conv_panel_vectors(s->k, n0);
            const float *panel = wp + n0 * g->crs;
            for (int64_t i0 = 0; i0 < np; i0 += MR) {
                const float *a[MR];
                for (int i = 0; i < MR; i++) /* spare rows repeat the block's last pixel */
                    a[i] = xpad + rg_conv_pixel_offset(s, g, pb0 + (i0 + i < np ? i0 + i : np - 1));
                rg_conv_tile(nv, g->crs, off, a, panel, NR, yblk + i0 * kpad + n0, kpad, false);
            }
        }
        rg_conv_transpose(np, s->k, yblk, kpad, y + pb0, g->pq, b, 0.0f);
    }
}

void rg_cpu_conv2d_forward(const rg_conv2d_shape *s, const float *x, const float *w,
                           const float *b, float *y) {
    rg_conv_geom g = rg_conv_geom_of(s);
    if (g.crs <= RG_CONV_DIRECT_MAX_CRS && !rg_conv_exp_flag) { /* a short reduction: see conv2d_direct.c */
        rg_conv_forward_direct(s, &g, x, w, b, y);
        return;
    }
    int64_t kpad = rg_conv_round_up(s->k, NR), blk = rg_conv_round_up(PIXEL_BLOCK, MR) * kpad;
    float *wp = pack_forward_weights(s, w, g.crs);
    int32_t *off = rg_conv_tap_offsets(s, &g);
#pragma omp parallel if (s->n > 1)
    {
        float *xpad = rg_conv_scratch(g.xpad_len), *yblk = rg_conv_scratch(blk);
#pragma omp for schedule(dynamic, 1)
        for (int64_t n = 0; n < s->n; n++) {
            rg_conv_to_padded_nhwc(s, &g, x + n * s->c * s->h * s->w, xpad);
            forward_image(s, &g, xpad, wp, off, b, yblk, kpad, y + n * s->k * g.pq);
        }
        rg_conv_scratch_free(yblk, blk);
        rg_conv_scratch_free(xpad, g.xpad_len);
    }
    rg_conv_scratch_free((float *)off, g.crs);
    rg_conv_scratch_free(wp, (s->k + NR - 1) / NR * g.crs * NR);
}
