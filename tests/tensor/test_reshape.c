/* Tests for reshape and flatten: they are views (no copy), -1 is inferred, bad shapes stop with a
 * message, and gradients flow back in the input's shape. */
#include "rgtest.h"

Test(tensor_reshape, is_a_view_with_the_new_shape) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 5), -1, 1, 1);
    rg_scope_begin();
    rg_tensor *y = rg_reshape(x, RG_SHAPE(5, 6));
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 5);
    cr_assert_eq(y->shape[1], 6);
    cr_assert_eq(y->numel, 30);
    cr_assert_eq(y->data, x->data, "reshape shares the input's data");
    cr_assert(!(y->flags & RG_TENSOR_OWNS_DATA), "a view does not own its data");
    rg_tensor_f32(x)[7] = 42.0f; /* writes through either name are seen by both */
    cr_assert_eq(rg_tensor_f32(y)[7], 42.0f);
    rg_scope_end();
    float v = rg_tensor_f32(x)[7];
    cr_assert_eq(v, 42.0f, "the input's data survives the view's scope");
    rg_tensor_free(x);
}

Test(tensor_reshape, infers_one_minus_one) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 3, 5), -1, 1, 2);
    rg_scope_begin();
    rg_tensor *a = rg_reshape(x, RG_SHAPE(-1, 5));
    cr_assert_eq(a->shape[0], 12);
    cr_assert_eq(a->shape[1], 5);
    rg_tensor *b = rg_reshape(x, RG_SHAPE(2, -1, 3));
    cr_assert_eq(b->shape[1], 10);
    rg_tensor *c = rg_reshape(x, RG_SHAPE(-1));
    cr_assert_eq(c->ndim, 1);
    cr_assert_eq(c->shape[0], 60);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reshape, scalar_and_one_element_shapes) {
    float v = 3.0f;
    rg_tensor *x = rgt_tensor(RG_SHAPE(1, 1), &v);
    rg_scope_begin();
    rg_tensor *s = rg_reshape(x, 0, NULL);
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(rg_tensor_item(s), 3.0f);
    rg_tensor *t = rg_reshape(s, RG_SHAPE(-1));
    cr_assert_eq(t->ndim, 1);
    cr_assert_eq(t->shape[0], 1);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reshape, flatten_keeps_the_batch_dim_in_chw_order) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(3, 2, 5, 7), -1, 1, 3);
    rg_scope_begin();
    rg_tensor *y = rg_flatten(x);
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 3);
    cr_assert_eq(y->shape[1], 70);
    cr_assert_eq(y->data, x->data);
    /* y[n, (c*H + h)*W + w] == x[n, c, h, w] */
    const float *xp = rg_tensor_f32(x), *yp = rg_tensor_f32(y);
    cr_assert_eq(yp[1 * 70 + (1 * 5 + 2) * 7 + 3], xp[((1 * 2 + 1) * 5 + 2) * 7 + 3]);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_reshape, gradient_flows_back_in_the_input_shape) {
    rg_tensor *x = rgt_param(RG_SHAPE(2, 3, 4), -1, 1, 4);
    rg_tensor *w = rgt_uniform(RG_SHAPE(4, 6), -1, 1, 5);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(rg_reshape(x, RG_SHAPE(4, -1)), w)));
    cr_assert(rg_tensor_same_shape(x->grad, x));
    const float *g = rg_tensor_f32(x->grad), *wp = rg_tensor_f32(w);
    for (int i = 0; i < 24; i++) cr_assert_eq(g[i], wp[i], "element %d", i);
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){x, w});
}

static rg_tensor *f_reshape(rg_tensor *const *in, void *ctx) {
    /* the reshaped tensor is used twice, so its gradient accumulates before flowing back */
    rg_tensor *y = rg_reshape(in[0], RG_SHAPE(5, -1));
    return rg_mul(rg_flatten(rg_reshape(y, RG_SHAPE(5, 3, 7))), y);
}

Test(tensor_reshape, gradients_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(3, 5, 7), -1, 1, 6);
    rgt_assert_gradcheck(f_reshape, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

/* ---- misuse ---- */

Test(tensor_reshape, element_count_mismatch_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1);
    rg_scope_begin();
    rgt_expect_fatal("view: cannot view (2,3) as (4,2)");
    rg_reshape(x, RG_SHAPE(4, 2));
}

Test(tensor_reshape, minus_one_that_does_not_divide_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1);
    rg_scope_begin();
    rgt_expect_fatal("reshape: cannot infer -1 for (2,3) into 4");
    rg_reshape(x, RG_SHAPE(4, -1));
}

Test(tensor_reshape, two_minus_ones_stop, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1);
    rg_scope_begin();
    rgt_expect_fatal("reshape: more than one -1");
    rg_reshape(x, RG_SHAPE(-1, -1));
}

Test(tensor_reshape, negative_size_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1);
    rg_scope_begin();
    rgt_expect_fatal("reshape: negative size -2");
    rg_reshape(x, RG_SHAPE(-2, -3));
}

Test(tensor_reshape, minus_one_beside_a_zero_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1);
    rg_scope_begin();
    rgt_expect_fatal("reshape: cannot infer -1");
    rg_reshape(x, RG_SHAPE(0, -1));
}

Test(tensor_reshape, flatten_of_an_empty_batch) {
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(0, 3, 4), RG_CPU);
    rg_scope_begin();
    rg_tensor *y = rg_flatten(x);
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 0);
    cr_assert_eq(y->shape[1], 12, "(0,3,4) flattens to (0,12), got (0,%lld)",
                 (long long)y->shape[1]);
    rg_scope_end();
    rg_tensor_free(x);
}
