/* Tests for the gradient checker itself: it must fail for a wrong backward (a custom tape node
 * whose gradient is twice the right one, or one that overwrites instead of accumulating), pass for
 * the right one, and leave its inputs as it found them. */
#include "rgtest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/backend_impl.h"

/* y = x^2, recorded by hand with rg_tape_record. factor scales the gradient backward returns:
 * 1 is right, 2 is the deliberate bug. overwrite ignores beta (the accumulation bug). */
typedef struct {
    float factor;
    bool overwrite;
} square_ctx;

static void square_backward(rg_node *n) { /* dx = beta*dx + factor * 2x dy */
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    float beta = rg_grad_begin(x);
    if (n->iattr[0]) beta = 0.0f;
    const float *xp = x->data, *g = dy->data;
    float *dx = x->grad->data;
    for (int64_t i = 0; i < x->numel; i++)
        dx[i] = n->fattr[0] * 2 * xp[i] * g[i] + (beta == 0.0f ? 0.0f : beta * dx[i]);
}

static rg_tensor *custom_square(rg_tensor *x, const square_ctx *c) {
    rg_tensor *y = rg_tensor_empty_like(x);
    const float *xp = x->data;
    float *yp = y->data;
    for (int64_t i = 0; i < x->numel; i++) yp[i] = xp[i] * xp[i];
    rg_node *n = rg_tape_record("custom_square", square_backward, y, 1, &x);
    if (n) n->fattr[0] = c->factor, n->iattr[0] = c->overwrite;
    return y;
}

static rg_tensor *f_square(rg_tensor *const *in, void *ctx) {
    return custom_square(in[0], ctx);
}

Test(autograd_gradcheck, passes_for_a_correct_custom_op) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 3), -1, 1, 1);
    square_ctx c = {1.0f, false};
    rgt_assert_gradcheck(f_square, &c, 1, &x, NULL);
    rg_tensor_free(x);
}

Test(autograd_gradcheck, fails_for_a_backward_twice_the_right_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 3), 0.5f, 1, 2); /* away from 0, where 2x and 4x meet */
    square_ctx c = {2.0f, false};
    rg_status s = rg_gradcheck(f_square, &c, 1, &x, NULL);
    cr_assert_eq(s, RG_EMISMATCH, "gradcheck returned %s for a wrong gradient", rg_status_name(s));
    const char *msg = rg_last_error();
    cr_assert(strstr(msg, "gradcheck: input 0 element 0: analytic") && strstr(msg, "numeric"),
              "message: %s", msg);
    /* the message's numbers are the wrong and the right gradient: analytic = 2 * numeric */
    double analytic, numeric;
    cr_assert_eq(sscanf(strstr(msg, "analytic"), "analytic %lf, numeric %lf", &analytic, &numeric),
                 2, "%s", msg);
    cr_assert_float_eq(analytic, 2 * numeric, 1e-3 * fabs(numeric), "%s", msg);
    rg_tensor_free(x);
}

static rg_tensor *f_square_reused(rg_tensor *const *in, void *ctx) {
    /* x feeds the custom op first, so backward reaches it after the scale wrote x's gradient:
     * the custom backward must add to it */
    rg_tensor *sq = custom_square(in[0], ctx);
    return rg_add(sq, rg_scale(in[0], 3.0f));
}

Test(autograd_gradcheck, fails_for_a_backward_that_overwrites_instead_of_accumulating) {
    rg_tensor *x = rgt_param(RG_SHAPE(7), -1, 1, 3);
    square_ctx ok = {1.0f, false}, bad = {1.0f, true};
    rgt_assert_gradcheck(f_square_reused, &ok, 1, &x, NULL);
    cr_assert_eq(rg_gradcheck(f_square_reused, &bad, 1, &x, NULL), RG_EMISMATCH);
    rg_tensor_free(x);
}

static rg_tensor *f_ignores_b(rg_tensor *const *in, void *ctx) {
    return rg_scale(in[0], 2.0f);
}

Test(autograd_gradcheck, checks_only_inputs_that_require_a_gradient) {
    rg_tensor *a = rgt_param(RG_SHAPE(4), -1, 1, 4), *b = rgt_param(RG_SHAPE(4), -1, 1, 5);
    rg_tensor *c = rgt_uniform(RG_SHAPE(4), -1, 1, 6);
    /* b requires a gradient the output ignores: its gradient is zero, and so is the numeric one */
    rgt_assert_gradcheck(f_ignores_b, NULL, 3, (rg_tensor *[]){a, b, c}, NULL);
    rgt_free_all(3, (rg_tensor *[]){a, b, c});
}

Test(autograd_gradcheck, leaves_its_inputs_unchanged) {
    rg_tensor *x = rgt_param(RG_SHAPE(9, 5), -1, 1, 7);
    float before[45];
    rg_tensor_copy_to_host(x, before);
    square_ctx c = {1.0f, false};
    rgt_assert_gradcheck(f_square, &c, 1, &x, &(rg_gradcheck_opts){.max_checks = 1000});
    cr_assert(memcmp(before, rg_tensor_f32(x), sizeof before) == 0, "inputs restored bit for bit");
    cr_assert_eq(rg_scope_depth(), 0, "gradcheck closed its scopes");
    cr_assert(rg_grad_enabled(), "gradcheck left no-grad mode");
    rg_tensor_free(x);
}

Test(autograd_gradcheck, inside_a_scope_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_param(RG_SHAPE(3), -1, 1, 8);
    square_ctx c = {1.0f, false};
    rg_scope_begin();
    rgt_expect_fatal("gradcheck: call it outside any step scope");
    RG_IGNORE(rg_gradcheck(f_square, &c, 1, &x, NULL)); /* stops before returning */
}
