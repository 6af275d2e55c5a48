/* reshape.c — reshape and flatten: views that share the input's data (storage is contiguous, so
 * any shape with the same element count is a view). Backward hands the gradient straight back:
 * as a view of the same storage where it can (rg_grad_alias), else as a copy. */
#include "ops/op_impl.h"

static void reshape_backward(rg_node *n) { /* dx = dy, seen in x's shape */
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    /* dy itself where nothing else adds to x's gradient (the CNN's flatten: a 4.7 MB copy, 0.9
     * ms of its step at one thread) */
    if (rg_grad_alias(x, dy, n)) return;
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->axpby(dy->numel, 1.0f, dy->data, beta, x->grad->data);
}

rg_tensor *rg_reshape(rg_tensor *x, int ndim, const int64_t *shape) {
    RG_CHECK(x, "reshape: NULL tensor");
    RG_CHECK(ndim >= 0 && ndim <= RG_MAX_DIMS, "reshape: %d dimensions", ndim);
    int64_t s[RG_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1) {
            RG_CHECK(infer < 0, "reshape: more than one -1 in the new shape");
            infer = i;
        } else {
            RG_CHECK(s[i] >= 0, "reshape: negative size %lld", (long long)s[i]);
            known *= s[i];
        }
    }
    if (infer >= 0) {
        RG_CHECK(known > 0 && x->numel % known == 0, "reshape: cannot infer -1 for %s into %lld",
                 RG_SHAPE_STR(x), (long long)known);
        s[infer] = x->numel / known;
    }
    rg_tensor *y = rg_tensor_view(x, ndim, s);
    rg_tape_record("reshape", reshape_backward, y, 1, &x);
    return y;
}

rg_tensor *rg_flatten(rg_tensor *x) {
    RG_CHECK(x && x->ndim >= 1, "flatten: needs at least one dimension");
    /* the product, not -1: an empty batch (0,C,H,W) flattens to (0,C*H*W) */
    return rg_reshape(x, RG_SHAPE(x->shape[0], rg_shape_numel(x->ndim - 1, x->shape + 1)));
}
