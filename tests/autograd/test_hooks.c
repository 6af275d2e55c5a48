/* Gradient-ready hooks: each fires exactly once per backward, as soon as the parameter's gradient
 * is final, in reverse order of use; a parameter used twice fires once, after both uses. */
#include "rgtest.h"

typedef struct {
    rg_tensor *order[8];
    int n;
    int nodes_left_at_fire[8];
} log_t;

static void on_ready(rg_tensor *p, void *ctx) {
    log_t *l = ctx;
    cr_assert_lt(l->n, 8);
    cr_assert(p->grad, "gradient exists when the hook fires");
    l->order[l->n++] = p;
}

Test(autograd_hooks, fire_once_in_reverse_order_of_use) {
    rg_tensor *w1 = rgt_param(RG_SHAPE(4, 3), -1, 1, 1), *w2 = rgt_param(RG_SHAPE(2, 4), -1, 1, 2);
    rg_tensor *x = rgt_uniform(RG_SHAPE(5, 3), -1, 1, 3);
    log_t log = {0};
    rg_grad_hook_add(w1, on_ready, &log);
    rg_grad_hook_add(w2, on_ready, &log);
    for (int step = 0; step < 3; step++) {
        log.n = 0;
        rg_scope_begin();
        rg_backward(rg_sum(rg_linear(rg_relu(rg_linear(x, w1, NULL)), w2, NULL)));
        rg_scope_end();
        cr_assert_eq(log.n, 2, "step %d: %d hook calls, want 2", step, log.n);
        cr_assert_eq(log.order[0], w2, "the last layer's gradient is final first");
        cr_assert_eq(log.order[1], w1);
    }
    rgt_free_all(3, (rg_tensor *[]){w1, w2, x});
}

typedef struct {
    rg_tensor *w;
    int fired;
    float grad_at_fire[4];
} twice_t;

static void on_ready_copy(rg_tensor *p, void *ctx) {
    twice_t *t = ctx;
    t->fired++;
    rg_tensor_copy_to_host(p->grad, t->grad_at_fire);
}

Test(autograd_hooks, parameter_used_twice_fires_once_after_both_uses) {
    /* y = sum(w * x) + sum(w * w): dL/dw = x + 2w. The hook must see the complete gradient. */
    rg_tensor *w = rgt_param(RG_SHAPE(4), -1, 1, 4), *x = rgt_uniform(RG_SHAPE(4), -1, 1, 5);
    twice_t t = {.w = w};
    rg_grad_hook_add(w, on_ready_copy, &t);
    rg_scope_begin();
    rg_backward(rg_add(rg_sum(rg_mul(w, x)), rg_sum(rg_mul(w, w))));
    rg_scope_end();
    cr_assert_eq(t.fired, 1);
    const float *wp = rg_tensor_f32(w), *xp = rg_tensor_f32(x);
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(t.grad_at_fire[i], xp[i] + 2 * wp[i], 1e-5, "element %d", i);
    rgt_free_all(2, (rg_tensor *[]){w, x});
}

static void count_hook(rg_tensor *p, void *ctx) { (*(int *)ctx)++; }

Test(autograd_hooks, removed_hook_does_not_fire) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 6);
    int a = 0, b = 0;
    int ida = rg_grad_hook_add(w, count_hook, &a);
    rg_grad_hook_add(w, count_hook, &b);
    rg_grad_hook_remove(w, ida);
    rg_scope_begin();
    rg_backward(rg_sum(w == NULL ? NULL : rg_scale(w, 2.0f)));
    rg_scope_end();
    cr_assert_eq(a, 0);
    cr_assert_eq(b, 1);
    rg_tensor_free(w);
}

Test(autograd_hooks, no_grad_mode_records_nothing) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 7);
    rg_scope_begin();
    rg_no_grad_begin();
    rg_tensor *y = rg_sum(rg_scale(w, 2.0f));
    rg_no_grad_end();
    cr_assert_null(y->grad_fn);
    cr_assert_eq(rg_tape_len(), 0);
    cr_assert(!rg_tensor_requires_grad(y));
    rg_scope_end();
    rg_tensor_free(w);
}

Test(autograd_hooks, hook_on_non_leaf_is_misuse, .signal = SIGABRT) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 8);
    rg_scope_begin();
    rg_grad_hook_add(rg_scale(w, 2.0f), count_hook, NULL);
}
