/* dropout.c — inverted dropout: scale the kept activations by 1/(1-p) in training, so that
 * evaluation is the identity. The mask is a pure function of the Philox stream position
 * (seed, offset + i) (core/kernels.h). When the tape records the op, forward also stores it, one
 * bit per element (1/32 of the activation's bytes, like cuDNN's reserve space), and backward reads
 * it: a copy's work instead of a second draw. Without a mask a backend recomputes it. */
#include "ops/op_impl.h"

static void dropout_backward(rg_node *n) {
    rg_tensor *x = n->in[0], *dy = n->out->grad, *mask = n->saved[0];
    float beta = rg_grad_begin(x);
    rg_backend_for(dy->device)
        ->dropout_backward(dy->numel, n->fattr[0], (uint64_t)n->iattr[0], (uint64_t)n->iattr[1],
                           mask ? (const uint32_t *)mask->data : NULL, dy->data, beta,
                           x->grad->data);
}

rg_tensor *rg_dropout(rg_tensor *x, float p, bool train, uint64_t seed, uint64_t *offset) {
    rg_op_check_f32("dropout", "x", x);
    RG_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability %g outside [0, 1]", (double)p);
    if (!train || p == 0.0f) return x;
    RG_CHECK(offset, "dropout: NULL offset");
    uint64_t off = *offset;
    *offset +=
        ((uint64_t)x->numel + RG_DROPOUT_PER_COUNTER - 1) & ~(uint64_t)(RG_DROPOUT_PER_COUNTER - 1);
    rg_tensor *y = rg_tensor_empty_like(x);
    /* the mask only where backward will run (rg_tape_record's test) */
    rg_tensor *mask = NULL;
    if (rg_grad_enabled() && rg_needs_grad(x) && x->numel > 0)
        mask = rg_tensor_empty(RG_I32, RG_SHAPE(rg_dropout_mask_words(x->numel, off)), x->device);
    rg_backend_for(x->device)->dropout_forward(x->numel, p, seed, off, x->data, y->data,
                                               mask ? (uint32_t *)mask->data : NULL);
    rg_node *n = rg_tape_record("dropout", dropout_backward, y, 1, &x);
    if (n)
        n->saved[0] = mask, n->fattr[0] = p, n->iattr[0] = (int64_t)seed,
        n->iattr[1] = (int64_t)off;
    return y;
}
