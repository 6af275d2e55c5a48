/* elementwise.c — add, mul (with broadcasting), scale and relu.
 *
 * Broadcasting follows NumPy: shapes align on the right and a dimension of 1 stretches. The
 * gradient of a broadcast operand is the output gradient summed over the stretched dimensions,
 * which is what reduce_bcast computes. */
#include "ops/op_impl.h"
#include "tensor/scope_impl.h"

bool rg_bcast_plan(const rg_tensor *big, const rg_tensor *small, rg_bcast *bc) {
    if (small->ndim > big->ndim) return false;
    int64_t shape[RG_MAX_DIMS], stride[RG_MAX_DIMS];
    int64_t sstride = 1;
    int off = big->ndim - small->ndim;
    for (int i = big->ndim - 1; i >= 0; i--) {
        int64_t sd = i >= off ? small->shape[i - off] : 1;
        if (sd != big->shape[i] && sd != 1) return false;
        shape[i] = big->shape[i];
        stride[i] = (sd == 1) ? 0 : sstride;
        sstride *= sd;
    }
    /* Drop size-1 dimensions and merge neighbours that step through b the same way. */
    int nd = 0;
    for (int i = 0; i < big->ndim; i++) {
        if (shape[i] == 1) continue;
        if (nd > 0) {
            int j = nd - 1;
            bool both_bcast = bc->bstride[j] == 0 && stride[i] == 0;
            bool contiguous = stride[i] != 0 && bc->bstride[j] == stride[i] * shape[i];
            if (both_bcast || contiguous) {
                bc->shape[j] *= shape[i];
                bc->bstride[j] = stride[i];
                continue;
            }
        }
        bc->shape[nd] = shape[i], bc->bstride[nd] = stride[i], nd++;
    }
    if (nd == 0) bc->shape[0] = 1, bc->bstride[0] = 0, nd = 1;
    bc->ndim = nd;
    bc->n = big->numel;
    bc->nb = small->numel;
    return true;
}

/* Puts the operand with the result's shape first; stops if neither broadcasts to the other. */
static void order_operands(const char *op, rg_tensor **a, rg_tensor **b, rg_bcast *bc) {
    rg_op_check_f32(op, "a", *a);
    rg_op_check_f32(op, "b", *b);
    rg_op_backend(op, *a, *b);
    if (rg_bcast_plan(*a, *b, bc)) return;
    if (rg_bcast_plan(*b, *a, bc)) {
        rg_tensor *t = *a;
        *a = *b, *b = t;
        return;
    }
    rg_fatal(__FILE__, __LINE__, "%s: shapes %s and %s do not broadcast (one of them must have "
             "the result's shape)", op, RG_SHAPE_STR(*a), RG_SHAPE_STR(*b));
}

/* Whether big, an op result with no gradient yet, may take dy itself as its gradient: both made in
 * this step scope, so that they end together. The add's result gets no other reader of dy after
 * this node (its producer is this node), so a later addition into big's gradient changes nothing
 * backward still needs; PyTorch's autograd hands add's gradient on the same way. */
static bool can_share_grad(const rg_tensor *big, const rg_tensor *dy) {
    return !big->grad && big->grad_fn && (big->flags & RG_TENSOR_SCOPED) &&
           (dy->flags & RG_TENSOR_SCOPED) && rg_scope_owns(big) && rg_scope_owns(dy);
}

/* big's gradient for add (dy) or mul (dy * small) */
static void big_grad(rg_binary_op op, rg_tensor *big, rg_tensor *small, const rg_bcast *bc,
                     rg_tensor *dy) {
    const rg_backend *be = rg_backend_for(dy->device);
    if (op == RG_BINARY_ADD && can_share_grad(big, dy)) { /* a residual add: no copy of dy */
        big->grad = dy;
        return;
    }
    float beta = rg_grad_begin(big);
    if (op == RG_BINARY_ADD) {
        be->axpby(dy->numel, 1.0f, dy->data, beta, big->grad->data);
    } else if (beta == 0.0f) {
        be->binary(RG_BINARY_MUL, bc, dy->data, small->data, big->grad->data);
    } else {
        rg_tensor *t = rg_tensor_empty_like(dy);
        be->binary(RG_BINARY_MUL, bc, dy->data, small->data, t->data);
        be->axpby(dy->numel, 1.0f, t->data, 1.0f, big->grad->data);
    }
}

static void binary_backward(rg_node *n) {
    rg_tensor *big = n->in[0], *small = n->in[1], *dy = n->out->grad;
    rg_binary_op op = (rg_binary_op)n->iattr[0];
    rg_bcast bc;
    rg_bcast_plan(big, small, &bc);
    if (rg_needs_grad(big)) big_grad(op, big, small, &bc, dy);
    if (rg_needs_grad(small)) {
        const rg_backend *be = rg_backend_for(dy->device);
        float beta = rg_grad_begin(small);
        if (op == RG_BINARY_ADD && bc.nb == bc.n) /* same shapes (a residual add): nothing to sum */
            be->axpby(dy->numel, 1.0f, dy->data, beta, small->grad->data);
        else
            be->reduce_bcast(&bc, dy->data, op == RG_BINARY_MUL ? big->data : NULL, beta,
                             small->grad->data);
    }
}

static rg_tensor *binary(const char *name, rg_binary_op op, rg_tensor *a, rg_tensor *b) {
    rg_bcast bc;
    order_operands(name, &a, &b, &bc);
    rg_tensor *y = rg_tensor_empty_like(a);
    rg_backend_for(a->device)->binary(op, &bc, a->data, b->data, y->data);
    rg_node *n = rg_tape_record(name, binary_backward, y, 2, (rg_tensor *[]){a, b});
    if (n) n->iattr[0] = op;
    return y;
}

rg_tensor *rg_add(rg_tensor *a, rg_tensor *b) { return binary("add", RG_BINARY_ADD, a, b); }

rg_tensor *rg_mul(rg_tensor *a, rg_tensor *b) { return binary("mul", RG_BINARY_MUL, a, b); }

static void scale_backward(rg_node *n) { /* dx = s dy */
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->axpby(dy->numel, n->fattr[0], dy->data, beta, x->grad->data);
}

rg_tensor *rg_scale(rg_tensor *x, float s) {
    rg_op_check_f32("scale", "x", x);
    rg_tensor *y = rg_tensor_empty_like(x);
    rg_backend_for(x->device)->axpby(x->numel, s, x->data, 0.0f, y->data);
    rg_node *n = rg_tape_record("scale", scale_backward, y, 1, &x);
    if (n) n->fattr[0] = s;
    return y;
}

static void relu_backward(rg_node *n) { /* dx = x > 0 ? dy : 0 */
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->relu_backward(x->numel, x->data, dy->data, beta, x->grad->data);
}

rg_tensor *rg_relu(rg_tensor *x) {
    rg_op_check_f32("relu", "x", x);
    rg_tensor *y = rg_tensor_empty_like(x);
    rg_backend_for(x->device)->relu_forward(x->numel, x->data, y->data);
    rg_tape_record("relu", relu_backward, y, 1, &x);
    return y;
}
