/* Tests for matmul and linear: forward against a naive triple loop, gradients by central
 * differences, odd sizes included. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rgtest.h"

static void naive_matmul(const float *a, const float *b, float *y, int64_t m, int64_t k,
                         int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++) s += (double)a[i * k + p] * b[p * n + j];
            y[i * n + j] = (float)s;
        }
}

Test(tensor_matmul, forward_matches_naive_on_odd_shapes) {
    int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 1}, {64, 33, 65}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int64_t m = shapes[t][0], k = shapes[t][1], n = shapes[t][2];
        rg_tensor *a = rgt_uniform(RG_SHAPE(m, k), -1, 1, 1 + t),
                  *b = rgt_uniform(RG_SHAPE(k, n), -1, 1, 100 + t);
        float *want = malloc((size_t)(m * n) * sizeof(float));
        naive_matmul(rg_tensor_f32(a), rg_tensor_f32(b), want, m, k, n);
        rg_scope_begin();
        rg_tensor *y = rg_matmul(a, b);
        cr_assert_eq(y->shape[0], m);
        cr_assert_eq(y->shape[1], n);
        rgt_assert_close(rg_tensor_f32(y), want, m * n, 1e-5, 1e-5, "matmul");
        rg_scope_end();
        free(want);
        rgt_free_all(2, (rg_tensor *[]){a, b});
    }
}

static rg_tensor *f_matmul(rg_tensor *const *in, void *ctx) {
    return rg_matmul(in[0], in[1]);
}

Test(tensor_matmul, gradients_match_finite_differences) {
    rg_tensor *a = rgt_param(RG_SHAPE(5, 7), -1, 1, 1), *b = rgt_param(RG_SHAPE(7, 3), -1, 1, 2);
    rgt_assert_gradcheck(f_matmul, NULL, 2, (rg_tensor *[]){a, b}, NULL);
    rgt_free_all(2, (rg_tensor *[]){a, b});
}

static rg_tensor *f_linear(rg_tensor *const *in, void *ctx) {
    return rg_linear(in[0], in[1], in[2]);
}

Test(tensor_linear, forward_is_x_wT_plus_bias) {
    int64_t n = 6, in = 11, out = 5;
    rg_tensor *x = rgt_uniform(RG_SHAPE(n, in), -1, 1, 3),
              *w = rgt_uniform(RG_SHAPE(out, in), -1, 1, 4);
    rg_tensor *b = rgt_uniform(RG_SHAPE(out), -1, 1, 5);
    float want[6 * 5];
    const float *xp = rg_tensor_f32(x), *wp = rg_tensor_f32(w), *bp = rg_tensor_f32(b);
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double s = bp[o];
            for (int64_t j = 0; j < in; j++) s += (double)xp[i * in + j] * wp[o * in + j];
            want[i * out + o] = (float)s;
        }
    rg_scope_begin();
    rg_tensor *y = rg_linear(x, w, b);
    rgt_assert_close(rg_tensor_f32(y), want, n * out, 1e-5, 1e-5, "linear");
    rg_scope_end();
    rgt_free_all(3, (rg_tensor *[]){x, w, b});
}

Test(tensor_linear, gradients_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(4, 9), -1, 1, 6), *w = rgt_param(RG_SHAPE(3, 9), -1, 1, 7);
    rg_tensor *b = rgt_param(RG_SHAPE(3), -1, 1, 8);
    rgt_assert_gradcheck(f_linear, NULL, 3, (rg_tensor *[]){x, w, b}, NULL);
    rgt_free_all(3, (rg_tensor *[]){x, w, b});
}

Test(tensor_linear, gradients_accumulate_until_zeroed) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 3), -1, 1, 9), *w = rgt_param(RG_SHAPE(2, 3), -1, 1, 10);
    float g1[6], g2[6];
    for (int rep = 0; rep < 2; rep++) {
        rg_scope_begin();
        rg_backward(rg_sum(rg_linear(x, w, NULL)));
        rg_tensor_copy_to_host(w->grad, rep == 0 ? g1 : g2);
        rg_scope_end();
    }
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(g2[i], 2 * g1[i], 1e-5, "grad %d accumulates", i);
    rg_zero_grad(w);
    rg_tensor_copy_to_host(w->grad, g2);
    for (int i = 0; i < 6; i++) cr_assert_eq(g2[i], 0.0f);
    rgt_free_all(2, (rg_tensor *[]){x, w});
}

Test(tensor_linear, shape_mismatch_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 3), -1, 1, 1),
              *w = rgt_uniform(RG_SHAPE(2, 5), -1, 1, 2);
    rg_scope_begin();
    rg_linear(x, w, NULL);
}

static rg_tensor *f_matmul_self(rg_tensor *const *in, void *ctx) {
    return rg_matmul(in[0], rg_matmul(in[0], in[0])); /* a^3: a feeds three products */
}

Test(tensor_matmul, same_input_twice_accumulates_gradients) {
    rg_tensor *a = rgt_param(RG_SHAPE(4, 4), -1, 1, 11);
    rgt_assert_gradcheck(f_matmul_self, NULL, 1, &a, NULL);
    rg_tensor_free(a);
}

Test(tensor_matmul, empty_inner_dimension_gives_zeros) {
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(3, 0), RG_CPU),
              *b = rg_tensor_new(RG_F32, RG_SHAPE(0, 4), RG_CPU);
    rg_scope_begin();
    rg_tensor *y = rg_matmul(a, b);
    cr_assert_eq(y->numel, 12);
    for (int i = 0; i < 12; i++) cr_assert_eq(rg_tensor_f32(y)[i], 0.0f, "element %d", i);
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){a, b});
}

static rg_tensor *f_linear_nobias(rg_tensor *const *in, void *ctx) {
    return rg_linear(in[0], in[1], NULL);
}

Test(tensor_linear, gradients_without_bias_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 7), -1, 1, 12), *w = rgt_param(RG_SHAPE(3, 7), -1, 1, 13);
    rgt_assert_gradcheck(f_linear_nobias, NULL, 2, (rg_tensor *[]){x, w}, NULL);
    rgt_free_all(2, (rg_tensor *[]){x, w});
}

Test(tensor_linear, bias_gradient_sums_over_a_large_batch) {
    rg_set_num_threads(2);
    int64_t n = 4099, in = 3, out = 17;
    rg_tensor *x = rgt_uniform(RG_SHAPE(n, in), -1, 1, 14),
              *w = rgt_param(RG_SHAPE(out, in), -1, 1, 15);
    rg_tensor *b = rgt_param(RG_SHAPE(out), -1, 1, 16),
              *r = rgt_uniform(RG_SHAPE(n, out), -1, 1, 17);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(rg_linear(x, w, b), r)));
    const float *rp = rg_tensor_f32(r), *gb = rg_tensor_f32(b->grad);
    for (int64_t o = 0; o < out; o++) {
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += rp[i * out + o];
        cr_assert_float_eq(gb[o], s, 1e-3, "dbias[%lld] = %g, want %g", (long long)o, gb[o], s);
    }
    rg_scope_end();
    rgt_free_all(4, (rg_tensor *[]){x, w, b, r});
}

Test(tensor_matmul, shape_mismatch_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1),
              *b = rgt_uniform(RG_SHAPE(4, 5), -1, 1, 2);
    rg_scope_begin();
    rgt_expect_fatal("matmul: shapes (2,3) and (4,5) do not multiply");
    rg_matmul(a, b);
}

Test(tensor_linear, bias_of_the_wrong_size_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 3), -1, 1, 1),
              *w = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 2);
    rg_tensor *b = rgt_uniform(RG_SHAPE(3), -1, 1, 3);
    rg_scope_begin();
    rgt_expect_fatal("linear: bias (3) for weight (2,3)");
    rg_linear(x, w, b);
}

/* rg_cpu_gemm cuts a large product into one slice of C per thread (tensor/cpu/gemm.c): by columns
 * when C is wide, by rows when it is tall, each transpose of a and b, slices not a multiple of
 * the thread count, strides wider than the matrices; alpha and beta, with beta 0 never reading C
 * (it holds NaN); fc1's backward shapes (k 128, n 9216, here 1031). */
Test(tensor_matmul, gemm_shared_over_threads_matches_naive) {
    const int64_t shapes[][3] = {
        {40, 3000, 37}, {3001, 37, 41}, {130, 130, 200}, {29, 263, 300}, {128, 1031, 128}};
    const float scales[][2] = {{0.5f, 0.25f}, {1.0f, 0.0f}, {1.0f, 1.0f}}; /* alpha, beta */
    int threads_before = rg_num_threads();
    for (int nt = 1; nt <= 3; nt++) {
        rg_set_num_threads(nt);
        for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int sc = 0; sc < 3; sc++) {
                        float alpha = scales[sc][0], beta = scales[sc][1];
                        int64_t m = shapes[t][0], n = shapes[t][1], k = shapes[t][2];
                        int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
                        int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc;
                        float *a = malloc((size_t)na * sizeof(float)),
                              *b = malloc((size_t)nb * sizeof(float));
                        float *c = malloc((size_t)nc * sizeof(float)),
                              *want = malloc((size_t)nc * sizeof(float));
                        cr_assert(a && b && c && want);
                        for (int64_t i = 0; i < na; i++)
                            a[i] = (float)((i * 7919) % 201 - 100) / 100.0f;
                        for (int64_t i = 0; i < nb; i++)
                            b[i] = (float)((i * 104729) % 199 - 99) / 99.0f;
                        for (int64_t i = 0; i < nc; i++) c[i] = want[i] = (float)(i % 13) - 6.0f;
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < n; j++) {
                                double s = 0;
                                for (int64_t p = 0; p < k; p++)
                                    s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                                         (tb ? b[j * ldb + p] : b[p * ldb + j]);
                                want[i * ldc + j] = (float)(alpha * s + beta * want[i * ldc + j]);
                            }
                        if (beta == 0.0f) /* beta 0 never reads C, as BLAS */
                            for (int64_t i = 0; i < m; i++)
                                for (int64_t j = 0; j < n; j++) c[i * ldc + j] = NAN;
                        rg_cpu_backend.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                        char what[96];
                        snprintf(what, sizeof what,
                                 "gemm %lldx%lldx%lld ta %d tb %d alpha %g beta %g", (long long)m,
                                 (long long)n, (long long)k, ta, tb, alpha, beta);
                        rgt_assert_close(c, want, nc, 1e-4, 1e-4, what);
                        free(a), free(b), free(c), free(want);
                    }
    }
    rg_set_num_threads(threads_before);
}
