/* backward.c — reverse-mode differentiation: walk the tape backwards once.
 *
 * Before the walk, mark the ops that lead to the loss, and count for each leaf (parameter) how
 * many of them consume it. During the walk, each processed node decrements its leaves' counts; a
 * count reaching zero means no later (in reverse: earlier) op can add to that gradient any more,
 * so the gradient is final and the parameter's gradient-ready hooks fire: exactly once per
 * backward, and only for parameters the loss depends on. This is the moment data parallelism
 * hooks into. */
#include "autograd/autograd.h"

#include "tensor/backend.h"
#include "tensor/scope.h"

static _Thread_local uint64_t backward_epoch;

static bool is_leaf_param(const rg_tensor *t) { return rg_needs_grad(t) && !t->grad_fn; }

/* x's gradient is final: fire its hooks. Should a consumer's backward have produced no gradient
 * for x, hooks (a DDP reducer reading it) still get a real one: zero. */
static void grad_ready(rg_tensor *x) {
    if (!x->hooks) return;
    if (!x->grad) {
        rg_grad_begin(x);
        rg_tensor_zero_(x->grad);
    }
    rg_grad_hooks_fire(x);
}

void rg_backward(rg_tensor *loss) {
    RG_CHECK(loss, "backward: NULL loss");
    RG_CHECK(loss->dtype == RG_F32 && loss->numel == 1,
             "backward: loss must be one float32 element, got %lld elements of %s",
             (long long)loss->numel, rg_dtype_name(loss->dtype));
    RG_CHECK(loss->grad_fn, "backward: the loss does not depend on anything that requires a "
                            "gradient (or it was computed in no-grad mode)");
    rg_node **nodes = rg_scope_nodes();
    int64_t last = loss->grad_fn->index;
    RG_CHECK(last < rg_scope_num_nodes() && nodes[last] == loss->grad_fn,
             "backward: the loss was computed in another step scope");

    /* Which ops lead to the loss: the loss's own, and every op whose result feeds one that does.
     * Ops that do not (another model's forward, an accuracy computed on the side) are skipped,
     * so their parameters' hooks do not fire in this backward. */
    bool *live = rg_scope_alloc((size_t)last + 1);
    live[last] = true;
    for (int64_t i = last; i >= 0; i--) {
        rg_node *n = nodes[i];
        n->out->grad = NULL; /* op results get fresh gradients on every backward */
        for (int j = 0; live[i] && j < n->n_in; j++) {
            const rg_node *src = n->in[j] ? n->in[j]->grad_fn : NULL;
            if (src && src->index < i && nodes[src->index] == src) live[src->index] = true;
        }
    }

    uint64_t epoch = ++backward_epoch;
    for (int64_t i = 0; i <= last; i++) {
        rg_node *n = nodes[i];
        for (int j = 0; live[i] && j < n->n_in; j++) {
            rg_tensor *x = n->in[j];
            if (!is_leaf_param(x)) continue;
            if (x->bw_epoch != epoch) x->bw_epoch = epoch, x->bw_pending = 0;
            x->bw_pending++;
        }
    }

    loss->grad = rg_tensor_empty_like(loss);
    rg_tensor_fill_(loss->grad, 1.0f);

    for (int64_t i = last; i >= 0; i--) {
        rg_node *n = nodes[i];
        if (!live[i]) continue;
        if (n->out->grad) n->backward(n);
        for (int j = 0; j < n->n_in; j++) {
            rg_tensor *x = n->in[j];
            if (is_leaf_param(x) && --x->bw_pending == 0) grad_ready(x);
        }
    }
}

void rg_zero_grad(rg_tensor *t) {
    if (t && t->grad) rg_tensor_zero_(t->grad);
}
