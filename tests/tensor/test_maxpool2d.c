/* Tests for max_pool2d: forward and backward against naive loops (2x2 stride 2 on even and odd
 * sizes, overlapping and padded windows, non-square inputs), central-difference gradients on
 * tie-free inputs, ties going to the first maximum, padding never winning, NaN propagation,
 * accumulation into existing gradients, and misuse. */
#include <math.h>
#include <string.h>

#include "rgtest.h"

typedef struct {
    int64_t n, c, h, w;
    int kernel, stride, pad;
} pool_case;

static const pool_case cases[] = {
    {2, 3, 8, 8, 2, 2, 0},
    {1, 2, 7, 9, 2, 2, 0},
    {3, 1, 6, 5, 3, 2, 1},
    {2, 4, 5, 7, 3, 1, 1},
    {1, 1, 1, 1, 1, 1, 0},
    {2, 5, 9, 4, 4, 3, 2},
    {1, 64, 24, 24, 2, 2, 0},
    /* ResNet's stem pool (3x3, stride 2, padding 1): rows of interior windows, even and odd sizes
     */
    {2, 3, 16, 15, 3, 2, 1},
    {1, 2, 17, 40, 3, 2, 1},
    {1, 2, 9, 11, 3, 2, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

static int64_t out_size(int64_t in, const pool_case *t) {
    return (in + 2 * t->pad - t->kernel) / t->stride + 1;
}

/* y and the flat input index of each maximum (first one on ties; a NaN wins). */
static void naive_pool(const pool_case *t, const float *x, float *y, int64_t *at) {
    int64_t p_n = out_size(t->h, t), q_n = out_size(t->w, t), o = 0;
    for (int64_t pl = 0; pl < t->n * t->c; pl++)
        for (int64_t p = 0; p < p_n; p++)
            for (int64_t q = 0; q < q_n; q++, o++) {
                float best = -INFINITY;
                int64_t where = -1;
                for (int r = 0; r < t->kernel; r++)
                    for (int s = 0; s < t->kernel; s++) {
                        int64_t h = p * t->stride - t->pad + r, w = q * t->stride - t->pad + s;
                        if (h < 0 || h >= t->h || w < 0 || w >= t->w) continue;
                        float v = x[(pl * t->h + h) * t->w + w];
                        if (where < 0 || v > best || isnan(v))
                            best = v, where = (pl * t->h + h) * t->w + w;
                    }
                y[o] = best, at[o] = where;
            }
}

static int64_t out_numel(const pool_case *t) {
    return t->n * t->c * out_size(t->h, t) * out_size(t->w, t);
}

Test(tensor_maxpool2d, forward_and_backward_match_naive_loops) {
    for (size_t ci = 0; ci < NCASES; ci++) {
        const pool_case *t = &cases[ci];
        rg_tensor *x = rgt_param(RG_SHAPE(t->n, t->c, t->h, t->w), -1, 1, 10 + ci);
        int64_t ny = out_numel(t);
        rg_tensor *dy = rgt_uniform(RG_SHAPE(ny), -1, 1, 50 + ci);
        float *want = malloc((size_t)ny * sizeof(float)),
              *dx = calloc((size_t)x->numel, sizeof(float));
        int64_t *at = malloc((size_t)ny * sizeof(int64_t));
        naive_pool(t, rg_tensor_f32(x), want, at);
        for (int64_t i = 0; i < ny; i++) dx[at[i]] += rg_tensor_f32(dy)[i];
        rg_scope_begin();
        rg_tensor *y = rg_max_pool2d(x, t->kernel, t->stride, t->pad);
        cr_assert(y->shape[2] == out_size(t->h, t) && y->shape[3] == out_size(t->w, t), "case %zu",
                  ci);
        rgt_assert_close(rg_tensor_f32(y), want, ny, 0, 0, "max_pool2d forward");
        rg_backward(rg_sum(rg_mul(rg_reshape(y, RG_SHAPE(ny)), dy)));
        rgt_assert_close(rg_tensor_f32(x->grad), dx, x->numel, 1e-6, 1e-6, "max_pool2d backward");
        rg_scope_end();
        free(want), free(dx), free(at);
        rgt_free_all(2, (rg_tensor *[]){x, dy});
    }
}

static rg_tensor *f_pool(rg_tensor *const *in, void *ctx) {
    const pool_case *t = ctx;
    return rg_max_pool2d(in[0], t->kernel, t->stride, t->pad);
}

/* Distinct values 0.05 apart in a scrambled order: no window has two maxima within the
 * finite-difference step, so the numeric gradient is well defined. */
static rg_tensor *tie_free(const pool_case *t) {
    rg_tensor *x = rgt_param(RG_SHAPE(t->n, t->c, t->h, t->w), 0, 1, 1);
    float *p = rg_tensor_f32(x);
    for (int64_t i = 0; i < x->numel; i++) p[i] = 0.05f * (float)((i * 37) % x->numel) - 1.0f;
    return x;
}

Test(tensor_maxpool2d, gradients_match_finite_differences) {
    static const pool_case small[] = {
        {2, 2, 6, 5, 2, 2, 0}, {1, 2, 5, 5, 3, 1, 1}, {1, 3, 7, 6, 3, 2, 1}};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        rg_tensor *x = tie_free(&small[i]);
        rgt_assert_gradcheck(f_pool, (void *)&small[i], 1, &x, NULL);
        rg_tensor_free(x);
    }
}

/* The 3x3, stride-2 rows run as selects over the nine taps: ties (values on a coarse grid) and
 * NaNs (the last NaN in the window wins, as in the scan) must come out as in the naive loops. */
Test(tensor_maxpool2d, stem_pool_ties_and_nans_match_naive_loops) {
    /* rows of 8 outputs (no whole vector inside), 20 (two vectors of 8 and three after), 32
     * (three and seven), and an unpadded one of 18 (two and one) */
    static const pool_case ts[] = {{2, 3, 16, 15, 3, 2, 1},
                                   {1, 2, 17, 40, 3, 2, 1},
                                   {1, 2, 9, 64, 3, 2, 1},
                                   {2, 1, 7, 37, 3, 2, 0}};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
        const pool_case *t = &ts[k];
        rg_tensor *x = rgt_param(RG_SHAPE(t->n, t->c, t->h, t->w), -1, 1, 70 + k);
        float *xp = rg_tensor_f32(x);
        for (int64_t i = 0; i < x->numel; i++) {
            xp[i] = roundf(xp[i] * 2.0f) / 2.0f; /* five values: ties everywhere */
            if (i % 37 == 5 || i % 53 == 6) xp[i] = NAN;
        }
        int64_t ny = out_numel(t);
        float *want = malloc((size_t)ny * sizeof(float));
        int64_t *at = malloc((size_t)ny * sizeof(int64_t));
        float *dx = calloc((size_t)x->numel, sizeof(float));
        naive_pool(t, xp, want, at);
        for (int64_t i = 0; i < ny; i++) dx[at[i]] += (float)(i % 7 + 1); /* distinct weights */
        rg_scope_begin();
        rg_tensor *y = rg_max_pool2d(x, t->kernel, t->stride, t->pad);
        const float *yp = rg_tensor_f32(y);
        for (int64_t i = 0; i < ny; i++)
            cr_assert(isnan(want[i]) ? isnan(yp[i]) : yp[i] == want[i], "case %zu output %lld", k,
                      (long long)i);
        rg_tensor *w = rgt_uniform(RG_SHAPE(ny), 0, 1, 1);
        for (int64_t i = 0; i < ny; i++) rg_tensor_f32(w)[i] = (float)(i % 7 + 1);
        rg_backward(rg_sum(rg_mul(rg_reshape(y, RG_SHAPE(ny)), w)));
        rgt_assert_close(rg_tensor_f32(x->grad), dx, x->numel, 0, 0, "argmax of every window");
        rg_scope_end();
        free(want), free(at), free(dx);
        rgt_free_all(2, (rg_tensor *[]){x, w});
    }
}

Test(tensor_maxpool2d, ties_go_to_the_first_maximum) {
    static const pool_case overlapping = {1, 1, 4, 4, 3, 1, 0}, tiled = {1, 2, 4, 6, 2, 2, 0};
    const pool_case *ts[2] = {&overlapping, &tiled};
    for (int k = 0; k < 2; k++) {
        const pool_case *t = ts[k];
        rg_tensor *x = rgt_param(RG_SHAPE(t->n, t->c, t->h, t->w), 0, 1, 1);
        rg_tensor_fill_(x, 0.5f);
        rg_scope_begin();
        rg_backward(rg_sum(rg_max_pool2d(x, t->kernel, t->stride, t->pad)));
        const float *g = rg_tensor_f32(x->grad);
        /* every window's first element is its top-left corner */
        for (int64_t pl = 0; pl < t->n * t->c; pl++)
            for (int64_t h = 0; h < t->h; h++)
                for (int64_t w = 0; w < t->w; w++) {
                    float want = 0;
                    for (int64_t p = 0; p < out_size(t->h, t); p++)
                        for (int64_t q = 0; q < out_size(t->w, t); q++)
                            want += p * t->stride == h && q * t->stride == w;
                    cr_assert_eq(g[(pl * t->h + h) * t->w + w], want, "case %d at (%lld,%lld)", k,
                                 (long long)h, (long long)w);
                }
        rg_scope_end();
        rg_tensor_free(x);
    }
}

Test(tensor_maxpool2d, padding_never_wins_and_nan_propagates) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(1, 1, 3, 3), -2, -1, 3); /* all negative: pad 0 would win */
    rg_tensor_f32(x)[8] = NAN;
    rg_scope_begin();
    rg_tensor *y = rg_max_pool2d(x, 2, 1, 1); /* (1,1,4,4) */
    const float *xp = rg_tensor_f32(x), *yp = rg_tensor_f32(y);
    cr_assert_eq(yp[0], xp[0], "corner window holds only x[0,0]");
    cr_assert_eq(yp[1], fmaxf(xp[0], xp[1]));
    cr_assert(isnan(yp[15]) && isnan(yp[10]), "windows holding the NaN give NaN");
    for (int i = 0; i < 16; i++)
        cr_assert(isnan(yp[i]) || yp[i] < 0, "output %d is %g", i, (double)yp[i]);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_maxpool2d, gradients_accumulate_with_beta_one) {
    static const pool_case ts[2] = {{2, 3, 7, 8, 2, 2, 0}, {1, 2, 6, 6, 3, 2, 1}};
    for (int k = 0; k < 2; k++) {
        rg_tensor *x = tie_free(&ts[k]);
        float *first = malloc(rg_tensor_nbytes(x));
        for (int rep = 0; rep < 2; rep++) {
            rg_scope_begin();
            rg_backward(rg_sum(rg_max_pool2d(x, ts[k].kernel, ts[k].stride, ts[k].pad)));
            if (rep == 0) rg_tensor_copy_to_host(x->grad, first);
            rg_scope_end();
        }
        for (int64_t i = 0; i < x->numel; i++)
            cr_assert_eq(rg_tensor_f32(x->grad)[i], 2 * first[i], "case %d element %lld", k,
                         (long long)i);
        free(first);
        rg_tensor_free(x);
    }
}

Test(tensor_maxpool2d, padding_over_half_the_kernel_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(1, 1, 4, 4), -1, 1, 1);
    rg_scope_begin();
    rg_max_pool2d(x, 2, 2, 2);
}

Test(tensor_maxpool2d, input_without_four_dimensions_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 4), -1, 1, 1);
    rg_scope_begin();
    rg_max_pool2d(x, 2, 2, 0);
}
