/* cross_entropy.c — fused log-softmax + negative log-likelihood, the classifier's loss.
 *
 *   loss = -1/N sum_n ( z[n,y_n] - m_n - log sum_c exp(z[n,c] - m_n) ),  m_n = max_c z[n,c]
 *   dz[n,c] = dloss * (softmax(z)[n,c] - [c == y_n]) / N
 *
 * With label smoothing e (PyTorch's label_smoothing), the target is (1-e) onehot + e/C:
 *   loss = (1-e) nll + e mean_k(-log softmax(z)[k]),   dz = dloss (softmax(z) - (1-e) onehot - e/C) / N
 *
 * Subtracting the row maximum keeps exp() from overflowing; fusing the two ops avoids the
 * catastrophic cancellation of log(softmax) and gives the simple gradient above. */
#include "ops/op_impl.h"

static void cross_entropy_backward(rg_node *n) {
    rg_tensor *logits = n->in[0], *labels = n->saved[0], *probs = n->saved[1], *dy = n->out->grad;
    float beta = rg_grad_begin(logits);
    rg_backend_for(dy->device)->cross_entropy_backward(logits->shape[0], logits->shape[1],
                                                       probs->data, labels->data, n->fattr[0],
                                                       dy->data, beta, logits->grad->data);
}

rg_tensor *rg_cross_entropy(rg_tensor *logits, rg_tensor *labels) {
    return rg_cross_entropy_smooth(logits, labels, 0.0f);
}

rg_tensor *rg_cross_entropy_smooth(rg_tensor *logits, rg_tensor *labels, float smoothing) {
    const char *op = "cross_entropy";
    RG_CHECK(smoothing >= 0.0f && smoothing <= 1.0f, "%s: label smoothing %g outside [0, 1]", op,
             (double)smoothing);
    rg_op_check_f32(op, "logits", logits);
    RG_CHECK(labels, "%s: labels is NULL", op);
    const rg_backend *be = rg_op_backend(op, logits, labels);
    rg_op_check_ndim(op, "logits (N,C)", logits, 2);
    RG_CHECK(labels->dtype == RG_I64 && labels->ndim == 1 && labels->shape[0] == logits->shape[0],
             "%s: labels must be int64 (N) for logits %s, got %s %s", op, RG_SHAPE_STR(logits),
             rg_dtype_name(labels->dtype), RG_SHAPE_STR(labels));
    int64_t n = logits->shape[0], c = logits->shape[1];
    RG_CHECK(n > 0 && c > 0, "%s: empty logits %s", op, RG_SHAPE_STR(logits));
    if (labels->device.type == RG_DEV_CPU) { /* on a GPU this check would cost a sync */
        const int64_t *y = labels->data;
        for (int64_t i = 0; i < n; i++)
            RG_CHECK(y[i] >= 0 && y[i] < c, "%s: label %lld at row %lld is outside [0, %lld)", op,
                     (long long)y[i], (long long)i, (long long)c);
    }
    rg_tensor *loss = rg_tensor_empty(RG_F32, 0, NULL, logits->device);
    rg_tensor *probs = rg_tensor_empty_like(logits);
    be->cross_entropy_forward(n, c, logits->data, labels->data, smoothing, probs->data,
                              loss->data);
    rg_node *node = rg_tape_record(op, cross_entropy_backward, loss, 1, &logits);
    if (node) node->saved[0] = labels, node->saved[1] = probs, node->fattr[0] = smoothing;
    return loss;
}
