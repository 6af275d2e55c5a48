/* Tests for sum, mean and argmax: forward against double-precision loops (including sums long
 * enough that a float accumulator would drift), gradients, and argmax's ties and dtype. */
#include "rgtest.h"

#include <math.h>

static double naive_sum(const rg_tensor *t) {
    const float *p = rg_tensor_f32(t);
    double s = 0;
    for (int64_t i = 0; i < t->numel; i++) s += p[i];
    return s;
}

Test(tensor_reduce, sum_and_mean_match_naive_on_odd_shapes) {
    int64_t shapes[][4] = {{1, 1, 1, 1}, {3, 5, 7, 1}, {2, 9, 1, 13}, {17, 3, 3, 5}};
    for (int k = 0; k < 4; k++) {
        rg_tensor *x = rgt_uniform(4, shapes[k], -3, 3, 1 + (uint64_t)k);
        double want = naive_sum(x);
        rg_scope_begin();
        rg_tensor *s = rg_sum(x), *m = rg_mean(x);
        cr_assert_eq(s->ndim, 0, "sum gives shape ()");
        cr_assert_eq(m->ndim, 0, "mean gives shape ()");
        cr_assert_eq(s->numel, 1);
        cr_assert_float_eq(rg_tensor_item(s), want, 1e-5 * (1 + fabs(want)), "sum, shape %d", k);
        cr_assert_float_eq(rg_tensor_item(m), want / (double)x->numel, 1e-6, "mean, shape %d", k);
        rg_scope_end();
        rg_tensor_free(x);
    }
}

Test(tensor_reduce, sum_of_a_scalar_is_the_scalar) {
    float v = 2.5f;
    rg_tensor *x = rgt_tensor(0, NULL, &v);
    rg_scope_begin();
    cr_assert_eq(rg_tensor_item(rg_sum(x)), 2.5f);
    cr_assert_eq(rg_tensor_item(rg_mean(x)), 2.5f);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reduce, sum_of_many_elements_does_not_drift) {
    rg_set_num_threads(2);
    /* A float accumulator stops at 2^24 = 16777216 when adding ones; 20,000,001 ones must give
     * the float nearest 20000001, and 0.1 twenty million times a mean of 0.1. */
    int64_t n = 20000001;
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(n), RG_CPU);
    rg_tensor_fill_(x, 1.0f);
    rg_scope_begin();
    cr_assert_eq(rg_tensor_item(rg_sum(x)), (float)20000001.0, "sum of %lld ones", (long long)n);
    rg_scope_end();
    rg_tensor_fill_(x, 0.1f);
    rg_scope_begin();
    float m = rg_tensor_item(rg_mean(x));
    cr_assert_float_eq(m, 0.1f, 1e-7, "mean of 0.1: %.9g", m);
    float s = rg_tensor_item(rg_sum(x));
    cr_assert_float_eq(s, (double)0.1f * (double)n, 1.0, "sum of 0.1: %.9g", s);
    rg_scope_end();
    rg_tensor_free(x);

    x = rgt_uniform(RG_SHAPE(n), 0, 1, 2);
    double want = naive_sum(x);
    rg_scope_begin();
    float got = rg_tensor_item(rg_sum(x));
    cr_assert(fabs(got - want) <= 1e-6 * want, "sum of uniforms: %.9g, want %.9g", got, want);
    rg_scope_end();
    rg_tensor_free(x);
}

/* The sum is the same bits at one and two threads (blocks summed in order; an OpenMP reduction
 * added the threads' halves in whatever split it made), on lengths around the block size. */
Test(tensor_reduce, sum_is_the_same_at_any_thread_count) {
    const int64_t lens[] = {4095, 4096, 4097, 100003, 64 * 4096 + 17, 1000000};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        rg_tensor *x = rgt_uniform(RG_SHAPE(lens[k]), -1, 2, 30 + (uint64_t)k);
        float got[2];
        for (int t = 0; t < 2; t++) {
            rg_set_num_threads(t + 1);
            rg_scope_begin();
            got[t] = rg_tensor_item(rg_sum(x));
            rg_scope_end();
        }
        double want = naive_sum(x);
        cr_assert(memcmp(&got[0], &got[1], sizeof got[0]) == 0,
                  "n %lld: %.9g at 1 thread, %.9g at 2", (long long)lens[k], got[0], got[1]);
        cr_assert(fabs(got[0] - want) <= 1e-6 * fabs(want) + 1e-3, "n %lld: %.9g, want %.9g",
                  (long long)lens[k], got[0], want);
        rg_tensor_free(x);
    }
    rg_set_num_threads(1);
}

Test(tensor_reduce, sum_backward_broadcasts_the_upstream_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(3, 5, 7), -1, 1, 3);
    rg_scope_begin();
    rg_backward(rg_scale(rg_sum(x), -2.5f));
    const float *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 105; i++) cr_assert_eq(g[i], -2.5f, "element %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reduce, mean_backward_is_one_over_n) {
    rg_tensor *x = rgt_param(RG_SHAPE(7, 11), -1, 1, 4);
    rg_scope_begin();
    rg_backward(rg_mean(x));
    const float *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 77; i++) cr_assert_float_eq(g[i], 1.0 / 77, 1e-8, "element %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

static rg_tensor *f_sum(rg_tensor *const *in, void *ctx) {
    return rg_sum(in[0]);
}
static rg_tensor *f_mean(rg_tensor *const *in, void *ctx) {
    return rg_mean(in[0]);
}
/* a non-trivial upstream gradient: sum(x) * x, so ds = sum over elements of dy * x */
static rg_tensor *f_sum_times(rg_tensor *const *in, void *ctx) {
    return rg_mul(in[0], rg_sum(in[0]));
}

Test(tensor_reduce, sum_and_mean_gradients_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 3, 7), -1, 1, 5);
    rgt_assert_gradcheck(f_sum, NULL, 1, &x, NULL);
    rgt_assert_gradcheck(f_mean, NULL, 1, &x, NULL);
    rgt_assert_gradcheck(f_sum_times, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

Test(tensor_reduce, mean_of_an_empty_tensor_stops, .signal = SIGABRT) {
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(0, 3), RG_CPU);
    rg_scope_begin();
    rgt_expect_fatal("mean: empty tensor");
    rg_mean(x);
}

/* ---- argmax ---- */

Test(tensor_reduce, argmax_matches_naive_per_row) {
    int64_t rows = 37, cols = 13;
    rg_tensor *x = rgt_uniform(RG_SHAPE(rows, cols), -1, 1, 6);
    rg_scope_begin();
    rg_tensor *y = rg_argmax(x);
    cr_assert_eq(y->dtype, RG_I64, "argmax gives int64");
    cr_assert_eq(y->ndim, 1);
    cr_assert_eq(y->shape[0], rows);
    const float *xp = rg_tensor_f32(x);
    const int64_t *yp = y->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < cols; c++)
            if (xp[r * cols + c] > xp[r * cols + best]) best = c;
        cr_assert_eq(yp[r], best, "row %lld", (long long)r);
    }
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reduce, argmax_ties_give_the_first_index) {
    float v[] = {1,         3,         3,         2,  /* tie in the middle */
                 5,         5,         5,         5,  /* all equal */
                 -1,        -2,        -3,        -1, /* tie at both ends */
                 -INFINITY, -INFINITY, -INFINITY, 0};
    rg_tensor *x = rgt_tensor(RG_SHAPE(4, 4), v);
    rg_scope_begin();
    rg_tensor *y = rg_argmax(x);
    const int64_t *yp = y->data;
    int64_t want[] = {1, 0, 0, 3};
    for (int r = 0; r < 4; r++) cr_assert_eq(yp[r], want[r], "row %d: %lld", r, (long long)yp[r]);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reduce, argmax_works_on_the_last_dim_of_any_rank) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 5), -1, 1, 7);
    rg_tensor *v = rgt_uniform(RG_SHAPE(9), -1, 1, 8);
    rg_scope_begin();
    rg_tensor *y = rg_argmax(x);
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 2);
    cr_assert_eq(y->shape[1], 3);
    const float *xp = rg_tensor_f32(x);
    for (int r = 0; r < 6; r++) {
        int64_t k = ((int64_t *)y->data)[r];
        for (int c = 0; c < 5; c++) cr_assert_leq(xp[r * 5 + c], xp[r * 5 + k], "row %d", r);
    }
    rg_tensor *yv = rg_argmax(v); /* (C) -> shape () */
    cr_assert_eq(yv->ndim, 0);
    cr_assert_eq(yv->numel, 1);
    const float *vp = rg_tensor_f32(v);
    for (int c = 0; c < 9; c++) cr_assert_leq(vp[c], vp[*(int64_t *)yv->data]);
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){x, v});
}

Test(tensor_reduce, argmax_records_no_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(4, 3), -1, 1, 9);
    rg_scope_begin();
    int64_t before = rg_tape_len();
    rg_tensor *y = rg_argmax(x);
    cr_assert_null(y->grad_fn);
    cr_assert(!rg_tensor_requires_grad(y));
    cr_assert_eq(rg_tape_len(), before, "argmax put a node on the tape");
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reduce, argmax_of_an_empty_row_stops, .signal = SIGABRT) {
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(3, 0), RG_CPU);
    rg_scope_begin();
    rgt_expect_fatal("argmax: needs a non-empty last dimension, got (3,0)");
    rg_argmax(x);
}
