/* maxpool2d.c — max pooling. The forward saves, for each output, where in its input plane the
 * maximum came from; backward routes dy there (ties go to the first maximum, as in PyTorch). */
#include "ops/op_impl.h"

static rg_pool2d_shape pool_shape(const rg_tensor *x, int kernel, int stride, int pad) {
    return rg_op_pool_shape("max_pool2d", x->shape[0], x->shape[1], x->shape[2], x->shape[3],
                            kernel, stride, pad);
}

static void maxpool2d_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *dy = n->out->grad, *argmax = n->saved[0];
    rg_pool2d_shape s = pool_shape(x, (int)n->iattr[0], (int)n->iattr[1], (int)n->iattr[2]);
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->maxpool2d_backward(&s, dy->data, argmax->data, beta, x->grad->data);
}

rg_tensor *rg_max_pool2d(rg_tensor *x, int kernel, int stride, int padding) {
    rg_op_check_f32("max_pool2d", "input", x);
    rg_op_check_ndim("max_pool2d", "input (N,C,H,W)", x, 4);
    rg_pool2d_shape s = pool_shape(x, kernel, stride, padding);
    rg_tensor *y = rg_tensor_empty(RG_F32, RG_SHAPE(s.n, s.c, s.p, s.q), x->device);
    rg_tensor *argmax = rg_tensor_empty(RG_I32, RG_SHAPE(s.n, s.c, s.p, s.q), x->device);
    rg_backend_for(x->device)->maxpool2d_forward(&s, x->data, y->data, argmax->data);
    rg_node *n = rg_tape_record("max_pool2d", maxpool2d_backward, y, 1, &x);
    if (n) n->saved[0] = argmax, n->iattr[0] = kernel, n->iattr[1] = stride, n->iattr[2] = padding;
    return y;
}
