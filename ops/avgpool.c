/* avgpool.c — global average pooling, PyTorch's AdaptiveAvgPool2d(1): the classifier head of
 * every ResNet.
 *
 *   y[n,c] = 1/(H W) sum_{h,w} x[n,c,h,w],   dx[n,c,h,w] = dy[n,c] / (H W) */
#include "ops/op_impl.h"

static void avgpool_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->avgpool_global_backward(x->shape[0] * x->shape[1],
                                                        x->shape[2] * x->shape[3], dy->data, beta,
                                                        x->grad->data);
}

rg_tensor *rg_global_avg_pool2d(rg_tensor *x) {
    const char *op = "global_avg_pool2d";
    rg_op_check_f32(op, "input", x);
    rg_op_check_ndim(op, "input (N,C,H,W)", x, 4);
    RG_CHECK(x->shape[2] > 0 && x->shape[3] > 0, "%s: empty planes in %s", op, RG_SHAPE_STR(x));
    rg_tensor *y = rg_tensor_empty(RG_F32, RG_SHAPE(x->shape[0], x->shape[1], 1, 1), x->device);
    rg_backend_for(x->device)->avgpool_global_forward(x->shape[0] * x->shape[1],
                                                      x->shape[2] * x->shape[3], x->data, y->data);
    rg_tape_record(op, avgpool_backward, y, 1, &x);
    return y;
}
