/* Tests for rg_backward: repeated backward in one scope, misuse that must stop (a loss from another
 * scope, a loss that needs no gradient), branches that do not lead to the loss, and hooks of
 * parameters whose only consumer did not contribute. */
#include "rgtest.h"

Test(autograd_backward, twice_in_one_scope_recomputes_intermediates_and_accumulates_leaves) {
    /* h = relu(w * x) (all positive), L = sum(h * h):  dL/dh = 2h,  dL/dw = 2h x */
    rg_tensor *w = rgt_param(RG_SHAPE(2, 5), 0.5f, 1, 1),
              *x = rgt_uniform(RG_SHAPE(2, 5), 0.5f, 1, 2);
    rg_scope_begin();
    rg_tensor *h = rg_relu(rg_mul(w, x));
    rg_tensor *loss = rg_sum(rg_mul(h, h));
    const float *hp = rg_tensor_f32(h), *xp = rg_tensor_f32(x);
    for (int rep = 1; rep <= 3; rep++) {
        rg_backward(loss);
        const float *dh = rg_tensor_f32(h->grad), *dw = rg_tensor_f32(w->grad);
        for (int i = 0; i < 10; i++) {
            cr_assert_float_eq(dh[i], 2 * hp[i], 1e-6, "backward %d: dh[%d] = %g, not counted once",
                               rep, i, dh[i]);
            cr_assert_float_eq(dw[i], rep * 2 * hp[i] * xp[i], 1e-5, "backward %d: dw[%d] = %g",
                               rep, i, dw[i]);
        }
        cr_assert_eq(rg_tensor_item(loss->grad), 1.0f);
    }
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){w, x});
}

Test(autograd_backward, backward_of_an_earlier_loss_in_the_same_scope) {
    /* two losses on one tape; backward of the first ignores the ops after it */
    rg_tensor *w = rgt_param(RG_SHAPE(4), -1, 1, 3);
    rg_scope_begin();
    rg_tensor *l1 = rg_sum(rg_scale(w, 3.0f));
    rg_tensor *l2 = rg_sum(rg_scale(w, 5.0f));
    rg_backward(l2);
    rg_backward(l1);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(rg_tensor_f32(w->grad)[i], 8.0f, 1e-6);
    rg_scope_end();
    rg_tensor_free(w);
}

Test(autograd_backward, gradients_of_scoped_leaves_live_in_the_scope) {
    rg_scope_begin();
    rg_tensor *x = rg_tensor_zeros(RG_F32, RG_SHAPE(3), RG_CPU);
    rg_tensor_fill_(x, 2.0f);
    rg_tensor_set_requires_grad(x, true);
    rg_backward(rg_sum(rg_mul(x, x)));
    cr_assert(x->grad->flags & RG_TENSOR_SCOPED);
    cr_assert_eq(rg_tensor_f32(x->grad)[1], 4.0f);
    rg_scope_end();
}

/* A reshape's input gradient is its output gradient: as a view of it (no copy) where nothing else
 * adds to the input's gradient, as a copy where something does, and the values are right both
 * ways, also after a second backward in the same scope. */
Test(autograd_backward, a_reshape_hands_its_gradient_back_without_a_copy_when_it_can) {
    rg_tensor *w = rgt_param(RG_SHAPE(2, 3, 2), -1, 1, 5);
    const float *wp = rg_tensor_f32(w);
    rg_scope_begin();
    /* h = 3w (an op result); y = flatten(h); L = sum(y * y): dL/dy = 2y, dL/dh = 2h, dL/dw = 6h */
    rg_tensor *h = rg_scale(w, 3.0f), *y = rg_flatten(h);
    rg_tensor *loss = rg_sum(rg_mul(y, y));
    for (int rep = 1; rep <= 2; rep++) {
        rg_backward(loss);
        cr_assert(h->grad && y->grad);
        cr_assert_eq(h->grad->data, y->grad->data, "backward %d: h's gradient was copied", rep);
        cr_assert_eq(h->grad->ndim, 3);
        cr_assert_eq(h->grad->shape[2], 2);
        for (int i = 0; i < 12; i++) {
            cr_assert_float_eq(rg_tensor_f32(h->grad)[i], 6.0f * wp[i], 1e-5);
            cr_assert_float_eq(rg_tensor_f32(w->grad)[i], rep * 18.0f * wp[i], 1e-4);
        }
    }
    rg_scope_end();
    rg_scope_begin();
    /* h consumed by the reshape and by an op between the two: L = sum(y * y) + sum(2h), so
     * dL/dh = 2h + 2, and y's gradient stays 2y = 2h */
    h = rg_scale(w, 3.0f);
    rg_tensor *side = rg_sum(rg_scale(h, 2.0f));
    y = rg_flatten(h);
    loss = rg_add(rg_sum(rg_mul(y, y)), side);
    rg_backward(loss);
    cr_assert_neq(h->grad->data, y->grad->data, "h's gradient shares y's though another op adds");
    for (int i = 0; i < 12; i++) {
        cr_assert_float_eq(rg_tensor_f32(h->grad)[i], 6.0f * wp[i] + 2.0f, 1e-5);
        cr_assert_float_eq(rg_tensor_f32(y->grad)[i], 6.0f * wp[i], 1e-5);
    }
    rg_scope_end();
    rg_tensor_free(w);
}

/* ---- misuse ---- */

Test(autograd_backward, loss_from_an_outer_scope_stops, .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 4);
    rg_scope_begin();
    rg_tensor *loss = rg_sum(w);
    rg_scope_begin();
    rg_scale(w, 2.0f); /* the inner tape is not empty */
    rgt_expect_fatal("backward: the loss was computed in another step scope");
    rg_backward(loss);
}

Test(autograd_backward, loss_from_an_outer_scope_stops_with_an_empty_inner_tape,
     .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 4);
    rg_scope_begin();
    rg_tensor *loss = rg_sum(w);
    rg_scope_begin();
    rgt_expect_fatal("backward: the loss was computed in another step scope");
    rg_backward(loss);
}

Test(autograd_backward, loss_that_needs_no_gradient_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(3), -1, 1, 5); /* requires no gradient */
    rg_scope_begin();
    rgt_expect_fatal("backward: the loss does not depend on anything that requires a gradient");
    rg_backward(rg_sum(x));
}

Test(autograd_backward, loss_computed_in_no_grad_mode_stops, .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 6);
    rg_scope_begin();
    rg_no_grad_begin();
    rg_tensor *loss = rg_sum(w);
    rg_no_grad_end();
    rgt_expect_fatal("(or it was computed in no-grad mode)");
    rg_backward(loss);
}

Test(autograd_backward, loss_with_many_elements_stops, .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(2, 3), -1, 1, 7);
    rg_scope_begin();
    rgt_expect_fatal("backward: loss must be one float32 element, got 6 elements of float32");
    rg_backward(rg_scale(w, 2.0f));
}

Test(autograd_backward, no_grad_end_without_begin_stops, .signal = SIGABRT) {
    rgt_expect_fatal("rg_no_grad_end without rg_no_grad_begin");
    rg_no_grad_end();
}

Test(autograd_backward, no_grad_mode_nests) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 8);
    rg_scope_begin();
    rg_no_grad_begin();
    rg_no_grad_begin();
    rg_no_grad_end();
    cr_assert(!rg_grad_enabled());
    cr_assert_null(rg_scale(w, 2)->grad_fn);
    rg_no_grad_end();
    cr_assert(rg_grad_enabled());
    cr_assert_not_null(rg_scale(w, 2)->grad_fn);
    rg_scope_end();
    rg_tensor_free(w);
}

/* ---- unused branches and hooks ---- */

typedef struct {
    int fired;
    bool had_grad;
    float first;
} hook_log;

static void on_ready(rg_tensor *p, void *ctx) {
    hook_log *l = ctx;
    l->fired++;
    l->had_grad = p->grad != NULL;
    if (p->grad) l->first = rg_tensor_f32(p->grad)[0]; /* what a DDP reducer would read */
}

Test(autograd_backward, unused_branches_do_not_break_gradients_or_hooks) {
    rg_tensor *w = rgt_param(RG_SHAPE(4), 0.5f, 1, 9), *x = rgt_uniform(RG_SHAPE(4), -1, 1, 10);
    hook_log log = {0};
    rg_grad_hook_add(w, on_ready, &log);
    for (int step = 1; step <= 2; step++) {
        rg_scope_begin();
        rg_tensor *dead = rg_relu(rg_scale(w, 2.0f)); /* a branch before the loss, never used */
        rg_tensor *loss = rg_sum(rg_mul(w, x));
        rg_tensor *after = rg_sum(rg_mul(dead, w)); /* ops after the loss are not walked */
        rg_backward(loss);
        cr_assert_eq(log.fired, step, "step %d: the hook fired %d times", step, log.fired);
        for (int i = 0; i < 4; i++)
            cr_assert_float_eq(rg_tensor_f32(w->grad)[i], rg_tensor_f32(x)[i], 1e-6, "element %d",
                               i);
        cr_assert_null(dead->grad, "an op that did not lead to the loss gets no gradient");
        cr_assert_null(after->grad);
        rg_zero_grad(w);
        rg_scope_end();
    }
    rgt_free_all(2, (rg_tensor *[]){w, x});
}

Test(autograd_backward, hooks_fire_only_for_parameters_the_loss_depends_on) {
    rg_tensor *used = rgt_param(RG_SHAPE(3), -1, 1, 11),
              *unused = rgt_param(RG_SHAPE(3), -1, 1, 12);
    hook_log lu = {0}, ln = {0};
    rg_grad_hook_add(used, on_ready, &lu);
    rg_grad_hook_add(unused, on_ready, &ln);
    for (int step = 1; step <= 2; step++) {
        rg_scope_begin();
        rg_tensor *side = rg_scale(unused, 3.0f); /* consumed, but not by the loss */
        rg_backward(rg_sum(rg_scale(used, 2.0f)));
        (void)side;
        rg_scope_end();
        cr_assert_eq(lu.fired, step);
        cr_assert_eq(ln.fired, 0, "step %d: a parameter the loss does not depend on fired %d "
                     "times", step, ln.fired);
        cr_assert_null(unused->grad, "no gradient was made for it");
        cr_assert_eq(lu.first, 2.0f * step, "the used parameter's gradient accumulates");
    }
    rgt_free_all(2, (rg_tensor *[]){used, unused});
}

Test(autograd_backward, a_parameter_with_an_unused_and_a_used_consumer_fires_once_after_both) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 13);
    hook_log log = {0};
    rg_grad_hook_add(w, on_ready, &log);
    rg_scope_begin();
    rg_tensor *a = rg_scale(w, 3.0f);    /* node 0: used */
    rg_tensor *dead = rg_scale(w, 7.0f); /* node 1: unused */
    rg_backward(rg_sum(a));
    (void)dead;
    cr_assert_eq(log.fired, 1);
    cr_assert_eq(log.first, 3.0f, "the hook saw the complete gradient");
    rg_scope_end();
    rg_tensor_free(w);
}

/* ---- tensors from an outer scope ---- */

Test(autograd_backward, intermediate_from_an_outer_scope_needs_a_gradient_stops,
     .signal = SIGABRT) {
    /* h lives in the outer scope; a gradient made for it in the inner scope would dangle after
     * the inner rg_scope_end, and the next backward would accumulate into freed memory */
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 14), *x = rgt_param(RG_SHAPE(3), -1, 1, 15);
    rg_scope_begin();
    rg_tensor *h = rg_scale(w, 2.0f);
    rg_scope_begin();
    rgt_expect_fatal("was made in an outer step scope");
    rg_backward(rg_sum(rg_mul(h, x)));
}

Test(autograd_backward, scoped_leaf_from_an_outer_scope_needs_a_gradient_stops, .signal = SIGABRT) {
    rg_scope_begin();
    rg_tensor *x = rg_tensor_zeros(RG_F32, RG_SHAPE(3), RG_CPU);
    rg_tensor_set_requires_grad(x, true);
    rg_scope_begin();
    rgt_expect_fatal("was made in an outer step scope");
    rg_backward(rg_sum(rg_scale(x, 2.0f)));
}

Test(autograd_backward, outer_scope_tensors_without_gradients_are_fine_in_an_inner_backward) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 16);
    rg_scope_begin();
    rg_tensor *x;
    rg_no_grad_begin();
    x = rg_scale(w, 2.0f); /* no gradient wanted: recorded nothing */
    rg_no_grad_end();
    for (int rep = 1; rep <= 2; rep++) {
        rg_scope_begin();
        rg_backward(rg_sum(rg_mul(w, x)));
        rg_scope_end();
        for (int i = 0; i < 3; i++)
            cr_assert_float_eq(rg_tensor_f32(w->grad)[i], rep * rg_tensor_f32(x)[i], 1e-6);
    }
    rg_scope_end();
    rg_tensor_free(w);
}

/* y = w * x elementwise, seeded with dy: dw = x * dy, and a hook on w fires once. */
static void count_fire(rg_tensor *param, void *ctx) { ++*(int *)ctx; }

Test(autograd_backward, backward_grad_seeds_a_non_scalar_output_with_the_given_gradient) {
    rg_tensor *w = rgt_param(RG_SHAPE(2, 3), -1, 1, 21);
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 22);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 23);
    int fired = 0;
    rg_grad_hook_add(w, count_fire, &fired);
    rg_scope_begin();
    rg_backward_grad(rg_mul(w, x), dy);
    rg_scope_end();
    cr_assert_eq(fired, 1);
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(rg_tensor_f32(w->grad)[i], rg_tensor_f32(x)[i] * rg_tensor_f32(dy)[i],
                           1e-6);
    rg_tensor *all[] = {w, x, dy};
    rgt_free_all(3, all);
}

Test(autograd_backward, backward_grad_with_a_gradient_of_another_shape_stops, .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(2, 3), -1, 1, 21);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(3, 2), -1, 1, 23);
    rg_scope_begin();
    rgt_expect_fatal("must match the output in shape");
    rg_backward_grad(rg_scale(w, 2.0f), dy);
}
