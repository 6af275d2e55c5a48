/* conv2d.c — 2-D convolution (cross-correlation, as in every framework).
 *
 *   y[n,k,p,q] = bias[k] + sum_{c,r,s} x[n,c, p*stride - pad + r, q*stride - pad + s] w[k,c,r,s]
 *
 * Backward: dx is the transposed convolution of dy with w, dw correlates x with dy, and dbias
 * sums dy over n, p, q. The kernels are in tensor/cpu/conv2d.c and tensor/cuda/conv2d.cu.
 * rg_conv2d_relu is relu(rg_conv2d(...)) as one op (PyTorch's fused ConvReLU2d, oneDNN's ReLU
 * post-op): the same results, bit for bit, with two fewer passes over the output.
 * rg_conv2d_relu_maxpool2d adds the max-pool after it: the convolution's output then never
 * reaches memory on the CPU (each image is pooled from the thread's scratch), nor does its
 * gradient (each image's is unpooled into scratch as the backward passes read it). */
#include "ops/op_impl.h"

static rg_conv2d_shape conv_shape(const rg_tensor *x, const rg_tensor *w, int stride, int pad) {
    rg_conv2d_shape s = {
        .n = x->shape[0],
        .c = x->shape[1],
        .h = x->shape[2],
        .w = x->shape[3],
        .k = w->shape[0],
        .r = w->shape[2],
        .s = w->shape[3],
        .stride_h = stride,
        .stride_w = stride,
        .pad_h = pad,
        .pad_w = pad,
    };
    s.p = (s.h + 2 * pad - s.r) / stride + 1;
    s.q = (s.w + 2 * pad - s.s) / stride + 1;
    return s;
}

/* iattr: stride, padding, 1 when a ReLU was fused onto the output (rg_conv2d_relu), and the fused
 * max-pool's kernel (0: none), stride and padding; saved[0]: that pool's argmax. */
static void conv2d_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2], *dy = n->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    rg_conv2d_shape s = conv_shape(x, w, (int)n->iattr[0], (int)n->iattr[1]);
    bool dw = rg_needs_grad(w), db = rg_needs_grad(bias), relu = n->iattr[2];
    float beta_w = dw ? rg_grad_begin(w) : 0.0f, beta_b = db ? rg_grad_begin(bias) : 0.0f;
    bool bias_with_filter = dw && (!db || beta_b == beta_w);
    bool pooled = n->iattr[3] != 0; /* a fused max-pool: dy is its output's gradient */
    rg_pool2d_shape ps;
    if (pooled)
        ps = rg_op_pool_shape(n->op, s.n, s.k, s.p, s.q, (int)n->iattr[3], (int)n->iattr[4],
                              (int)n->iattr[5]);
    int32_t *argmax = pooled ? n->saved[0]->data : NULL;
    if (db && !bias_with_filter) { /* the bias reduction below reads the conv's dy itself */
        if (relu) { /* the fused ReLU: dy counts where its output y > 0 (the pool's, if pooled) */
            rg_tensor *dz = rg_tensor_empty_like(dy);
            be->relu_backward(dy->numel, n->out->data, dy->data, 0.0f, dz->data);
            dy = dz;
        }
        if (pooled) { /* routed back to the maxima */
            rg_tensor *dz = rg_tensor_empty(RG_F32, RG_SHAPE(s.n, s.k, s.p, s.q), dy->device);
            be->maxpool2d_backward(&ps, dy->data, argmax, 0.0f, dz->data);
            dy = dz;
        }
    } else { /* the passes mask dy and unpool it as they read it */
        if (relu) s.relu_y = n->out->data;
        if (pooled) s.pool = &ps, s.pool_argmax = argmax;
    }
    bool dx = rg_needs_grad(x);
    float beta_x = dx ? rg_grad_begin(x) : 0.0f;
    if (dx || dw) /* the passes needed, in one call: together they share their reading of dy */
        be->conv2d_backward(&s, x->data, dy->data, w->data, beta_x, dx ? x->grad->data : NULL,
                            beta_w, dw ? w->grad->data : NULL,
                            bias_with_filter && db ? bias->grad->data : NULL);
    if (db && !bias_with_filter) { /* bias alone: dbias = sum of dy over (n, p, q) */
        rg_bcast bc;
        rg_tensor b3 = *bias;
        b3.ndim = 3, b3.shape[0] = s.k, b3.shape[1] = 1, b3.shape[2] = 1;
        rg_bcast_plan(dy, &b3, &bc);
        be->reduce_bcast(&bc, dy->data, NULL, beta_b, bias->grad->data);
    }
}

/* pool: {kernel, stride, padding} of a max-pool fused after the (ReLU'd) output, or NULL */
static rg_tensor *conv2d(const char *op, rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride,
                         int padding, bool relu, const int *pool) {
    rg_op_check_f32(op, "input", x);
    rg_op_check_f32(op, "weight", w);
    const rg_backend *be = rg_op_backend(op, x, w);
    rg_op_check_ndim(op, "input (N,C,H,W)", x, 4);
    rg_op_check_ndim(op, "weight (K,C,R,S)", w, 4);
    RG_CHECK(stride >= 1 && padding >= 0, "%s: stride %d, padding %d", op, stride, padding);
    RG_CHECK(x->shape[1] == w->shape[1],
             "%s: input %s has %lld channels but weight %s expects %lld", op, RG_SHAPE_STR(x),
             (long long)x->shape[1], RG_SHAPE_STR(w), (long long)w->shape[1]);
    RG_CHECK(x->shape[2] + 2 * padding >= w->shape[2] && x->shape[3] + 2 * padding >= w->shape[3],
             "%s: kernel %s larger than the padded input %s", op, RG_SHAPE_STR(w), RG_SHAPE_STR(x));
    if (bias) {
        rg_op_check_f32(op, "bias", bias);
        rg_op_backend(op, x, bias);
        RG_CHECK(bias->ndim == 1 && bias->shape[0] == w->shape[0], "%s: bias %s for weight %s", op,
                 RG_SHAPE_STR(bias), RG_SHAPE_STR(w));
    }
    rg_conv2d_shape s = conv_shape(x, w, stride, padding);
    s.relu = relu;
    rg_pool2d_shape ps;
    rg_tensor *argmax = NULL, *y;
    if (pool) {
        ps = rg_op_pool_shape(op, s.n, s.k, s.p, s.q, pool[0], pool[1], pool[2]);
        y = rg_tensor_empty(RG_F32, RG_SHAPE(s.n, s.k, ps.p, ps.q), x->device);
        argmax = rg_tensor_empty(RG_I32, RG_SHAPE(s.n, s.k, ps.p, ps.q), x->device);
        s.pool = &ps, s.pool_argmax = argmax->data;
    } else {
        y = rg_tensor_empty(RG_F32, RG_SHAPE(s.n, s.k, s.p, s.q), x->device);
    }
    be->conv2d_forward(&s, x->data, w->data, bias ? bias->data : NULL, y->data);
    rg_node *n = rg_tape_record(op, conv2d_backward, y, 3, (rg_tensor *[]){x, w, bias});
    if (n) {
        n->iattr[0] = stride, n->iattr[1] = padding, n->iattr[2] = relu;
        if (pool) n->iattr[3] = pool[0], n->iattr[4] = pool[1], n->iattr[5] = pool[2];
        n->saved[0] = argmax;
    }
    return y;
}

rg_tensor *rg_conv2d(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride, int padding) {
    return conv2d("conv2d", x, w, bias, stride, padding, false, NULL);
}

/* Fused, the ReLU costs no pass over y of its own: the CPU kernels apply it as they write y and
 * apply its mask as they read dy (tensor/cpu/conv2d.c). Its backward needs only y, which the
 * tape keeps anyway, so the conv's raw output is never stored. */
rg_tensor *rg_conv2d_relu(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride, int padding) {
    return conv2d("conv2d_relu", x, w, bias, stride, padding, true, NULL);
}

/* Pooled too, the convolution's output is never stored: backward needs only the pool's output
 * (the ReLU's mask at the maxima, where it equals y) and its argmax. */
rg_tensor *rg_conv2d_relu_maxpool2d(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride,
                                    int padding, int pool_kernel, int pool_stride,
                                    int pool_padding) {
    return conv2d("conv2d_relu_maxpool2d", x, w, bias, stride, padding, true,
                  (const int[]){pool_kernel, pool_stride, pool_padding});
}
