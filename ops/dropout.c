/* dropout.c — inverted dropout: scale the kept activations by 1/(1-p) in training, so that
 * evaluation is the identity. The mask is never stored: it is a pure function of the Philox
 * stream position (seed, offset + i), so backward recomputes it (core/kernels.h). */
#include "ops/op_impl.h"

static void dropout_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *dy = n->out->grad;
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)->dropout_backward(dy->numel, n->fattr[0], (uint64_t)n->iattr[0],
                                                 (uint64_t)n->iattr[1], dy->data, beta,
                                                 x->grad->data);
}

rg_tensor *rg_dropout(rg_tensor *x, float p, bool train, uint64_t seed, uint64_t *offset) {
    rg_op_check_f32("dropout", "x", x);
    RG_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability %g outside [0, 1]", (double)p);
    if (!train || p == 0.0f) return x;
    RG_CHECK(offset, "dropout: NULL offset");
    uint64_t off = *offset;
    *offset += ((uint64_t)x->numel + 3) & ~(uint64_t)3;
    rg_tensor *y = rg_tensor_empty_like(x);
    rg_backend_for(x->device)->dropout_forward(x->numel, p, seed, off, x->data, y->data);
    rg_node *n = rg_tape_record("dropout", dropout_backward, y, 1, &x);
    if (n) n->fattr[0] = p, n->iattr[0] = (int64_t)seed, n->iattr[1] = (int64_t)off;
    return y;
}
