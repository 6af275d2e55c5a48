/* tape.c — recording nodes, grad mode, and gradient buffers. */
#include "autograd/tape.h"

#include "tensor/backend.h"
#include "tensor/scope.h"

static _Thread_local int no_grad_depth;

void rg_no_grad_begin(void) { no_grad_depth++; }

void rg_no_grad_end(void) {
    RG_CHECK(no_grad_depth > 0, "rg_no_grad_end without rg_no_grad_begin");
    no_grad_depth--;
}

bool rg_grad_enabled(void) { return no_grad_depth == 0; }

rg_node *rg_tape_record(const char *op, rg_backward_fn backward, rg_tensor *out, int n_in,
                        rg_tensor *const *in) {
    RG_CHECK(n_in <= RG_NODE_MAX_INPUTS, "%s: %d inputs (a node holds at most %d)", op, n_in,
             RG_NODE_MAX_INPUTS);
    if (no_grad_depth > 0) return NULL;
    bool any = false;
    for (int i = 0; i < n_in; i++) any |= rg_needs_grad(in[i]);
    if (!any) return NULL;

    rg_node *n = rg_scope_alloc(sizeof *n);
    n->op = op;
    n->backward = backward;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->index = rg_scope_push_node(n);
    out->grad_fn = n;
    out->flags |= RG_TENSOR_REQUIRES_GRAD;
    return n;
}

float rg_grad_begin(rg_tensor *t) {
    /* A scoped tensor's gradient is made in the current scope, so it must be the tensor's own:
     * one from an outer scope would keep a gradient freed by this scope's end (and the next
     * backward would accumulate into freed memory). */
    if ((t->flags & RG_TENSOR_SCOPED) && !rg_scope_owns(t)) {
        char sh[96];
        rg_fatal(__FILE__, __LINE__, "backward: a %s tensor %s that needs a gradient was made in "
                 "an outer step scope; its gradient would be freed with this one (call rg_backward "
                 "in the tensor's own scope, or make it long-lived with rg_tensor_new)",
                 t->grad_fn ? t->grad_fn->op : "leaf",
                 rg_shape_str(t->ndim, t->shape, sh, sizeof sh));
    }
    if (t->grad) return 1.0f;
    if (t->flags & RG_TENSOR_SCOPED) {
        t->grad = rg_tensor_empty(t->dtype, t->ndim, t->shape, t->device);
    } else {
        t->grad = rg_tensor_new(t->dtype, t->ndim, t->shape, t->device);
        RG_CHECK(t->grad, "backward: %s", rg_last_error());
    }
    return 0.0f;
}
