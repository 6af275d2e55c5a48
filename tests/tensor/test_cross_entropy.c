/* Tests for the fused cross-entropy loss: loss and gradient against a double-precision reference,
 * stability for huge logits, central differences, and labels that must be checked. */
#include "rgtest.h"

#include <math.h>

/* loss = mean_n (logsumexp(z_n) - z_n[y_n]);  dz = (softmax(z) - onehot(y)) / N, in double */
static double reference(int64_t n, int64_t c, const float *z, const int64_t *y, double *dz) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *zr = z + i * c;
        double m = zr[0], s = 0;
        for (int64_t j = 1; j < c; j++) m = fmax(m, zr[j]);
        for (int64_t j = 0; j < c; j++) s += exp((double)zr[j] - m);
        double lse = m + log(s);
        total += lse - zr[y[i]];
        for (int64_t j = 0; j < c; j++)
            dz[i * c + j] = (exp((double)zr[j] - lse) - (j == y[i] ? 1.0 : 0.0)) / (double)n;
    }
    return total / (double)n;
}

static rg_tensor *labels_new(int64_t n, int64_t c, uint64_t seed) {
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(n), RG_CPU);
    int64_t *yp = y->data;
    for (int64_t i = 0; i < n; i++) yp[i] = rgt_randint(0, c - 1, seed, (uint64_t)i);
    return y;
}

/* Runs loss * upstream and backward; checks the loss and dlogits against the reference. */
static void check(rg_tensor *logits, rg_tensor *labels, float upstream, double atol, double rtol) {
    int64_t n = logits->shape[0], c = logits->shape[1];
    double *dz = malloc((size_t)(n * c) * sizeof *dz);
    double want = reference(n, c, rg_tensor_f32(logits), labels->data, dz);
    rg_zero_grad(logits);
    rg_scope_begin();
    rg_tensor *loss = rg_cross_entropy(logits, labels);
    cr_assert_eq(loss->ndim, 0, "the loss has shape ()");
    float got = rg_tensor_item(loss);
    cr_assert(isfinite(got), "(%lld,%lld): loss %g", (long long)n, (long long)c, got);
    cr_assert(fabs(got - want) <= atol + rtol * fabs(want), "(%lld,%lld): loss %.9g, want %.9g",
              (long long)n, (long long)c, got, want);
    rg_backward(rg_scale(loss, upstream));
    const float *g = rg_tensor_f32(logits->grad);
    for (int64_t i = 0; i < n * c; i++) {
        double w = upstream * dz[i];
        cr_assert(isfinite(g[i]), "dlogits[%lld] = %g", (long long)i, g[i]);
        cr_assert(fabs(g[i] - w) <= 1e-6 + 1e-4 * fabs(w),
                  "(%lld,%lld): dlogits[%lld] %.9g, want %.9g", (long long)n, (long long)c,
                  (long long)i, g[i], w);
    }
    rg_scope_end();
    free(dz);
}

Test(tensor_cross_entropy, matches_double_reference_on_odd_shapes) {
    rg_set_num_threads(2); /* (33,1001) takes the multithreaded path */
    int64_t shapes[][2] = {{1, 1}, {1, 7}, {5, 3}, {17, 10}, {33, 1001}};
    for (int k = 0; k < 5; k++) {
        int64_t n = shapes[k][0], c = shapes[k][1];
        rg_tensor *z = rgt_param(RG_SHAPE(n, c), -4, 4, 1 + (uint64_t)k);
        rg_tensor *y = labels_new(n, c, 10 + (uint64_t)k);
        check(z, y, k % 2 ? 1.0f : -2.5f, 1e-6, 1e-6);
        rgt_free_all(2, (rg_tensor *[]){z, y});
    }
}

Test(tensor_cross_entropy, is_stable_for_logits_around_1e4) {
    float v[] = {1e4f,  1e4f - 1, -1e4f,    0,           /* label 0: the largest */
                 -1e4f, 1e4f,     1e4f - 3, 1e4f - 0.5f, /* label 0: the smallest, loss ~2e4 */
                 -1e4f, -1e4f,    -1e4f,    -1e4f,       /* all equal and very negative: log 4 */
                 1e4f,  -1e4f,    1e4f,     -1e4f};      /* a tie at the top */
    int64_t lab[] = {0, 0, 2, 2};
    rg_tensor *z = rgt_tensor(RG_SHAPE(4, 4), v);
    rg_tensor_set_requires_grad(z, true);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(4), RG_CPU);
    rg_tensor_copy_from_host(y, lab);
    check(z, y, 1.0f, 0, 1e-6);
    rgt_free_all(2, (rg_tensor *[]){z, y});
}

Test(tensor_cross_entropy, uniform_logits_give_log_c) {
    rg_tensor *z = rg_tensor_new(RG_F32, RG_SHAPE(3, 10), RG_CPU);
    rg_tensor_fill_(z, 7.0f);
    rg_tensor *y = labels_new(3, 10, 1);
    rg_scope_begin();
    cr_assert_float_eq(rg_tensor_item(rg_cross_entropy(z, y)), log(10.0), 1e-6);
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){z, y});
}

typedef struct {
    rg_tensor *labels;
} ce_ctx;

static rg_tensor *f_ce(rg_tensor *const *in, void *ctx) {
    return rg_cross_entropy(in[0], ((ce_ctx *)ctx)->labels);
}

Test(tensor_cross_entropy, gradient_matches_finite_differences) {
    rg_tensor *z = rgt_param(RG_SHAPE(6, 5), -2, 2, 3);
    ce_ctx c = {labels_new(6, 5, 4)};
    rgt_assert_gradcheck(f_ce, &c, 1, &z, NULL);
    rgt_free_all(2, (rg_tensor *[]){z, c.labels});
}

static rg_tensor *f_ce_linear(rg_tensor *const *in, void *ctx) {
    return rg_cross_entropy(rg_linear(in[0], in[1], in[2]), ((ce_ctx *)ctx)->labels);
}

Test(tensor_cross_entropy, gradient_through_a_linear_layer_matches_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(7, 4), -1, 1, 5), *w = rgt_param(RG_SHAPE(3, 4), -1, 1, 6);
    rg_tensor *b = rgt_param(RG_SHAPE(3), -1, 1, 7);
    ce_ctx c = {labels_new(7, 3, 8)};
    rgt_assert_gradcheck(f_ce_linear, &c, 3, (rg_tensor *[]){x, w, b}, NULL);
    rgt_free_all(4, (rg_tensor *[]){x, w, b, c.labels});
}

/* ---- misuse ---- */

Test(tensor_cross_entropy, label_equal_to_c_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1);
    rg_tensor *y = labels_new(3, 4, 2);
    ((int64_t *)y->data)[2] = 4;
    rg_scope_begin();
    rgt_expect_fatal("cross_entropy: label 4 at row 2 is outside [0, 4)");
    rg_cross_entropy(z, y);
}

Test(tensor_cross_entropy, negative_label_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1);
    rg_tensor *y = labels_new(3, 4, 2);
    ((int64_t *)y->data)[0] = -1;
    rg_scope_begin();
    rgt_expect_fatal("cross_entropy: label -1 at row 0 is outside [0, 4)");
    rg_cross_entropy(z, y);
}

Test(tensor_cross_entropy, int32_labels_stop_with_a_message, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1);
    rg_tensor *y = rg_tensor_new(RG_I32, RG_SHAPE(3), RG_CPU);
    rg_scope_begin();
    rgt_expect_fatal("cross_entropy: labels must be int64 (N) for logits (3,4), got int32 (3)");
    rg_cross_entropy(z, y);
}

Test(tensor_cross_entropy, float_labels_stop, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1);
    rg_tensor *y = rgt_uniform(RG_SHAPE(3), 0, 3, 2);
    rg_scope_begin();
    rgt_expect_fatal("got float32 (3)");
    rg_cross_entropy(z, y);
}

Test(tensor_cross_entropy, label_count_mismatch_stops, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1);
    rg_tensor *y = labels_new(4, 4, 2);
    rg_scope_begin();
    rgt_expect_fatal("labels must be int64 (N) for logits (3,4), got int64 (4)");
    rg_cross_entropy(z, y);
}

Test(tensor_cross_entropy, logits_that_are_not_2d_stop, .signal = SIGABRT) {
    rg_tensor *z = rgt_uniform(RG_SHAPE(3, 4, 2), -1, 1, 1);
    rg_tensor *y = labels_new(3, 4, 2);
    rg_scope_begin();
    rgt_expect_fatal("cross_entropy: logits (N,C) must have 2 dimensions, got (3,4,2)");
    rg_cross_entropy(z, y);
}

/* Label smoothing against PyTorch's F.cross_entropy(..., label_smoothing=0.1)
 * (tests/data/nn/bn_ref.safetensors, scripts/make_reference_bn.py), and by gradient check. */
#include "tests/models/nn_ref.h"

static rg_tensor *f_smooth(rg_tensor *const *in, void *ctx) {
    return rg_cross_entropy_smooth(in[0], ctx, 0.1f);
}

Test(tensor_cross_entropy, label_smoothing_matches_pytorch) {
    rg_safetensors *f = nn_ref_open("bn_ref.safetensors");
    float *z = nn_ref_read(f, "ce.logits", "F32", 35), *loss = nn_ref_read(f, "ce.loss", "F32", 1);
    float *dz = nn_ref_read(f, "ce.dlogits", "F32", 35);
    int64_t *lab = nn_ref_read(f, "ce.labels", "I64", 5);
    rg_tensor *logits = rgt_tensor(RG_SHAPE(5, 7), z);
    rg_tensor_set_requires_grad(logits, true);
    rg_tensor *labels = rg_tensor_new(RG_I64, RG_SHAPE(5), RG_CPU);
    rg_tensor_copy_from_host(labels, lab);
    rg_scope_begin();
    rg_tensor *l = rg_cross_entropy_smooth(logits, labels, 0.1f);
    cr_assert_float_eq(rg_tensor_item(l), loss[0], 1e-5, "loss %g, torch %g",
                       (double)rg_tensor_item(l), (double)loss[0]);
    rg_tensor *plain = rg_cross_entropy(logits, labels);
    cr_assert(fabsf(rg_tensor_item(plain) - loss[0]) > 1e-3, "smoothing changes the loss");
    rg_backward(l);
    rgt_assert_close(rg_tensor_f32(logits->grad), dz, 35, 1e-6, 1e-5, "dlogits");
    rg_scope_end();
    rgt_assert_gradcheck(f_smooth, labels, 1, &logits, NULL);
    free(z), free(loss), free(dz), free(lab);
    rgt_free_all(2, (rg_tensor *[]){logits, labels});
    rg_safetensors_close(f);
}
