/* Tests for conv2d: forward and both backward passes against naive direct loops on many shapes
 * (odd sizes, strides 1 and 2, paddings 0/1/3, one and many channels, non-square inputs and
 * kernels, batches of one and more, with and without bias), central-difference gradient checks,
 * accumulation into existing gradients, independence from the thread count, and misuse. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rgtest.h"

typedef struct {
    int64_t n, c, h, w, k, r, s;
    int stride, pad;
    bool bias;
} conv_case;

/* Chosen to reach every path of the CPU kernels: channel counts below, at and above the vector
 * length (scalar and vector col2im), K across several tile panels, reductions longer than one
 * block, tiles cut short by the image, chunks of several images. */
static const conv_case cases[] = {
    {1, 1, 5, 5, 1, 3, 3, 1, 0, true},
    {2, 3, 7, 9, 5, 3, 3, 1, 1, true},
    {3, 1, 28, 28, 32, 3, 3, 1, 0, true}, /* the CNN's conv1 */
    {2, 1, 19, 20, 5, 3, 3, 1, 0, true},  /* one channel, K not a multiple of the tile's rows */
    {2, 32, 26, 26, 64, 3, 3, 1, 0, true},
    {2, 16, 11, 13, 20, 3, 3, 2, 1, false},
    {1, 3, 17, 15, 8, 7, 7, 2, 3, true},
    {2, 17, 9, 6, 70, 1, 1, 2, 0, false},
    {1, 5, 6, 8, 3, 3, 5, 1, 1, true},
    {4, 2, 4, 4, 7, 4, 4, 2, 3, true},
    {1, 64, 7, 7, 130, 3, 3, 1, 1, true},
    {2, 48, 5, 5, 16, 3, 3, 1, 1, false},
    {3, 8, 10, 3, 9, 3, 1, 2, 1, true},
    {7, 8, 3, 5, 33, 3, 3, 2, 1, true}, /* several images per chunk, a short last chunk */
    {2, 20, 6, 7, 9, 1, 1, 1, 1, true},
    {1, 4, 9, 8, 6, 1, 1, 3, 2, true},      /* 1x1 with padding */
    {2, 16, 5, 4, 300, 3, 3, 1, 1, true},   /* backward data reduces over K in several blocks */
    {6, 32, 14, 14, 64, 3, 3, 2, 1, false}, /* ResNet-20's stride-2 3x3 and 1x1 on 14x14 */
    {24, 32, 14, 14, 64, 1, 1, 2, 0, false},
    {48, 32, 14, 14, 64, 3, 3, 2, 1, false},
    {6, 16, 28, 28, 32, 3, 3, 2, 1, false},
    /* 1x1 without padding: OpenBLAS products (conv2d_gemm.c), on blocks of images side by side
     * where an image has fewer than 128 output pixels (tensor/cpu/conv2d_gemm.c) */
    {2, 24, 10, 12, 40, 1, 1, 1, 0, true},
    {1, 16, 11, 10, 33, 1, 1, 1, 0, true}, /* one image: the product itself shared by threads */
    {3, 20, 7, 7, 36, 1, 1, 1, 0, false},  /* 7x7: all three images in one product */
    {2, 8, 23, 21, 12, 1, 1, 2, 0, true},  /* strided: the pixels read gathered, dx scattered */
    {2, 5, 32, 31, 7, 1, 1, 3, 0, true},   /* stride 3: input rows and columns no window reads */
    {2, 6, 16, 17, 20, 1, 1, 1, 0, true},  /* straight from x and dy, no copies */
    {5, 4, 9, 9, 18, 1, 1, 1, 0, true},    /* blocks of 4 images, the last short */
    {22, 3, 7, 7, 5, 1, 1, 1, 0, true},    /* forward: blocks of 21, 1; filter: of 6, 4 last */
    /* ... and products large enough for the AVX-512 copy's register tile (gemm_tile.c), which
     * takes them unless OpenBLAS runs AVX-512 kernels (RG_CONV_BLAS, below) */
    {2, 64, 24, 24, 72, 1, 1, 1, 0, true},  /* one image a product, in place */
    {2, 48, 30, 30, 70, 1, 1, 2, 0, false}, /* strided: gathered, dx scattered */
    {12, 40, 7, 7, 96, 1, 1, 1, 0, true},   /* 7x7: the batch in one block */
    /* small planes and C*R*S >= 2048: the filter pass through im2col and a product */
    {2, 240, 8, 8, 20, 3, 3, 2, 1, true}, /* stride 2, 4x4 outputs */
    {3, 230, 7, 7, 17, 3, 3, 1, 1, true}, /* 7x7 outputs, padding */
    /* stride 1, output the input's size, C a multiple of every ISA's tile width: the data pass
     * as a forward pass with flipped filters (tensor/cpu/conv2d.c) */
    {2, 64, 9, 6, 20, 5, 5, 1, 2, true},
    /* 1x1, at least 256 channels on small planes: in the AVX-512 copy the forward runs on the
     * register tile over the batch's columns (tensor/cpu/conv2d_gemm.c), panels straddling images
     */
    {3, 512, 9, 9, 13, 1, 1, 1, 0, true}, /* 243 columns: a short last panel, K not a tile's rows */
    {1, 512, 16, 16, 20, 1, 1, 1, 0, true}, /* 256 pixels: whole panels in one image */
    {2, 520, 11, 9, 7, 1, 1, 2, 0, false},  /* strided: 6x5 outputs gathered into the panels */
    {2, 256, 10, 10, 9, 1, 1, 2, 0, true},  /* strided, C at the threshold: 5x5 outputs */
    /* ... and the stride-1 data pass, when it reduces over at least 256 filters */
    {3, 20, 9, 9, 512, 1, 1, 1, 0, true}, /* 243 columns, C not a tile's rows */
    {2, 7, 7, 7, 520, 1, 1, 1, 0, false}, /* 7x7 planes: both images in one panel */
    /* ... and the stride-1 filter pass on 128-256 pixel planes, the batch's 576 columns at once */
    {4, 70, 12, 12, 9, 1, 1, 1, 0, true}, /* a short second panel of channels, K not a tile's */
    /* 3x3, stride 1, at least 16 channels in and out: Winograd's F(2x2, 3x3) in forward and in the
     * data pass (tensor/cpu/conv2d_winograd.c); cases 4, 10, 11, 16 and 30 too */
    {2, 16, 9, 8, 24, 3, 3, 1, 0, true},  /* unpadded, odd 7x6 output: the data pass widens it */
    {1, 20, 6, 5, 17, 3, 3, 1, 1, false}, /* channels past the last vector, K past a panel */
    {3, 16, 4, 4, 16, 3, 3, 1, 2, true},  /* padding 2, more than half the kernel */
    /* stride 1, no padding, C*R*S <= 9, rows at least a vector wide: the forward by output rows
     * (tensor/cpu/conv2d_direct.c); cases 2 and 3 too */
    {2, 2, 9, 20, 7, 2, 2, 1, 0, false}, /* 4 taps; 19-pixel rows: a last vector overlapping */
    {1, 1, 20, 18, 9, 3, 3, 1, 0, true}, /* 16-pixel rows: whole vectors in every copy */
    {2, 3, 6, 34, 6, 3, 1, 1, 0, true},  /* 9 taps over 3 channels */
};
#define NCASES (sizeof cases / sizeof cases[0])

static rg_conv2d_shape shape_of(const conv_case *t) {
    rg_conv2d_shape s = {.n = t->n,
                         .c = t->c,
                         .h = t->h,
                         .w = t->w,
                         .k = t->k,
                         .r = t->r,
                         .s = t->s,
                         .stride_h = t->stride,
                         .stride_w = t->stride,
                         .pad_h = t->pad,
                         .pad_w = t->pad};
    s.p = (s.h + 2 * t->pad - s.r) / t->stride + 1;
    s.q = (s.w + 2 * t->pad - s.s) / t->stride + 1;
    return s;
}

/* Input row h, column w read by output (p, q) through tap (r, t); false if it is padding. */
static bool tap(const rg_conv2d_shape *s, int64_t p, int64_t q, int64_t r, int64_t t, int64_t *h,
                int64_t *w) {
    *h = p * s->stride_h - s->pad_h + r, *w = q * s->stride_w - s->pad_w + t;
    return *h >= 0 && *h < s->h && *w >= 0 && *w < s->w;
}

#define FOR_ALL_TAPS(s)                                                                            \
    for (int64_t n = 0; n < s->n; n++)                                                             \
        for (int64_t k = 0; k < s->k; k++)                                                         \
            for (int64_t p = 0; p < s->p; p++)                                                     \
                for (int64_t q = 0; q < s->q; q++)                                                 \
                    for (int64_t c = 0; c < s->c; c++)                                             \
                        for (int64_t r = 0; r < s->r; r++)                                         \
                            for (int64_t t = 0, h, w; t < s->s; t++)                               \
                                if (tap(s, p, q, r, t, &h, &w))

#define X_AT(s, x, n, c, h, w) x[(((n)*s->c + (c)) * s->h + (h)) * s->w + (w)]
#define W_AT(s, wt, k, c, r, t) wt[(((k)*s->c + (c)) * s->r + (r)) * s->s + (t)]
#define Y_AT(s, y, n, k, p, q) y[(((n)*s->k + (k)) * s->p + (p)) * s->q + (q)]

/* The naive loops accumulate in double. Each result array holds 2n values: the n results, then
 * the n sums of |term| that bound float rounding (a dot product of m terms rounds by about
 * sqrt(m) eps sum|term|, and cancellation can make that large next to the result). */
#define ADD(arr, n, i, term) ((arr)[i] += (term), (arr)[(n) + (i)] += fabs(term))

static void naive_forward(const rg_conv2d_shape *s, const float *x, const float *wt, const float *b,
                          double *y) {
    int64_t ny = s->n * s->k * s->p * s->q;
    for (int64_t i = 0; i < ny; i++) y[i] = y[ny + i] = b ? b[(i / (s->p * s->q)) % s->k] : 0.0;
    for (int64_t i = 0; i < ny; i++) y[ny + i] = fabs(y[ny + i]);
    FOR_ALL_TAPS(s) {
        int64_t i = &Y_AT(s, y, n, k, p, q) - y;
        ADD(y, ny, i, (double)X_AT(s, x, n, c, h, w) * W_AT(s, wt, k, c, r, t));
    }
}

static void naive_backward(const rg_conv2d_shape *s, const float *x, const float *wt,
                           const float *dy, double *dx, double *dw, double *db) {
    int64_t nx = s->n * s->c * s->h * s->w, nw = s->k * s->c * s->r * s->s;
    memset(dx, 0, (size_t)(2 * nx) * sizeof(double));
    memset(dw, 0, (size_t)(2 * nw) * sizeof(double));
    memset(db, 0, (size_t)(2 * s->k) * sizeof(double));
    for (int64_t i = 0; i < s->n * s->k * s->p * s->q; i++)
        ADD(db, s->k, (i / (s->p * s->q)) % s->k, dy[i]);
    FOR_ALL_TAPS(s) {
        double g = Y_AT(s, dy, n, k, p, q);
        ADD(dx, nx, &X_AT(s, dx, n, c, h, w) - dx, g * W_AT(s, wt, k, c, r, t));
        ADD(dw, nw, &W_AT(s, dw, k, c, r, t) - dw, g * X_AT(s, x, n, c, h, w));
    }
}

/* |got - want| <= 1e-6 + 1e-5 sum|term| for each of the n results in want (see ADD). */
static void assert_close_d(const float *got, const double *want, int64_t n, const char *what,
                           int which) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 + 1e-5 * want[n + i]))
            cr_assert_fail("case %d, %s: element %lld of %lld: got %.8g, want %.8g", which, what,
                           (long long)i, (long long)n, (double)got[i], want[i]);
}

typedef struct {
    rg_tensor *x, *w, *b;
} conv_inputs;

static conv_inputs make_inputs(const conv_case *t, uint64_t seed, bool params) {
    rg_tensor *(*mk)(int, const int64_t *, float, float, uint64_t) =
        params ? rgt_param : rgt_uniform;
    conv_inputs in = {mk(RG_SHAPE(t->n, t->c, t->h, t->w), -1, 1, seed),
                      mk(RG_SHAPE(t->k, t->c, t->r, t->s), -1, 1, seed + 1),
                      t->bias ? mk(RG_SHAPE(t->k), -1, 1, seed + 2) : NULL};
    return in;
}

static void free_inputs(conv_inputs *in) {
    rgt_free_all(3, (rg_tensor *[]){in->x, in->w, in->b});
}

static void check_forward(size_t ci) {
    {
        const conv_case *t = &cases[ci];
        rg_conv2d_shape s = shape_of(t);
        conv_inputs in = make_inputs(t, 10 * ci, false);
        int64_t ny = s.n * s.k * s.p * s.q;
        double *want = malloc((size_t)(2 * ny) * sizeof(double));
        naive_forward(&s, rg_tensor_f32(in.x), rg_tensor_f32(in.w),
                      in.b ? rg_tensor_f32(in.b) : NULL, want);
        rg_scope_begin();
        rg_tensor *y = rg_conv2d(in.x, in.w, in.b, t->stride, t->pad);
        cr_assert(y->ndim == 4 && y->shape[0] == s.n && y->shape[1] == s.k && y->shape[2] == s.p &&
                      y->shape[3] == s.q,
                  "case %zu: output shape", ci);
        assert_close_d(rg_tensor_f32(y), want, ny, "forward", (int)ci);
        rg_scope_end();
        free(want);
        free_inputs(&in);
    }
}

Test(tensor_conv2d, forward_matches_naive_loops) {
    for (size_t ci = 0; ci < NCASES; ci++) check_forward(ci);
}

/* Runs backward of sum(conv(x, w, b) * dy) and compares x, w and b's gradients with the loops. */
static void check_backward(const conv_case *t, int ci) {
    rg_conv2d_shape s = shape_of(t);
    conv_inputs in = make_inputs(t, 100 + 10 * (uint64_t)ci, true);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(s.n, s.k, s.p, s.q), -1, 1, 1000 + (uint64_t)ci);
    int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * s.r * s.s;
    double *dx = malloc((size_t)(2 * nx) * sizeof(double));
    double *dw = malloc((size_t)(2 * nw) * sizeof(double)),
           *db = malloc((size_t)(2 * s.k) * sizeof(double));
    naive_backward(&s, rg_tensor_f32(in.x), rg_tensor_f32(in.w), rg_tensor_f32(dy), dx, dw, db);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(rg_conv2d(in.x, in.w, in.b, t->stride, t->pad), dy)));
    assert_close_d(rg_tensor_f32(in.x->grad), dx, nx, "dx", ci);
    assert_close_d(rg_tensor_f32(in.w->grad), dw, nw, "dw", ci);
    if (in.b) assert_close_d(rg_tensor_f32(in.b->grad), db, s.k, "dbias", ci);
    rg_scope_end();
    free(dx), free(dw), free(db);
    rg_tensor_free(dy);
    free_inputs(&in);
}

Test(tensor_conv2d, backward_matches_naive_loops) {
    for (size_t ci = 0; ci < NCASES; ci++) check_backward(&cases[ci], (int)ci);
}

/* RG_CONV_GEMM=0 sends the shapes of conv2d_gemm.c back to the tiles, which must stay right. */
Test(tensor_conv2d, with_rg_conv_gemm_0_the_tiles_match_naive_loops_too) {
    setenv("RG_CONV_GEMM", "0", 1);
    for (int threads = 1; threads <= 2; threads++) {
        rg_set_num_threads(threads);
        for (size_t ci = 0; ci < NCASES; ci++)
            if ((cases[ci].r == 1 && cases[ci].s == 1) ||
                cases[ci].c * cases[ci].r * cases[ci].s >= 2048)
                check_backward(&cases[ci], (int)ci);
    }
    rg_set_num_threads(1);
    unsetenv("RG_CONV_GEMM");
}

/* RG_CONV_BLAS=1 runs conv2d_gemm.c's products on OpenBLAS, RG_CONV_BLAS=0 on ringgrad's own
 * tile (AVX-512; the other copies always use OpenBLAS); by default the tile runs them unless
 * OpenBLAS has AVX-512 kernels. Both must be right whichever this machine picks. Only the cases
 * whose products the tile may take (at least 2^18 multiply-adds in all, gemm_tile.c's
 * TILE_MIN_MACS; a pass may join its images in one product): OpenBLAS runs the smaller ones
 * either way. */
Test(tensor_conv2d, with_rg_conv_blas_0_or_1_the_products_match_naive_loops_too) {
    size_t checked = 0;
    for (int blas = 0; blas <= 1; blas++) {
        setenv("RG_CONV_BLAS", blas ? "1" : "0", 1);
        for (int threads = 1; threads <= 2; threads++) {
            rg_set_num_threads(threads);
            for (size_t ci = 0; ci < NCASES; ci++) {
                const conv_case *t = &cases[ci];
                rg_conv2d_shape s = shape_of(t);
                bool products =
                    (t->r == 1 && t->s == 1 && t->pad == 0) || t->c * t->r * t->s >= 2048;
                if (!products || (double)s.n * s.c * s.k * s.r * s.s * s.p * s.q < (1 << 18))
                    continue;
                check_forward(ci);
                check_backward(t, (int)ci);
                checked++;
            }
        }
    }
    rg_set_num_threads(1);
    unsetenv("RG_CONV_BLAS");
    cr_assert(checked >= 4 * 5, "the table has %zu such cases", checked / 4);
}

/* RG_CONV_DATA_AS_FORWARD=0 sends the data pass of stride-1 "same" shapes back to the tiles'
 * product and col2im, which must stay right. */
Test(tensor_conv2d, with_rg_conv_data_as_forward_0_col2im_matches_naive_loops_too) {
    setenv("RG_CONV_DATA_AS_FORWARD", "0", 1);
    for (int threads = 1; threads <= 2; threads++) {
        rg_set_num_threads(threads);
        for (size_t ci = 0; ci < NCASES; ci++)
            if (cases[ci].stride == 1 && 2 * cases[ci].pad + 1 == cases[ci].r &&
                cases[ci].r == cases[ci].s && cases[ci].r > 1)
                check_backward(&cases[ci], (int)ci);
    }
    rg_set_num_threads(1);
    unsetenv("RG_CONV_DATA_AS_FORWARD");
}

/* RG_CONV_WINOGRAD=0 sends Winograd's shapes back to the direct tiles, which must stay right. */
Test(tensor_conv2d, with_rg_conv_winograd_0_the_direct_tiles_match_naive_loops_too) {
    setenv("RG_CONV_WINOGRAD", "0", 1);
    size_t checked = 0;
    for (size_t ci = 0; ci < NCASES; ci++)
        if (cases[ci].r == 3 && cases[ci].s == 3 && cases[ci].stride == 1 && cases[ci].c >= 16 &&
            cases[ci].k >= 16) {
            check_forward(ci);
            check_backward(&cases[ci], (int)ci);
            checked++;
        }
    cr_assert(checked >= 6, "the table has %zu Winograd shapes", checked);
    unsetenv("RG_CONV_WINOGRAD");
}

/* The shapes that run by output rows (conv2d_direct.c) in every copy (vectors of 4, 8 or 16
 * floats). */
static bool takes_rows(const conv_case *t) {
    return t->c * t->r * t->s <= 9 && t->stride == 1 && t->pad == 0 && t->w - t->s + 1 >= 16;
}

static rg_tensor *conv_or_conv_relu(const conv_case *t, const conv_inputs *in, bool relu) {
    return relu ? rg_conv2d_relu(in->x, in->w, in->b, t->stride, t->pad)
                : rg_conv2d(in->x, in->w, in->b, t->stride, t->pad);
}

static void forward_bits(const conv_case *t, const conv_inputs *in, bool relu, float *y) {
    rg_scope_begin();
    rg_tensor_copy_to_host(conv_or_conv_relu(t, in, relu), y);
    rg_scope_end();
}

/* Two sums of the same products in the same order: the same bits where the compiler contracts
 * a * b + c into a fused multiply-add everywhere, as it does when optimising. Unoptimised (a
 * Debug build) GCC contracts nothing in C, while the intrinsics' FMAs still round once, so the
 * two may differ in the last bit there. */
static bool same_sum(float a, float b) {
#if defined(__OPTIMIZE__)
    return memcmp(&a, &b, sizeof a) == 0;
#else
    return fabsf(a - b) <= 1e-6f * (1.0f + fabsf(a));
#endif
}

/* The forward by output rows against the panels it replaced (RG_CONV_DIRECT_ROWS=0): the same
 * sums in the same order, so the same bits, with and without the fused ReLU, at 1 and 2 threads. */
Test(tensor_conv2d, forward_by_rows_equals_the_panels_bit_for_bit) {
    size_t checked = 0;
    for (size_t ci = 0; ci < NCASES; ci++) {
        const conv_case *t = &cases[ci];
        if (!takes_rows(t)) continue;
        rg_conv2d_shape s = shape_of(t);
        conv_inputs in = make_inputs(t, 500 + 10 * (uint64_t)ci, false);
        int64_t ny = s.n * s.k * s.p * s.q;
        float *rows = malloc((size_t)ny * sizeof(float)),
              *panels = malloc((size_t)ny * sizeof(float));
        for (int threads = 1; threads <= 2; threads++) {
            rg_set_num_threads(threads);
            for (int relu = 0; relu <= 1; relu++) {
                forward_bits(t, &in, relu, rows);
                setenv("RG_CONV_DIRECT_ROWS", "0", 1);
                forward_bits(t, &in, relu, panels);
                unsetenv("RG_CONV_DIRECT_ROWS");
                for (int64_t j = 0; j < ny; j++)
                    if (!same_sum(rows[j], panels[j]))
                        cr_assert_fail("case %zu, relu %d, %d threads: element %lld: rows %.9g, "
                                       "panels %.9g",
                                       ci, relu, threads, (long long)j, (double)rows[j],
                                       (double)panels[j]);
            }
        }
        rg_set_num_threads(1);
        free(rows), free(panels);
        free_inputs(&in);
        checked++;
    }
    cr_assert(checked >= 4, "the table has %zu shapes for the rows", checked);
}

/* The filter pass by rows sums each image apart and adds the images in order: dw and db the same
 * bits at 1 and 2 threads, with and without the fused ReLU's mask; with RG_CONV_DIRECT_ROWS=0 those
 * shapes take the tiles again, which must stay right too. */
static void filter_grads(const conv_case *t, const conv_inputs *in, const rg_tensor *dy, bool relu,
                         float *dw, float *db) {
    rg_zero_grad(in->w);
    if (in->b) rg_zero_grad(in->b);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(conv_or_conv_relu(t, in, relu), (rg_tensor *)dy)));
    rg_tensor_copy_to_host(in->w->grad, dw);
    if (in->b) rg_tensor_copy_to_host(in->b->grad, db);
    rg_scope_end();
}

static void check_rows_filter(const conv_case *t, int ci) {
    rg_conv2d_shape s = shape_of(t);
    conv_inputs in = make_inputs(t, 700 + 10 * (uint64_t)ci, true);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(s.n, s.k, s.p, s.q), -1, 1, 7000 + (uint64_t)ci);
    int64_t nw = s.k * s.c * s.r * s.s, n = nw + s.k;
    float *one = calloc((size_t)n, sizeof(float)), *two = calloc((size_t)n, sizeof(float));
    for (int relu = 0; relu <= 1; relu++) {
        rg_set_num_threads(1);
        filter_grads(t, &in, dy, relu, one, one + nw);
        rg_set_num_threads(2);
        filter_grads(t, &in, dy, relu, two, two + nw);
        rg_set_num_threads(1);
        cr_assert(memcmp(one, two, (size_t)n * sizeof(float)) == 0,
                  "case %d, relu %d: dw or db changed with the thread count", ci, relu);
    }
    free(one), free(two);
    rg_tensor_free(dy);
    free_inputs(&in);
    setenv("RG_CONV_DIRECT_ROWS", "0", 1);
    check_backward(t, ci);
    unsetenv("RG_CONV_DIRECT_ROWS");
}

Test(tensor_conv2d, filter_pass_by_rows_does_not_depend_on_the_thread_count) {
    size_t checked = 0;
    for (size_t ci = 0; ci < NCASES; ci++)
        if (takes_rows(&cases[ci])) check_rows_filter(&cases[ci], (int)ci), checked++;
    cr_assert(checked >= 4, "the table has %zu shapes for the rows", checked);
    /* more images than the pass keeps apart at a time (256): two blocks of sums */
    const conv_case many = {300, 1, 18, 18, 3, 3, 3, 1, 0, true};
    cr_assert(takes_rows(&many));
    check_rows_filter(&many, 99);
    check_backward(&many, 99);
}

Test(tensor_conv2d, results_do_not_depend_on_the_thread_count) {
    rg_set_num_threads(2); /* per-thread partial sums of dw, images split between threads */
    for (size_t ci = 0; ci < NCASES; ci++) check_backward(&cases[ci], (int)ci);
    rg_set_num_threads(1);
}

static rg_tensor *f_conv(rg_tensor *const *in, void *ctx) {
    const conv_case *t = ctx;
    return rg_conv2d(in[0], in[1], t->bias ? in[2] : NULL, t->stride, t->pad);
}

Test(tensor_conv2d, gradients_match_finite_differences) {
    static const conv_case small[] = {
        {2, 3, 6, 5, 4, 3, 3, 1, 1, true},   /* padding 1, non-square */
        {1, 2, 7, 7, 3, 3, 3, 2, 0, true},   /* stride 2 */
        {2, 1, 5, 6, 2, 3, 3, 1, 0, false},  /* one channel, no bias */
        {1, 17, 4, 5, 18, 2, 3, 2, 3, true}, /* padding 3, vector-width channels */
        {2, 3, 10, 10, 4, 1, 1, 1, 0, true}, /* 1x1 as products */
        {1, 2, 20, 21, 3, 1, 1, 2, 0, true}, /* 1x1 strided, as products */
        {1, 228, 4, 4, 2, 3, 3, 2, 1, true}, /* the filter pass through im2col */
        /* Winograd, all three passes. K = 17: the checks step through w 38 elements apart, not
         * a multiple of 9 that would test one tap of every filter only */
        {1, 16, 5, 4, 17, 3, 3, 1, 1, true},
        {1, 16, 6, 5, 17, 3, 3, 1, 0, false}, /* unpadded: the data pass widened */
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        conv_inputs in = make_inputs(&small[i], 500 + 10 * i, true);
        rgt_assert_gradcheck(f_conv, (void *)&small[i], small[i].bias ? 3 : 2,
                             (rg_tensor *[]){in.x, in.w, in.b}, NULL);
        free_inputs(&in);
    }
}

/* ---- the fused ReLU (rg_conv2d_relu) ---- */

/* Runs y = op(x, w, b), then backward of sum(y * dy); copies y and the gradients of x, w, b (those
 * that exist) into out[0..3], each malloc'ed. */
static void run_conv_relu(const conv_case *t, const conv_inputs *in, const rg_tensor *dy,
                          bool fused, float *out[4]) {
    rg_tensor *ps[3] = {in->x, in->w, in->b};
    for (int i = 0; i < 3; i++)
        if (ps[i]) rg_zero_grad(ps[i]);
    rg_scope_begin();
    rg_tensor *y = fused ? rg_conv2d_relu(in->x, in->w, in->b, t->stride, t->pad)
                         : rg_relu(rg_conv2d(in->x, in->w, in->b, t->stride, t->pad));
    rg_backward(rg_sum(rg_mul(y, (rg_tensor *)dy)));
    out[0] = malloc(rg_tensor_nbytes(y));
    rg_tensor_copy_to_host(y, out[0]);
    for (int i = 0; i < 3; i++) {
        out[1 + i] = NULL;
        if (!ps[i] || !ps[i]->grad) continue;
        out[1 + i] = malloc(rg_tensor_nbytes(ps[i]->grad));
        rg_tensor_copy_to_host(ps[i]->grad, out[1 + i]);
    }
    rg_scope_end();
}

/* y, dx, dw and dbias of a fused op (got) and of the ops it fuses (want), n[i] floats each (NULL
 * where the input has no gradient), equal bit for bit; frees all eight. */
static void assert_same_bits(float *got[4], float *want[4], const int64_t n[4], const char *label) {
    const char *what[4] = {"y", "dx", "dw", "dbias"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(got[i] == NULL, want[i] == NULL, "%s: %s", label, what[i]);
        for (int64_t j = 0; got[i] && j < n[i]; j++)
            if (memcmp(&got[i][j], &want[i][j], sizeof(float)) != 0)
                cr_assert_fail("%s, %s: element %lld: fused %.9g, unfused %.9g", label, what[i],
                               (long long)j, (double)got[i][j], (double)want[i][j]);
        free(got[i]), free(want[i]);
    }
}

/* rg_conv2d_relu against rg_relu(rg_conv2d(...)): the output and every gradient bit for bit. With
 * weight_grad false the bias gradient takes the op's other path (a masked dy of its own). */
static void check_fused_relu(const conv_case *t, int ci, bool weight_grad) {
    rg_conv2d_shape s = shape_of(t);
    conv_inputs in = make_inputs(t, 300 + 10 * (uint64_t)ci, true);
    rg_tensor_set_requires_grad(in.w, weight_grad);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(s.n, s.k, s.p, s.q), -1, 1, 3000 + (uint64_t)ci);
    float *want[4], *got[4];
    run_conv_relu(t, &in, dy, false, want);
    run_conv_relu(t, &in, dy, true, got);
    int64_t n[4] = {dy->numel, in.x->numel, in.w->numel, in.b ? in.b->numel : 0};
    int zeros = 0;
    for (int64_t i = 0; i < n[0]; i++) zeros += want[0][i] == 0.0f;
    cr_assert(zeros > 0 && zeros < n[0], "case %d: the ReLU should cut some outputs, not all", ci);
    char label[96];
    snprintf(label, sizeof label, "case %d (weight grad %d)", ci, weight_grad);
    assert_same_bits(got, want, n, label);
    rg_tensor_free(dy);
    free_inputs(&in);
}

Test(tensor_conv2d, fused_relu_equals_relu_of_conv_bit_for_bit) {
    for (int threads = 1; threads <= 2; threads++) {
        rg_set_num_threads(threads);
        for (size_t ci = 0; ci < NCASES; ci++) check_fused_relu(&cases[ci], (int)ci, true);
        check_fused_relu(&cases[1], 1, false); /* bias gradient without the weight's */
    }
    rg_set_num_threads(1);
}

static rg_tensor *f_conv_relu(rg_tensor *const *in, void *ctx) {
    const conv_case *t = ctx;
    return rg_conv2d_relu(in[0], in[1], t->bias ? in[2] : NULL, t->stride, t->pad);
}

/* Finite differences step over the ReLU's kink when an output lies within a step of 0, so the
 * inputs are drawn until every pre-activation is at least 0.1 away from it (about half of all
 * seeds); then half the outputs are cut and half pass. */
Test(tensor_conv2d, fused_relu_gradients_match_finite_differences) {
    const conv_case t = {1, 2, 5, 6, 3, 3, 3, 1, 1, true};
    for (uint64_t seed = 900, found = 0; !found; seed += 10) {
        cr_assert(seed < 900 + 10 * 200, "no seed gave pre-activations away from 0");
        conv_inputs in = make_inputs(&t, seed, true);
        rg_scope_begin();
        rg_tensor *z = rg_conv2d(in.x, in.w, in.b, t.stride, t.pad);
        float zmin = INFINITY;
        for (int64_t i = 0; i < z->numel; i++) zmin = fminf(zmin, fabsf(rg_tensor_f32(z)[i]));
        rg_scope_end();
        if (zmin >= 0.1f) {
            found = 1;
            rgt_assert_gradcheck(f_conv_relu, (void *)&t, 3, (rg_tensor *[]){in.x, in.w, in.b},
                                 NULL);
        }
        free_inputs(&in);
    }
}

/* ---- the fused ReLU and max-pool (rg_conv2d_relu_maxpool2d) ---- */

typedef struct {
    int kernel, stride, pad;
} pool_case;

/* The CNN's 2x2/2, ResNet's 3x3/2 with padding (overlapping windows), and a 2x2/1. */
static const pool_case pools[] = {{2, 2, 0}, {3, 2, 1}, {2, 1, 0}};
#define NPOOLS (sizeof pools / sizeof pools[0])

/* Runs y = op(x, w, b) `reps` times, each followed by backward of sum(y * dy) (grads zeroed
 * before the first only: reps 2 accumulates); copies y and the gradients of x, w, b (those that
 * exist) into out[0..3], each malloc'ed. */
static void run_conv_relu_pool(const conv_case *t, const pool_case *pc, const conv_inputs *in,
                               const rg_tensor *dy, bool fused, int reps, float *out[4]) {
    rg_tensor *ps[3] = {in->x, in->w, in->b};
    for (int i = 0; i < 3; i++)
        if (ps[i]) rg_zero_grad(ps[i]);
    for (int rep = 0; rep < reps; rep++) {
        rg_scope_begin();
        rg_tensor *y =
            fused ? rg_conv2d_relu_maxpool2d(in->x, in->w, in->b, t->stride, t->pad, pc->kernel,
                                             pc->stride, pc->pad)
                  : rg_max_pool2d(rg_relu(rg_conv2d(in->x, in->w, in->b, t->stride, t->pad)),
                                  pc->kernel, pc->stride, pc->pad);
        cr_assert_eq(y->numel, dy->numel);
        rg_backward(rg_sum(rg_mul(y, (rg_tensor *)dy)));
        if (rep == reps - 1) {
            out[0] = malloc(rg_tensor_nbytes(y));
            rg_tensor_copy_to_host(y, out[0]);
        }
        rg_scope_end();
    }
    for (int i = 0; i < 3; i++) {
        out[1 + i] = NULL;
        if (!ps[i] || !ps[i]->grad) continue;
        out[1 + i] = malloc(rg_tensor_nbytes(ps[i]->grad));
        rg_tensor_copy_to_host(ps[i]->grad, out[1 + i]);
    }
}

/* rg_conv2d_relu_maxpool2d against rg_max_pool2d(rg_relu(rg_conv2d(...))): the output and every
 * gradient bit for bit. weight_grad false sends the bias gradient down the op's other path (the
 * conv's dy unpooled by the op itself); reps 2 accumulates into the gradients. */
static void check_fused_pool(const conv_case *t, int ci, const pool_case *pc, bool weight_grad,
                             int reps) {
    rg_conv2d_shape s = shape_of(t);
    if (s.p + 2 * pc->pad < pc->kernel || s.q + 2 * pc->pad < pc->kernel) return;
    int64_t pp = (s.p + 2 * pc->pad - pc->kernel) / pc->stride + 1,
            pq = (s.q + 2 * pc->pad - pc->kernel) / pc->stride + 1;
    conv_inputs in = make_inputs(t, 500 + 10 * (uint64_t)ci, true);
    rg_tensor_set_requires_grad(in.w, weight_grad);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(s.n, s.k, pp, pq), -1, 1, 5000 + (uint64_t)ci);
    float *want[4], *got[4];
    run_conv_relu_pool(t, pc, &in, dy, false, reps, want);
    run_conv_relu_pool(t, pc, &in, dy, true, reps, got);
    int64_t n[4] = {dy->numel, in.x->numel, in.w->numel, in.b ? in.b->numel : 0};
    char label[96];
    snprintf(label, sizeof label, "case %d, pool %dx%d/%d pad %d (weight grad %d, reps %d)", ci,
             pc->kernel, pc->kernel, pc->stride, pc->pad, weight_grad, reps);
    assert_same_bits(got, want, n, label);
    rg_tensor_free(dy);
    free_inputs(&in);
}

/* Every case reaches the pool by another path of the CPU kernels: pooled from each image's scratch
 * on the tiles, after the whole output on the direct and 1x1 passes; in backward, unpooled image
 * by image on the tiles, whole for the products and the im2col filter pass. */
Test(tensor_conv2d, fused_pool_equals_pool_of_relu_of_conv_bit_for_bit) {
    for (int threads = 1; threads <= 2; threads++) {
        rg_set_num_threads(threads);
        for (size_t ci = 0; ci < NCASES; ci++)
            for (size_t pi = 0; pi < NPOOLS; pi++)
                check_fused_pool(&cases[ci], (int)ci, &pools[pi], true, 1);
        for (size_t pi = 0; pi < NPOOLS; pi++) {
            check_fused_pool(&cases[4], 4, &pools[pi], false, 1);  /* bias without the weight */
            check_fused_pool(&cases[4], 4, &pools[pi], true, 2);   /* accumulating, tiles */
            check_fused_pool(&cases[22], 22, &pools[pi], true, 2); /* accumulating, 1x1 */
        }
    }
    rg_set_num_threads(1);
}

typedef struct {
    conv_case t;
    pool_case pool;
} conv_pool_ctx;

static rg_tensor *f_conv_relu_pool(rg_tensor *const *in, void *ctx) {
    const conv_pool_ctx *c = ctx;
    return rg_conv2d_relu_maxpool2d(in[0], in[1], in[2], c->t.stride, c->t.pad, c->pool.kernel,
                                    c->pool.stride, c->pool.pad);
}

/* Whether every pre-activation z lies at least `gap` from 0 and, in every pool window, the largest
 * value at least `gap` above the next: finite differences then cross neither the ReLU's kink nor
 * a change of the maximum. */
static bool away_from_kinks(const conv_pool_ctx *c, const conv_inputs *in, float gap) {
    rg_conv2d_shape s = shape_of(&c->t);
    rg_scope_begin();
    const float *z = rg_tensor_f32(rg_conv2d(in->x, in->w, in->b, c->t.stride, c->t.pad));
    bool ok = true;
    for (int64_t i = 0; i < s.n * s.k * s.p * s.q; i++) ok = ok && fabsf(z[i]) >= gap;
    int kp = c->pool.kernel, st = c->pool.stride, pd = c->pool.pad;
    for (int64_t pl = 0; ok && pl < s.n * s.k; pl++)
        for (int64_t p = 0; p * st - pd + kp <= s.p + pd && ok; p++)
            for (int64_t q = 0; q * st - pd + kp <= s.q + pd && ok; q++) {
                float top = -INFINITY, next = -INFINITY;
                for (int64_t h = p * st - pd; h < p * st - pd + kp; h++)
                    for (int64_t w = q * st - pd; w < q * st - pd + kp; w++) {
                        if (h < 0 || h >= s.p || w < 0 || w >= s.q) continue;
                        float v = fmaxf(z[(pl * s.p + h) * s.q + w], 0.0f); /* after the ReLU */
                        if (v > top)
                            next = top, top = v;
                        else if (v > next)
                            next = v;
                    }
                ok = top == 0.0f || top - next >= gap; /* a window all cut by the ReLU: no grad */
            }
    rg_scope_end();
    return ok;
}

Test(tensor_conv2d, fused_pool_gradients_match_finite_differences) {
    const conv_pool_ctx cases_fd[] = {
        {{1, 2, 5, 6, 3, 3, 3, 1, 1, true}, {2, 2, 0}},
        {{2, 3, 6, 5, 4, 3, 3, 1, 1, true}, {3, 2, 1}},
    };
    for (size_t c = 0; c < sizeof cases_fd / sizeof cases_fd[0]; c++)
        for (uint64_t seed = 1900, found = 0; !found; seed += 10) {
            cr_assert(seed < 1900 + 10 * 400, "no seed gave values away from the kinks");
            conv_inputs in = make_inputs(&cases_fd[c].t, seed, true);
            if (away_from_kinks(&cases_fd[c], &in, 0.02f)) {
                found = 1;
                rgt_assert_gradcheck(f_conv_relu_pool, (void *)&cases_fd[c], 3,
                                     (rg_tensor *[]){in.x, in.w, in.b}, NULL);
            }
            free_inputs(&in);
        }
}

Test(tensor_conv2d, fused_pool_with_padding_over_half_its_kernel_stops, .signal = SIGABRT) {
    conv_inputs in = make_inputs(&cases[1], 1, false);
    rg_scope_begin();
    rg_conv2d_relu_maxpool2d(in.x, in.w, in.b, 1, 1, 3, 2, 2);
}

Test(tensor_conv2d, fused_pool_larger_than_the_output_stops, .signal = SIGABRT) {
    conv_inputs in = make_inputs(&cases[1], 1, false); /* 7x9 output */
    rg_scope_begin();
    rg_conv2d_relu_maxpool2d(in.x, in.w, in.b, 1, 1, 8, 1, 0);
}

/* 3x3 on the tiles; 1x1 as products, in place and strided; a filter pass through im2col; a data
 * pass as a forward pass */
static const conv_case beta_cases[] = {
    {2, 16, 9, 7, 20, 3, 3, 1, 1, true},
    {2, 24, 10, 12, 40, 1, 1, 1, 0, true},
    {2, 8, 23, 21, 12, 1, 1, 2, 0, true},
    {2, 240, 8, 8, 20, 3, 3, 2, 1, true}, /* the filter pass through im2col */
    {2, 64, 6, 5, 12, 3, 3, 1, 1, true},  /* the data pass as a forward pass, on every ISA */
    {3, 20, 9, 9, 512, 1, 1, 1, 0, true}, /* AVX-512: the data pass on the tile over the batch */
    {4, 70, 12, 12, 9, 1, 1, 1, 0, true}, /* AVX-512: the filter pass on the tile over the batch */
};

static void check_accumulate(const conv_case *tc) {
    const conv_case t = *tc;
    conv_inputs in = make_inputs(&t, 77, true);
    rg_tensor *ps[3] = {in.x, in.w, in.b};
    float *first[3];
    for (int rep = 0; rep < 2; rep++) {
        rg_scope_begin();
        rg_backward(rg_sum(rg_conv2d(in.x, in.w, in.b, t.stride, t.pad)));
        for (int i = 0; i < 3; i++) {
            if (rep == 0) {
                first[i] = malloc(rg_tensor_nbytes(ps[i]->grad));
                rg_tensor_copy_to_host(ps[i]->grad, first[i]);
                continue;
            }
            float *twice = malloc(rg_tensor_nbytes(ps[i]->grad));
            for (int64_t j = 0; j < ps[i]->numel; j++) twice[j] = 2 * first[i][j];
            rgt_assert_close(rg_tensor_f32(ps[i]->grad), twice, ps[i]->numel, 1e-4, 1e-5,
                             "gradient after two backward passes");
            free(twice), free(first[i]);
        }
        rg_scope_end();
    }
    free_inputs(&in);
}

Test(tensor_conv2d, gradients_accumulate_with_beta_one) {
    for (size_t i = 0; i < sizeof beta_cases / sizeof beta_cases[0]; i++)
        check_accumulate(&beta_cases[i]);
}

static void check_beta_zero(const conv_case *tc) {
    const conv_case t = *tc;
    rg_conv2d_shape s = shape_of(&t);
    conv_inputs in = make_inputs(&t, 3, false);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(s.n, s.k, s.p, s.q), -1, 1, 4);
    rg_tensor *dx = rgt_uniform(RG_SHAPE(s.n, s.c, s.h, s.w), -1, 1, 5);
    rg_tensor *dw = rgt_uniform(RG_SHAPE(s.k, s.c, s.r, s.s), -1, 1, 6);
    rg_tensor *db = rgt_uniform(RG_SHAPE(s.k), -1, 1, 7);
    rg_tensor *outs[3] = {dx, dw, db};
    float *apart[3] = {NULL, NULL, NULL};
    for (int both = 0; both < 2; both++) { /* the passes one by one, then in one call */
        for (int i = 0; i < 3; i++) rg_tensor_fill_(outs[i], NAN);
        if (both) {
            rg_cpu_backend.conv2d_backward(&s, in.x->data, dy->data, in.w->data, 0.0f, dx->data,
                                           0.0f, dw->data, db->data);
        } else {
            rg_cpu_backend.conv2d_backward_data(&s, dy->data, in.w->data, 0.0f, dx->data);
            rg_cpu_backend.conv2d_backward_filter(&s, in.x->data, dy->data, 0.0f, dw->data,
                                                  db->data);
        }
        for (int i = 0; i < 3; i++)
            for (int64_t j = 0; j < outs[i]->numel; j++)
                cr_assert(isfinite(rg_tensor_f32(outs[i])[j]), "%s: output %d element %lld is %g",
                          both ? "together" : "apart", i, (long long)j,
                          (double)rg_tensor_f32(outs[i])[j]);
        for (int i = 0; i < 3; i++) { /* and together they give the same bits */
            if (!both) {
                apart[i] = rgt_copy_out(outs[i]);
                continue;
            }
            cr_assert(memcmp(apart[i], outs[i]->data, rg_tensor_nbytes(outs[i])) == 0,
                      "output %d differs between the passes apart and together", i);
            free(apart[i]);
        }
    }
    rgt_free_all(4, (rg_tensor *[]){dy, dx, dw, db});
    free_inputs(&in);
}

Test(tensor_conv2d, kernels_with_beta_zero_never_read_the_output_and_agree_apart_or_together) {
    check_beta_zero(&(conv_case){2, 32, 8, 8, 16, 3, 3, 1, 1, true});
    for (size_t i = 1; i < sizeof beta_cases / sizeof beta_cases[0]; i++)
        check_beta_zero(&beta_cases[i]);
}

Test(tensor_conv2d, channel_mismatch_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(1, 3, 8, 8), -1, 1, 1);
    rg_tensor *w = rgt_uniform(RG_SHAPE(4, 2, 3, 3), -1, 1, 2);
    rg_scope_begin();
    rg_conv2d(x, w, NULL, 1, 0);
}

Test(tensor_conv2d, kernel_larger_than_the_padded_input_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(1, 1, 2, 2), -1, 1, 1);
    rg_tensor *w = rgt_uniform(RG_SHAPE(1, 1, 5, 5), -1, 1, 2);
    rg_scope_begin();
    rg_conv2d(x, w, NULL, 1, 1);
}
