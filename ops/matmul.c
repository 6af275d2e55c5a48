/* matmul.c — matrix products: y = a b, and the linear layer's y = x w^T + bias.
 *
 * Backward of y = a b:   da = dy b^T,   db = a^T dy
 * Backward of linear:    dx = dy w,     dw = dy^T x,   dbias = sum over rows of dy
 * Each is one GEMM with beta = 1 when a gradient is already there, so accumulating costs nothing. */
#include "ops/op_impl.h"

static void matmul_backward(rg_node *n) {
    rg_tensor *a = n->in[0], *b = n->in[1], *dy = n->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    int64_t m = a->shape[0], k = a->shape[1], nn = b->shape[1];
    if (rg_needs_grad(a)) { /* da (M,K) = dy (M,N) b^T (N,K) */
        float beta = rg_grad_begin(a);
        be->gemm(false, true, m, k, nn, 1.0f, dy->data, nn, b->data, nn, beta, a->grad->data, k);
    }
    if (rg_needs_grad(b)) { /* db (K,N) = a^T (K,M) dy (M,N) */
        float beta = rg_grad_begin(b);
        be->gemm(true, false, k, nn, m, 1.0f, a->data, k, dy->data, nn, beta, b->grad->data, nn);
    }
}

rg_tensor *rg_matmul(rg_tensor *a, rg_tensor *b) {
    rg_op_check_f32("matmul", "a", a);
    rg_op_check_f32("matmul", "b", b);
    const rg_backend *be = rg_op_backend("matmul", a, b);
    RG_CHECK(a->ndim == 2 && b->ndim == 2 && a->shape[1] == b->shape[0],
             "matmul: shapes %s and %s do not multiply (need (M,K) and (K,N))", RG_SHAPE_STR(a),
             RG_SHAPE_STR(b));
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    rg_tensor *y = rg_tensor_empty(RG_F32, RG_SHAPE(m, n), a->device);
    be->gemm(false, false, m, n, k, 1.0f, a->data, k, b->data, n, 0.0f, y->data, n);
    rg_tape_record("matmul", matmul_backward, y, 2, (rg_tensor *[]){a, b});
    return y;
}

static void linear_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2], *dy = n->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    int64_t batch = x->shape[0], in = x->shape[1], out = w->shape[0];
    if (rg_needs_grad(x)) { /* dx (N,in) = dy (N,out) w (out,in) */
        float beta = rg_grad_begin(x);
        be->gemm(false, false, batch, in, out, 1.0f, dy->data, out, w->data, in, beta,
                 x->grad->data, in);
    }
    if (rg_needs_grad(w)) { /* dw (out,in) = dy^T (out,N) x (N,in) */
        float beta = rg_grad_begin(w);
        be->gemm(true, false, out, in, batch, 1.0f, dy->data, out, x->data, in, beta,
                 w->grad->data, in);
    }
    if (rg_needs_grad(bias)) { /* dbias (out) = sum_n dy (N,out) */
        rg_bcast bc;
        rg_bcast_plan(dy, bias, &bc);
        float beta = rg_grad_begin(bias);
        be->reduce_bcast(&bc, dy->data, NULL, beta, bias->grad->data);
    }
}

rg_tensor *rg_linear(rg_tensor *x, rg_tensor *w, rg_tensor *bias) {
    rg_op_check_f32("linear", "x", x);
    rg_op_check_f32("linear", "weight", w);
    const rg_backend *be = rg_op_backend("linear", x, w);
    RG_CHECK(x->ndim == 2 && w->ndim == 2 && x->shape[1] == w->shape[1],
             "linear: input %s does not fit weight %s (need (N,in) and (out,in))", RG_SHAPE_STR(x),
             RG_SHAPE_STR(w));
    int64_t batch = x->shape[0], in = x->shape[1], out = w->shape[0];
    if (bias) {
        rg_op_check_f32("linear", "bias", bias);
        rg_op_backend("linear", x, bias);
        RG_CHECK(bias->ndim == 1 && bias->shape[0] == out, "linear: bias %s for weight %s",
                 RG_SHAPE_STR(bias), RG_SHAPE_STR(w));
    }
    rg_tensor *y = rg_tensor_empty(RG_F32, RG_SHAPE(batch, out), x->device);
    be->gemm(false, true, batch, out, in, 1.0f, x->data, in, w->data, in, 0.0f, y->data, out);
    if (bias) {
        rg_bcast bc;
        rg_bcast_plan(y, bias, &bc);
        be->binary(RG_BINARY_ADD, &bc, y->data, bias->data, y->data);
    }
    rg_tape_record("linear", linear_backward, y, 3, (rg_tensor *[]){x, w, bias});
    return y;
}
