/* conv2d.c — 2-D convolution (cross-correlation, as in every framework).
 *
 *   y[n,k,p,q] = bias[k] + sum_{c,r,s} x[n,c, p*stride - pad + r, q*stride - pad + s] w[k,c,r,s]
 *
 * Backward: dx is the transposed convolution of dy with w, dw correlates x with dy, and dbias
 * sums dy over n, p, q. The kernels are in tensor/cpu/conv2d.c and tensor/cuda/conv2d.cu. */
#include "ops/op_impl.h"

static rg_conv2d_shape conv_shape(const rg_tensor *x, const rg_tensor *w, int stride, int pad) {
    rg_conv2d_shape s = {
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .k = w->shape[0], .r = w->shape[2], .s = w->shape[3],
        .stride_h = stride, .stride_w = stride, .pad_h = pad, .pad_w = pad,
    };
    s.p = (s.h + 2 * pad - s.r) / stride + 1;
    s.q = (s.w + 2 * pad - s.s) / stride + 1;
    return s;
}

static void conv2d_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2], *dy = n->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    rg_conv2d_shape s = conv_shape(x, w, (int)n->iattr[0], (int)n->iattr[1]);
    if (rg_needs_grad(x)) {
        float beta = rg_grad_begin(x);
        be->conv2d_backward_data(&s, dy->data, w->data, beta, x->grad->data);
    }
    bool dw = rg_needs_grad(w), db = rg_needs_grad(bias);
    float beta_w = dw ? rg_grad_begin(w) : 0.0f, beta_b = db ? rg_grad_begin(bias) : 0.0f;
    if (dw && (!db || beta_b == beta_w)) {
        be->conv2d_backward_filter(&s, x->data, dy->data, beta_w, w->grad->data,
                                   db ? bias->grad->data : NULL);
        return;
    }
    if (dw) be->conv2d_backward_filter(&s, x->data, dy->data, beta_w, w->grad->data, NULL);
    if (db) { /* bias alone: dbias = sum of dy over (n, p, q) */
        rg_bcast bc;
        rg_tensor b3 = *bias;
        b3.ndim = 3, b3.shape[0] = s.k, b3.shape[1] = 1, b3.shape[2] = 1;
        rg_bcast_plan(dy, &b3, &bc);
        be->reduce_bcast(&bc, dy->data, NULL, beta_b, bias->grad->data);
    }
}

rg_tensor *rg_conv2d(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride, int padding) {
    const char *op = "conv2d";
    rg_op_check_f32(op, "input", x);
    rg_op_check_f32(op, "weight", w);
    const rg_backend *be = rg_op_backend(op, x, w);
    rg_op_check_ndim(op, "input (N,C,H,W)", x, 4);
    rg_op_check_ndim(op, "weight (K,C,R,S)", w, 4);
    RG_CHECK(stride >= 1 && padding >= 0, "conv2d: stride %d, padding %d", stride, padding);
    RG_CHECK(x->shape[1] == w->shape[1], "conv2d: input %s has %lld channels but weight %s "
             "expects %lld", RG_SHAPE_STR(x), (long long)x->shape[1], RG_SHAPE_STR(w),
             (long long)w->shape[1]);
    RG_CHECK(x->shape[2] + 2 * padding >= w->shape[2] && x->shape[3] + 2 * padding >= w->shape[3],
             "conv2d: kernel %s larger than the padded input %s", RG_SHAPE_STR(w), RG_SHAPE_STR(x));
    if (bias) {
        rg_op_check_f32(op, "bias", bias);
        rg_op_backend(op, x, bias);
        RG_CHECK(bias->ndim == 1 && bias->shape[0] == w->shape[0], "conv2d: bias %s for weight %s",
                 RG_SHAPE_STR(bias), RG_SHAPE_STR(w));
    }
    rg_conv2d_shape s = conv_shape(x, w, stride, padding);
    rg_tensor *y = rg_tensor_empty(RG_F32, RG_SHAPE(s.n, s.k, s.p, s.q), x->device);
    be->conv2d_forward(&s, x->data, w->data, bias ? bias->data : NULL, y->data);
    rg_node *n = rg_tape_record(op, conv2d_backward, y, 3, (rg_tensor *[]){x, w, bias});
    if (n) n->iattr[0] = stride, n->iattr[1] = padding;
    return y;
}
