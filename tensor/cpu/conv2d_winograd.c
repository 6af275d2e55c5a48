/* conv2d_winograd.c — 3x3, stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3).
 *
 * Lavin and Gray (2016), "Fast Algorithms for Convolutional Neural Networks". A 2x2 block of
 * outputs of a 3x3 filter needs a 4x4 patch d of the input. Transformed, the patch and the
 * filter g multiply point by point, 16 products where the direct convolution does 36:
 *
 *     Y = A^T [ (G g G^T) .* (B^T d B) ] A
 *
 *     B^T = | 1  0 -1  0 |    G = | 1    0    0   |    A^T = | 1  1  1  0 |
 *           | 0  1  1  0 |        | 1/2  1/2  1/2 |          | 0  1 -1 -1 |
 *           | 0 -1  1  0 |        | 1/2 -1/2  1/2 |
 *           | 0  1  0 -1 |        | 0    0    1   |
 *
 * Summed over the C input channels, each of the 16 points xi is one matrix product: M_xi (tiles x
 * K) = V_xi (tiles x C) U_xi (C x K), with V = B^T d B of every tile and channel and U = G g G^T
 * of every filter. Those products run on the forward pass's register tile (rg_conv_panel_product,
 * conv2d_kernels.c), U packed in its panels. The transforms are additions only (and the filter's
 * halvings, once per call), vectorised along channels. Against the direct pass the products
 * do 16/36 of the multiply-adds, plus two transforms whose cost is a few additions per value.
 *
 * The pass fits the forward tiles' seam (conv2d.c, forward_tiles): a chunk's images, padded and
 * channels-last in xpad, in; the chunk's output channels-last in yc, out. Everything after that
 * (the bias, a fused ReLU, a fused pool, the transposition back to NCHW) is the forward's. The
 * tiles go through the products a block at a time (block_tiles), so that the block's V and M stay
 * in L2 while U is streamed past them.
 *
 * Rounding: the transforms add and subtract up to 4 inputs per value twice, so the result differs
 * from the direct pass in the last bits (relative differences of a few 1e-7 of the values' scale,
 * tests/tensor/test_conv2d.c); F(4x4, 3x3) would do 4x fewer products but its transforms carry
 * factors up to 8 and lose about 3 more bits, which is why cuDNN and oneDNN offer both and why
 * this file stops at the smaller one. */
#include "tensor/cpu/conv2d_impl.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR
#define VL RG_CONV_VL
#define XI 16 /* transformed points of a tile: (2 + 3 - 1)^2 */

/* Floats of V and M a block may take (192 KiB: both in a 512 KiB L2 with U's streamed panels) */
#define BLOCK_FLOATS (48 * 1024)

#define WINOGRAD_MAX_CK (256 * 256) /* U of at most 4 MiB */

bool rg_conv_winograd_applies(const rg_conv2d_shape *s) {
    if (!rg_conv_switch_on("RG_CONV_WINOGRAD")) return false;
    /* Channel counts below a vector would leave most of the transforms' lanes empty, and with a
     * reduction of a few channels the products are short: conv2d_direct.c is better there. */
    if (!(s->r == 3 && s->s == 3 && s->stride_h == 1 && s->stride_w == 1 && s->c >= 16 &&
          s->k >= 16 && s->p > 0 && s->q > 0))
        return false;
    /* U, 16 C K floats, is read again by every block of tiles: at 512 x 512 channels (16 MiB,
     * ResNet's last stage, 7x7 planes whose 2x2 tiles also compute 64 outputs for 49) that made
     * the pass 1.45x the direct one's time with blocks of 6 tiles, and no faster than it with
     * blocks of 96 (Zen 3, one thread). */
    return s->c * s->k <= WINOGRAD_MAX_CK;
}

int64_t rg_conv_winograd_weights_len(int64_t c, int64_t k) {
    return XI * c * rg_conv_round_up(k, NR);
}

/* G g G^T of one 3x3 filter g (row-major): u[4i + j]. */
static void filter_transform(const float g[9], float u[XI]) {
    float t[4][3];
    for (int j = 0; j < 3; j++) {
        float g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
        t[0][j] = g0;
        t[1][j] = 0.5f * (g0 + g1 + g2);
        t[2][j] = 0.5f * (g0 - g1 + g2);
        t[3][j] = g2;
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i] = t[i][0];
        u[4 * i + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        u[4 * i + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        u[4 * i + 3] = t[i][2];
    }
}

float *rg_conv_winograd_weights(int64_t kout, int64_t cin, const float *w, bool flipped) {
    int64_t kpad = rg_conv_round_up(kout, NR), per_xi = cin * kpad;
    float *u = rg_conv_scratch(XI * per_xi);
    /* u[xi][panel][c][j] = U_xi[c][panel*NR + j], zero past the last filter */
#pragma omp parallel for schedule(static) if (kpad * cin * XI > RG_CPU_PAR_MIN)
    for (int64_t k = 0; k < kpad; k++) {
        int64_t panel = k / NR, j = k % NR;
        for (int64_t c = 0; c < cin; c++) {
            float g[9], t[XI];
            if (k >= kout) {
                memset(t, 0, sizeof t);
            } else if (!flipped) { /* w (kout, cin, 3, 3) */
                memcpy(g, w + (k * cin + c) * 9, sizeof g);
                filter_transform(g, t);
            } else { /* w (cin, kout, 3, 3), the filter turned by 180 degrees */
                const float *src = w + (c * kout + k) * 9;
                for (int i = 0; i < 9; i++) g[i] = src[8 - i];
                filter_transform(g, t);
            }
            for (int xi = 0; xi < XI; xi++) u[xi * per_xi + (panel * cin + c) * NR + j] = t[xi];
        }
    }
    return u;
}

/* Tiles per block: V (XI x tiles x C) and M (XI x tiles x kpad) within BLOCK_FLOATS, a multiple of
 * MR, at least MR. (Each block reads all of U, XI x C x kpad floats; rg_conv_winograd_applies
 * keeps that within 4 MiB. Blocks of 24 to 96 tiles instead measured no faster on ResNet-18's 64-
 * and 256-channel 3x3 forwards, Zen 3.) */
static int64_t block_tiles(int64_t c, int64_t kpad) {
    int64_t t = BLOCK_FLOATS / (XI * (c + kpad)) / MR * MR;
    return t < MR ? MR : t;
}

int64_t rg_conv_winograd_scratch_len(int64_t c, int64_t kpad) {
    return XI * block_tiles(c, kpad) * (c + kpad) + c + c; /* V, M, a row of zeros, off */
}

/* B^T d B along one vector of channels: the 16 rows p[4r + t] + c of a patch to v[xi * vstride]
 * + c. Written out in full, the values in registers: with loops over small arrays GCC kept the
 * patch on the stack and moved each vector in two halves. */
#define LD(T, q) (*(const T *)(q))
#define ST(T, q, x) (*(T *)(q) = (x))
#define INPUT_ROW(T, p, r, c, e0, e1, e2, e3)                                                      \
    T e0 = LD(T, p[4 * 0 + r] + c) - LD(T, p[4 * 2 + r] + c);                                      \
    T e1 = LD(T, p[4 * 1 + r] + c) + LD(T, p[4 * 2 + r] + c);                                      \
    T e2 = LD(T, p[4 * 2 + r] + c) - LD(T, p[4 * 1 + r] + c);                                      \
    T e3 = LD(T, p[4 * 1 + r] + c) - LD(T, p[4 * 3 + r] + c)
#define INPUT_COLS(T, v, vs, i, a0, a1, a2, a3)                                                    \
    ST(T, v + (4 * i + 0) * vs, a0 - a2), ST(T, v + (4 * i + 1) * vs, a1 + a2),                    \
        ST(T, v + (4 * i + 2) * vs, a2 - a1), ST(T, v + (4 * i + 3) * vs, a1 - a3)
#define INPUT_TRANSFORM(T, p, c, v, vs)                                                            \
    do {                                                                                           \
        /* column t of B^T d: e<row><t> */                                                         \
        INPUT_ROW(T, p, 0, c, e00, e10, e20, e30);                                                 \
        INPUT_ROW(T, p, 1, c, e01, e11, e21, e31);                                                 \
        INPUT_ROW(T, p, 2, c, e02, e12, e22, e32);                                                 \
        INPUT_ROW(T, p, 3, c, e03, e13, e23, e33);                                                 \
        float *v_ = (v) + (c);                                                                     \
        INPUT_COLS(T, v_, vs, 0, e00, e01, e02, e03);                                              \
        INPUT_COLS(T, v_, vs, 1, e10, e11, e12, e13);                                              \
        INPUT_COLS(T, v_, vs, 2, e20, e21, e22, e23);                                              \
        INPUT_COLS(T, v_, vs, 3, e30, e31, e32, e33);                                              \
    } while (0)

/* A^T m A for one vector of output channels: m[xi * ms] to the 2x2 outputs o0 ... o3 (row-major),
 * written out as the input's. */
#define OUTPUT_COL(T, m, ms, t, h0, h1)                                                            \
    T h0 = LD(T, m + (0 + t) * ms) + LD(T, m + (4 + t) * ms) + LD(T, m + (8 + t) * ms);            \
    T h1 = LD(T, m + (4 + t) * ms) - LD(T, m + (8 + t) * ms) - LD(T, m + (12 + t) * ms)
#define OUTPUT_TRANSFORM(T, m, ms, o0, o1, o2, o3)                                                 \
    do {                                                                                           \
        OUTPUT_COL(T, m, ms, 0, h00, h10);                                                         \
        OUTPUT_COL(T, m, ms, 1, h01, h11);                                                         \
        OUTPUT_COL(T, m, ms, 2, h02, h12);                                                         \
        OUTPUT_COL(T, m, ms, 3, h03, h13);                                                         \
        o0 = h00 + h01 + h02, o1 = h01 - h02 - h03;                                                \
        o2 = h10 + h11 + h12, o3 = h11 - h12 - h13;                                                \
    } while (0)

void rg_conv_winograd_chunk(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t images,
                            const float *xpad, const float *u, float *yc, int64_t kpad,
                            float *scratch) {
    const int64_t c = s->c, th = (s->p + 1) / 2, tw = (s->q + 1) / 2, ntiles = images * th * tw;
    const int64_t tb = block_tiles(c, kpad), per_xi = c * kpad;
    /* columns the products compute: K rounded up to a vector (a panel's spare vectors are not
     * computed, as in forward_tiles; the ReLU, pool and transpositions read no further) */
    const int64_t kv = rg_conv_round_up(s->k, VL);
    float *v = scratch, *m = v + XI * tb * c, *zeros = m + XI * tb * kpad;
    int32_t *off = (int32_t *)(zeros + c);
    memset(zeros, 0, (size_t)c * sizeof(float));
    for (int64_t i = 0; i < c; i++) off[i] = (int32_t)i;
    for (int64_t t0 = 0; t0 < ntiles; t0 += tb) {
        int64_t rows = ntiles - t0 < tb ? ntiles - t0 : tb;
        for (int64_t b = 0; b < rows; b++) { /* V = B^T d B, tile by tile */
            int64_t t = t0 + b, img = t / (th * tw), ty = t % (th * tw) / tw, tx = t % tw;
            const float *base = xpad + img * g->xpad_len;
            const float *p[XI];
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++) { /* rows or columns past the padded image read 0 */
                    int64_t h = 2 * ty + r, w = 2 * tx + q;
                    p[4 * r + q] = h < g->hp && w < g->wp ? base + (h * g->wp + w) * c : zeros;
                }
            float *vb = v + b * c;
            const int64_t vs = tb * c;
            int64_t ci = 0;
            for (; ci + VL <= c; ci += VL) INPUT_TRANSFORM(rg_convvec, p, ci, vb, vs);
            for (; ci < c; ci++) INPUT_TRANSFORM(float, p, ci, vb, vs);
        }
        for (int xi = 0; xi < XI; xi++) /* M_xi = V_xi U_xi, its first kv columns */
            for (int64_t n0 = 0; n0 < s->k; n0 += NR)
                rg_conv_panel_product(rg_conv_panel_vectors(s->k, n0), rows, v + xi * tb * c, NULL,
                                      c, off, c, u + xi * per_xi + n0 * c, m + xi * tb * kpad + n0,
                                      kpad, false);
        for (int64_t b = 0; b < rows; b++) { /* Y = A^T M A into the output pixels' rows */
            int64_t t = t0 + b, img = t / (th * tw), ty = t % (th * tw) / tw, tx = t % tw;
            int64_t ph = 2 * ty, qw = 2 * tx;
            float *dst[4];
            for (int a = 0; a < 4; a++) {
                int64_t pp = ph + (a >> 1), qq = qw + (a & 1);
                dst[a] = pp < s->p && qq < s->q ? yc + (img * g->pq + pp * s->q + qq) * kpad : NULL;
            }
            const float *mb = m + b * kpad;
            const int64_t ms = tb * kpad;
            for (int64_t j = 0; j < kv; j += VL) {
                rg_convvec o[4];
                OUTPUT_TRANSFORM(rg_convvec, mb + j, ms, o[0], o[1], o[2], o[3]);
                for (int a = 0; a < 4; a++)
                    if (dst[a]) ST(rg_convvec, dst[a] + j, o[a]);
            }
        }
    }
}
