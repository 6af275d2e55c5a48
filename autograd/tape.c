/* tape.c — the tape's storage, recording nodes, grad mode, and gradient buffers.
 *
 * One tape per open step scope of a thread: an array of node pointers in creation order. The array
 * is kept and reused by the next scope opened at the same depth (known by its serial number), so
 * a steady-state step allocates nothing; the nodes themselves live in the scope's arena. */
#include "autograd/autograd_impl.h"

#include <stdlib.h>

#include "tensor/scope_impl.h"
#include "core/alloc.h"

typedef struct {
    rg_node **nodes;
    int64_t n, cap;
    uint64_t serial; /* the scope these nodes belong to */
} tape;

static _Thread_local tape tapes[RG_SCOPE_MAX_DEPTH];
static _Thread_local int no_grad_depth;

/* The tape of the innermost open scope, emptied if that scope is not the one it last served. */
static tape *current_tape(void) {
    int d = rg_scope_depth();
    if (d == 0) return NULL;
    tape *t = &tapes[d - 1];
    uint64_t serial = rg_scope_serial();
    if (t->serial != serial) t->serial = serial, t->n = 0;
    return t;
}

rg_node **rg_tape_nodes(int64_t *n) {
    tape *t = current_tape();
    *n = t ? t->n : 0;
    return t ? t->nodes : NULL;
}

static int64_t tape_push(const char *op, rg_node *node) {
    tape *t = current_tape();
    RG_CHECK(t, "%s: no step scope is open; wrap the step in rg_scope_begin()/rg_scope_end()", op);
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 256;
        rg_node **nodes = rg_xrealloc(t->nodes, (size_t)cap * sizeof *nodes, "the tape's nodes");
        t->nodes = nodes, t->cap = cap;
    }
    t->nodes[t->n] = node;
    return t->n++;
}

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
    n->index = tape_push(op, n);
    out->grad_fn = n;
    out->flags |= RG_TENSOR_REQUIRES_GRAD;
    return n;
}

/* (autograd_impl.h) The tape between x's node and n: any node there that reads x would add to
 * x's gradient after n's backward. */
bool rg_grad_alias(rg_tensor *x, rg_tensor *g, const rg_node *n) {
    if (x->grad || !x->grad_fn || !(x->flags & RG_TENSOR_SCOPED) || !rg_scope_owns(x) ||
        x->dtype != g->dtype || x->numel != g->numel || !rg_device_eq(x->device, g->device))
        return false;
    int64_t count;
    rg_node **nodes = rg_tape_nodes(&count);
    int64_t from = x->grad_fn->index, to = n->index;
    if (to >= count || nodes[to] != n || from >= to || nodes[from] != x->grad_fn) return false;
    for (int64_t i = from + 1; i < to; i++) /* another consumer, whose backward runs after n's */
        for (int j = 0; j < nodes[i]->n_in; j++)
            if (nodes[i]->in[j] == x) return false;
    x->grad = rg_tensor_view(g, x->ndim, x->shape);
    return true;
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
