/* reduce.c — sum and mean of all elements, and argmax along the last dimension.
 *
 * Backward of s = sum(x): dx = ds everywhere (the scalar broadcast back). mean is sum then scale,
 * composed from two ops so that it needs no backward of its own. */
#include "ops/op_impl.h"

static void sum_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    float beta = rg_grad_begin(x);
    rg_bcast bc;
    rg_bcast_plan(x, dy, &bc);
    if (beta == 0.0f) be->fill(x->numel, 0.0f, x->grad->data);
    be->binary(RG_BINARY_ADD, &bc, x->grad->data, dy->data, x->grad->data);
}

rg_tensor *rg_sum(rg_tensor *x) {
    rg_op_check_f32("sum", "x", x);
    rg_tensor *y = rg_tensor_empty(RG_F32, 0, NULL, x->device);
    rg_backend_for(x->device)->sum(x->numel, x->data, y->data);
    rg_tape_record("sum", sum_backward, y, 1, &x);
    return y;
}

rg_tensor *rg_mean(rg_tensor *x) {
    RG_CHECK(x && x->numel > 0, "mean: empty tensor");
    return rg_scale(rg_sum(x), 1.0f / (float)x->numel);
}

rg_tensor *rg_argmax(rg_tensor *x) {
    rg_op_check_f32("argmax", "x", x);
    RG_CHECK(x->ndim >= 1 && x->shape[x->ndim - 1] > 0, "argmax: needs a non-empty last "
             "dimension, got %s", RG_SHAPE_STR(x));
    int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
    rg_tensor *y = rg_tensor_empty(RG_I64, x->ndim - 1, x->shape, x->device);
    rg_backend_for(x->device)->argmax(rows, cols, x->data, y->data);
    return y;
}
