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
#include <omp.h>

#include "core/alloc.h"
#include "tensor/cpu/conv2d_impl.h"

#define NR RG_CONV_NR
#define MR RG_CONV_MR
#define VL RG_CONV_VL
#define XI 16 /* transformed points of a tile: (2 + 3 - 1)^2 */

/* Floats of V and M a block may take (192 KiB: both in a 512 KiB L2 with U's streamed panels) */
#define BLOCK_FLOATS (48 * 1024)

#define WINOGRAD_MAX_CK (256 * 256) /* U of at most 4 MiB */
#define WINOGRAD_CK_PER_TILE 4096   /* C x K at most this many times an image's 2x2 tiles */

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
    if (s->c * s->k > WINOGRAD_MAX_CK) return false;
    /* Each image's few tiles must also pay for U and, in the filter pass, for each thread's 16 C K
     * partial sums: on ResNet-18's 4x4 planes of 256 channels at 64 px (4 tiles an image) the
     * backward took 22-25 ms by Winograd against 17-20 direct at one thread, 16.5-19 against
     * 11-12.6 at two; at 4x4 with 128 channels (C K = 4096 x 4 tiles) the two were equal, and
     * at 8x8 with 128 channels (16 tiles) and 7x7 with 64 Winograd was ahead (Zen 3,
     * docs/PERFORMANCE.md, thirtieth session). */
    int64_t tiles = ((s->p + 1) / 2) * ((s->q + 1) / 2);
    return s->c * s->k <= WINOGRAD_CK_PER_TILE * tiles;
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

/* V of tile t (numbered over the chunk's images, row by row) into vb[xi * vs + c]: B^T d B of its
 * 4x4 patch of the padded channels-last images in xpad; rows or columns past the padded image
 * read zeros (C floats of 0). */
static void input_tile(const rg_conv2d_shape *s, const rg_conv_geom *g, const float *xpad,
                       int64_t t, const float *zeros, float *vb, int64_t vs) {
    const int64_t c = s->c, th = (s->p + 1) / 2, tw = (s->q + 1) / 2;
    const int64_t img = t / (th * tw), ty = t % (th * tw) / tw, tx = t % tw;
    const float *base = xpad + img * g->xpad_len;
    const float *p[XI];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 4; q++) {
            int64_t h = 2 * ty + r, w = 2 * tx + q;
            p[4 * r + q] = h < g->hp && w < g->wp ? base + (h * g->wp + w) * c : zeros;
        }
    int64_t ci = 0;
    for (; ci + VL <= c; ci += VL) INPUT_TRANSFORM(rg_convvec, p, ci, vb, vs);
    for (; ci < c; ci++) INPUT_TRANSFORM(float, p, ci, vb, vs);
}

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
            input_tile(s, g, xpad, t0 + b, zeros, v + b * c, tb * c);
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

/* ---- the filter pass ----
 *
 * With U = G g G^T and the tile's products M = U .* V, the gradient of g is G^T dU G, and dU, the
 * gradient of U, is summed over every tile of the batch: dU_xi (C x K) = sum_tiles V_xi^T dM_xi,
 * where dM = A dY A^T is the transform of the tile's 2x2 output gradient. Those 16 products
 * reduce over tiles, a long reduction that suits the tile better than the forward's over C; they
 * run on rg_conv_panel_product with a channel per row (rows C floats apart in V, the steps one
 * tile apart) and dM as the panel. Each thread sums its images into its own dU; the threads' sums
 * are added and transformed back at the end. */

/* A dY A^T of one vector of channels: the tile's 2x2 gradients y00 ... y11 to d[xi * ds]. */
#define GRAD_ROW(T, y0, y1, e0, e1, e2, e3) T e0 = y0, e1 = y0 + y1, e2 = y0 - y1, e3 = -(y1)
#define GRAD_TRANSFORM(T, y00, y01, y10, y11, d, ds)                                               \
    do {                                                                                           \
        GRAD_ROW(T, y00, y10, e00, e10, e20, e30); /* A dY, column 0 */                            \
        GRAD_ROW(T, y01, y11, e01, e11, e21, e31); /* column 1 */                                  \
        GRAD_ROW(T, e00, e01, f00, f01, f02, f03); /* (A dY) A^T, row by row */                    \
        GRAD_ROW(T, e10, e11, f10, f11, f12, f13);                                                 \
        GRAD_ROW(T, e20, e21, f20, f21, f22, f23);                                                 \
        GRAD_ROW(T, e30, e31, f30, f31, f32, f33);                                                 \
        ST(T, d + 0 * ds, f00), ST(T, d + 1 * ds, f01), ST(T, d + 2 * ds, f02);                    \
        ST(T, d + 3 * ds, f03), ST(T, d + 4 * ds, f10), ST(T, d + 5 * ds, f11);                    \
        ST(T, d + 6 * ds, f12), ST(T, d + 7 * ds, f13), ST(T, d + 8 * ds, f20);                    \
        ST(T, d + 9 * ds, f21), ST(T, d + 10 * ds, f22), ST(T, d + 11 * ds, f23);                  \
        ST(T, d + 12 * ds, f30), ST(T, d + 13 * ds, f31), ST(T, d + 14 * ds, f32);                 \
        ST(T, d + 15 * ds, f33);                                                                   \
    } while (0)

/* G^T du G of one filter's 16 gradients du[4i + j]: the 3x3 gradient g (row-major). */
static void filter_gradient(const double du[XI], double g[9]) {
    double t[3][4]; /* G^T du */
    for (int j = 0; j < 4; j++) {
        double d0 = du[j], d1 = du[4 + j], d2 = du[8 + j], d3 = du[12 + j];
        t[0][j] = d0 + 0.5f * (d1 + d2);
        t[1][j] = 0.5f * (d1 - d2);
        t[2][j] = 0.5f * (d1 + d2) + d3;
    }
    for (int r = 0; r < 3; r++) {
        g[3 * r] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
        g[3 * r + 1] = 0.5f * (t[r][1] - t[r][2]);
        g[3 * r + 2] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
    }
}

/* Floats of V and dM a block of the filter pass may take: the products' reduction is the block's
 * tiles, so longer blocks amortise each tile call's loads and stores of its accumulators. */
#define FILTER_BLOCK_FLOATS (96 * 1024)

static int64_t filter_block_tiles(int64_t c, int64_t kpad) {
    int64_t t = FILTER_BLOCK_FLOATS / (XI * (c + kpad)) / MR * MR;
    return t < 4 * MR ? 4 * MR : t;
}

/* A thread's share: du (XI, C, K) and the bias sums, in double. */
typedef struct {
    double *du;
    double *db;
} filter_part;

/* The chunk's tiles (images in xpad, channels-last gradients dyc (P*Q, kpad) per image) summed
 * into cdu (XI, C rounded up to MR, kpad), then added to the thread's du in double. Summed in
 * float a chunk at a time, in double across chunks: the sums of a chunk, an image or a few, are
 * the same whatever batch it is part of, so that the gradient of a batch hardly depends on how it
 * is split (micro-batches, ranks, threads): a resumed pipeline run (tests/train/resume.sh) ended
 * 2.1e-5 from its uninterrupted one with float sums across chunks, outside the 1e-5 the direct
 * pass keeps to. */
static void winograd_filter_chunk(const rg_conv2d_shape *s, const rg_conv_geom *g, int64_t images,
                                  const float *xpad, const float *dyc, int64_t kpad, int64_t crow,
                                  float *cdu, double *du, float *v, float *dm, const float *zeros,
                                  const int32_t *toff) {
    const int64_t c = s->c, th = (s->p + 1) / 2, tw = (s->q + 1) / 2, ntiles = images * th * tw;
    const int64_t tb = filter_block_tiles(c, kpad), kv = rg_conv_round_up(s->k, VL);
    for (int64_t t0 = 0; t0 < ntiles; t0 += tb) {
        int64_t rows = ntiles - t0 < tb ? ntiles - t0 : tb;
        for (int64_t b = 0; b < rows; b++) {
            int64_t t = t0 + b, img = t / (th * tw), ty = t % (th * tw) / tw, tx = t % tw;
            input_tile(s, g, xpad, t, zeros, v + b * c, tb * c);
            /* dM, panel-major per point: dm[xi][panel][b][j] */
            const float *y[4];
            for (int a = 0; a < 4; a++) {
                int64_t pp = 2 * ty + (a >> 1), qq = 2 * tx + (a & 1);
                y[a] = pp < s->p && qq < s->q ? dyc + (img * g->pq + pp * s->q + qq) * kpad : zeros;
            }
            const int64_t ds = kpad * tb; /* floats between points */
            for (int64_t j = 0; j < kv; j += VL) {
                float *d = dm + (j / NR) * tb * NR + b * NR + j % NR;
                rg_convvec y00 = LD(rg_convvec, y[0] + j), y01 = LD(rg_convvec, y[1] + j);
                rg_convvec y10 = LD(rg_convvec, y[2] + j), y11 = LD(rg_convvec, y[3] + j);
                GRAD_TRANSFORM(rg_convvec, y00, y01, y10, y11, d, ds);
            }
        }
        for (int xi = 0; xi < XI; xi++) { /* dU_xi += V_xi^T dM_xi */
            for (int64_t n0 = 0; n0 < s->k; n0 += NR)
                rg_conv_panel_product(rg_conv_panel_vectors(s->k, n0), c, v + xi * tb * c, NULL, 1,
                                      toff, rows, dm + xi * kpad * tb + n0 * tb,
                                      cdu + xi * crow * kpad + n0, kpad, t0 > 0);
            if (t0 + tb < ntiles) continue;
            /* the chunk's last block: point xi's sums, still in cache, added to du in double
             * (after all 16 points, cdu (XI * C * K floats, 4 MB at 256 x 256) came back from L3:
             * a fifth of the time of ResNet-18's stage-3 filter pass, docs/PERFORMANCE.md) */
            for (int64_t ci = 0; ci < c; ci++) {
                const float *src = cdu + (xi * crow + ci) * kpad;
                double *dst = du + (xi * c + ci) * s->k;
                for (int64_t k = 0; k < s->k; k++) dst[k] += src[k];
            }
        }
    }
}

void rg_conv_winograd_filter(const rg_conv2d_shape *s, const float *x, const float *dy, float beta,
                             float *dw, float *db) {
    const rg_conv_geom g = rg_conv_geom_of(s);
    rg_conv_chunks ch = rg_conv_chunks_new(s, &g);
    const int64_t c = s->c, kpad = rg_conv_round_up(s->k, NR), crow = rg_conv_round_up(c, MR);
    const int64_t tb = filter_block_tiles(c, kpad), chw = c * s->h * s->w, kpq = s->k * g.pq;
    const int64_t dun = XI * c * s->k, cdun = XI * crow * kpad, xn = ch.images * g.xpad_len,
                  dyn = ch.images * g.pq * kpad;
    const int64_t vn = XI * tb * c, dmn = XI * tb * kpad;
    int nthreads = ch.count > 1 ? omp_get_max_threads() : 1;
    filter_part *part = rg_xcalloc((size_t)nthreads, sizeof *part, "conv2d: per-thread partials");
    int32_t *toff = (int32_t *)rg_conv_scratch(tb);
    for (int64_t t = 0; t < tb; t++) toff[t] = (int32_t)(t * c);
#pragma omp parallel num_threads(nthreads)
    {
        filter_part *mine = &part[omp_get_thread_num()];
        float *xpad = rg_conv_scratch(xn), *dyc = rg_conv_scratch(dyn), *v = rg_conv_scratch(vn);
        float *dm = rg_conv_scratch(dmn), *sums = rg_conv_scratch(kpad);
        float *zeros = rg_conv_scratch(kpad > c ? kpad : c), *cdu = rg_conv_scratch(cdun);
        memset(zeros, 0, (size_t)(kpad > c ? kpad : c) * sizeof(float));
        memset(dyc, 0, (size_t)dyn * sizeof(float)); /* columns past K stay zero */
        mine->du = rg_xcalloc((size_t)dun, sizeof(double), "conv2d: filter-gradient partials");
        mine->db = rg_xcalloc((size_t)s->k + 1, sizeof(double), "conv2d: bias-gradient partials");
        /* static: which images a thread sums depends on the thread count only (conv2d_backward.c)
         */
#pragma omp for schedule(static)
        for (int64_t ci = 0; ci < ch.count; ci++) {
            int64_t n0 = ci * ch.images, images = s->n - n0 < ch.images ? s->n - n0 : ch.images;
            for (int64_t i = 0; i < images; i++) {
                rg_conv_to_padded_nhwc(s, &g, x + (n0 + i) * chw, xpad + i * g.xpad_len);
                memset(sums, 0, (size_t)s->k * sizeof(float));
                rg_conv_transpose_sum(s->k, g.pq, dy + (n0 + i) * kpq, NULL, g.pq,
                                      dyc + i * g.pq * kpad, kpad, sums);
                for (int64_t k = 0; k < s->k; k++) mine->db[k] += sums[k];
            }
            winograd_filter_chunk(s, &g, images, xpad, dyc, kpad, crow, cdu, mine->du, v, dm, zeros,
                                  toff);
        }
        /* the implicit barrier above: every partial is complete; input channels shared out. For
         * one channel ci, filter k's 16 sums lie in 16 rows (xi, ci) of K doubles, read in order
         * as k runs; with k outer (filters shared out) each read jumped K doubles and missed the
         * cache, 8 MB of partials at 256 x 256 channels: a tenth of ResNet-18's stage-3 filter
         * pass (docs/PERFORMANCE.md). The same sums in the same order either way. */
#pragma omp for schedule(static)
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t k = 0; k < s->k; k++) {
                double du[XI], gk[9];
                for (int xi = 0; xi < XI; xi++) {
                    int64_t at = (xi * c + ci) * s->k + k;
                    double sum = part[0].du[at];
                    for (int t = 1; t < nthreads; t++)
                        if (part[t].du) sum += part[t].du[at];
                    du[xi] = sum;
                }
                filter_gradient(du, gk);
                float *out = dw + (k * c + ci) * 9;
                for (int i = 0; i < 9; i++)
                    out[i] = (float)gk[i] + (beta == 0.0f ? 0.0f : beta * out[i]);
            }
        if (db) {
#pragma omp for schedule(static)
            for (int64_t k = 0; k < s->k; k++) {
                double sum = 0.0;
                for (int t = 0; t < nthreads; t++) sum += part[t].db ? part[t].db[k] : 0.0;
                db[k] = (float)sum + (beta == 0.0f ? 0.0f : beta * db[k]);
            }
        }
        rg_conv_scratch_free(cdu, cdun);
        rg_conv_scratch_free(zeros, kpad > c ? kpad : c);
        rg_conv_scratch_free(sums, kpad);
        rg_conv_scratch_free(dm, dmn);
        rg_conv_scratch_free(v, vn);
        rg_conv_scratch_free(dyc, dyn);
        rg_conv_scratch_free(xpad, xn);
    }
    for (int t = 0; t < nthreads; t++) {
        free(part[t].du);
        free(part[t].db);
    }
    free(part);
    rg_conv_scratch_free((float *)toff, tb);
    rg_conv_chunks_free(&ch);
}
