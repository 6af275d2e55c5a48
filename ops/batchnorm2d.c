/* batchnorm2d.c — batch normalisation per channel of (N,C,H,W), PyTorch's BatchNorm2d and
 * SyncBatchNorm.
 *
 *   training:   mean, var = batch statistics over (N,H,W) (var biased)
 *               running = (1-momentum) running + momentum (mean | var * m/(m-1)),  m = N*H*W
 *   evaluation: mean, var = running_mean, running_var
 *   y = (x - mean) / sqrt(var + eps) * weight + bias
 *
 * Backward in training (xhat = (x - mean) * invstd):
 *   dweight = sum dy*xhat,  dbias = sum dy,
 *   dx = weight*invstd*(dy - mean(dy) - xhat*mean(dy*xhat))
 * In evaluation the statistics are constants and dx = weight*invstd*dy.
 *
 * rg_batch_norm2d_relu is relu(batch_norm2d(x)) in one op, bit for bit: the ReLU is applied as
 * the normalisation writes y, and backward's passes read dy masked by y > 0 as they load it, so
 * neither the normalised values before the ReLU nor the masked gradient are ever stored
 * (Sequential fuses a BatchNorm2d and the ReLU after it, as ResNet's blocks have them).
 * rg_batch_norm2d_add_relu is relu(batch_norm2d(x) + residual), a residual block's end: the same
 * pass adds the shortcut, and backward writes the shortcut's gradient (dy masked by y > 0) in the
 * pass that the ReLU's backward was, BatchNorm's passes masking dy themselves as above.
 *
 * SyncBatchNorm is the same op with the two per-channel sums (and the count) summed across ranks
 * through a hook: one allreduce of (sum x, sum x^2, count) in forward and one of (sum dy,
 * sum dy*xhat, count) in backward. dweight and dbias stay local: DDP averages them, as it does
 * in PyTorch. The hook is a function pointer set from above (dist/), so ops/ needs no comm. */
#include <stdint.h>

#include "ops/op_impl.h"

/* Sums buf (n floats on dev) across the ranks through the hook; any failure is fatal here,
 * since an op cannot return a status and the ranks would otherwise diverge. */
static void sync_sum(const rg_bn_sync *sync, float *buf, int64_t n, rg_device dev) {
    rg_status st = sync->allreduce_sum(sync->ctx, buf, n, dev);
    RG_CHECK(st == RG_OK, "sync_batch_norm: allreduce of %lld statistics failed: %s", (long long)n,
             rg_last_error());
}

static void batchnorm2d_backward(rg_node *nd) {
    rg_tensor *x = nd->in[0], *w = nd->in[1], *b = nd->in[2], *dy = nd->out->grad;
    const rg_backend *be = rg_backend_for(dy->device);
    bool train = nd->iattr[0] != 0;
    const rg_bn_sync *sync = (const rg_bn_sync *)(intptr_t)nd->iattr[1];
    float eps = nd->fattr[0];
    int64_t n = x->shape[0], c = x->shape[1], hw = x->shape[2] * x->shape[3];
    const float *mean = nd->saved[0]->data;
    const float *var = train ? mean + c : (const float *)nd->saved[1]->data;
    bool dx = rg_needs_grad(x), dw = rg_needs_grad(w), db = rg_needs_grad(b);
    /* A fused ReLU: the passes read g, dy masked by the output (y > 0 where y's input is), or dy
     * and relu_y and mask it themselves. A fused residual add's shortcut gets that masked dy as
     * its gradient; when the shortcut had none yet, that gradient is g itself. */
    const float *y = nd->out->data, *g = dy->data, *relu_y = NULL;
    rg_tensor *res = nd->n_in > 3 ? nd->in[3] : NULL;
    if (res && rg_needs_grad(res)) {
        float beta = rg_grad_begin(res);
        be->relu_backward(dy->numel, y, dy->data, beta, res->grad->data);
        if (beta == 0.0f) g = res->grad->data;
    }
    if (!dx && !dw && !db) return; /* the shortcut alone wanted a gradient */
    if (nd->iattr[2] && g == dy->data) relu_y = y;
    if (!train && !dw && !db) { /* evaluation: dx needs no sums */
        float beta = rg_grad_begin(x);
        be->batchnorm_backward_data(n, c, hw, x->data, g, relu_y, mean, var, eps,
                                    w ? w->data : NULL, NULL, beta, x->grad->data);
        return;
    }
    rg_tensor *sums = rg_tensor_empty(RG_F32, RG_SHAPE(2 * c + 1), dy->device); /* (2C+1) */
    float *s = sums->data;
    /* dweight = sum dy*xhat, dbias = sum dy, written by the reduction itself (rg_grad_begin
     * first: it may make the gradients) */
    float beta_w = dw ? rg_grad_begin(w) : 0.0f, beta_b = db ? rg_grad_begin(b) : 0.0f;
    if (dx && train && !sync) { /* both passes in one call (the CPU keeps small planes in cache) */
        float beta = rg_grad_begin(x);
        be->batchnorm_backward(n, c, hw, x->data, g, relu_y, mean, var, eps, w ? w->data : NULL, s,
                               beta_w, dw ? w->grad->data : NULL, beta_b, db ? b->grad->data : NULL,
                               beta, x->grad->data);
        return;
    }
    be->batchnorm_backward_reduce(n, c, hw, x->data, g, relu_y, mean, var, eps, s, beta_w,
                                  dw ? w->grad->data : NULL, beta_b, db ? b->grad->data : NULL);
    if (!dx) return;
    if (train && sync) sync_sum(sync, s, 2 * c + 1, dy->device);
    float beta = rg_grad_begin(x);
    be->batchnorm_backward_data(n, c, hw, x->data, g, relu_y, mean, var, eps, w ? w->data : NULL,
                                train ? s : NULL, beta, x->grad->data);
}

static void check_vec(const char *op, const char *arg, const rg_tensor *t, const rg_tensor *x) {
    if (!t) return;
    rg_op_check_f32(op, arg, t);
    rg_op_backend(op, x, t);
    RG_CHECK(t->ndim == 1 && t->shape[0] == x->shape[1], "%s: %s %s for input %s with %lld "
             "channels", op, arg, RG_SHAPE_STR(t), RG_SHAPE_STR(x), (long long)x->shape[1]);
}

static rg_tensor *batch_norm2d(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                               rg_tensor *running_mean, rg_tensor *running_var,
                               rg_tensor *num_batches_tracked, bool train, float momentum,
                               float eps, const rg_bn_sync *sync, rg_tensor *residual, bool relu) {
    bool s = sync && train;
    const char *op = residual ? (s ? "sync_batch_norm_add_relu" : "batch_norm2d_add_relu")
                     : relu   ? (s ? "sync_batch_norm_relu" : "batch_norm2d_relu")
                              : (s ? "sync_batch_norm" : "batch_norm2d");
    rg_op_check_f32(op, "input", x);
    rg_op_check_ndim(op, "input (N,C,H,W)", x, 4);
    const rg_backend *be = rg_op_backend(op, x, NULL);
    if (residual) {
        rg_op_check_f32(op, "residual", residual);
        rg_op_backend(op, x, residual);
        RG_CHECK(rg_tensor_same_shape(residual, x),
                 "%s: residual %s for input %s: they must have the same shape", op,
                 RG_SHAPE_STR(residual), RG_SHAPE_STR(x));
    }
    const float *r = residual ? residual->data : NULL;
    check_vec(op, "weight", weight, x);
    check_vec(op, "bias", bias, x);
    check_vec(op, "running_mean", running_mean, x);
    check_vec(op, "running_var", running_var, x);
    RG_CHECK(!running_mean == !running_var, "%s: running_mean and running_var go together", op);
    RG_CHECK(train || running_mean, "%s: evaluation needs running statistics", op);
    RG_CHECK(eps > 0.0f && momentum >= 0.0f && momentum <= 1.0f, "%s: eps %g, momentum %g", op,
             (double)eps, (double)momentum);
    if (num_batches_tracked) {
        rg_op_backend(op, x, num_batches_tracked);
        RG_CHECK(num_batches_tracked->dtype == RG_I64 && num_batches_tracked->numel == 1,
                 "%s: num_batches_tracked must be one int64, got %s %s", op,
                 rg_dtype_name(num_batches_tracked->dtype), RG_SHAPE_STR(num_batches_tracked));
    }
    RG_CHECK(!sync || sync->allreduce_sum, "%s: sync hook without a function", op);
    int64_t n = x->shape[0], c = x->shape[1], hw = x->shape[2] * x->shape[3];
    RG_CHECK(!train || sync || n * hw > 1, "%s: expected more than 1 value per channel when "
             "training, got input %s", op, RG_SHAPE_STR(x));
    rg_tensor *y = rg_tensor_empty_like(x);
    const float *w = weight ? weight->data : NULL, *b = bias ? bias->data : NULL;
    rg_tensor *saved0, *saved1 = NULL;
    if (train) {
        rg_tensor *stats = rg_tensor_empty(RG_F32, RG_SHAPE(3 * c + 1), x->device);
        saved0 = rg_tensor_empty(RG_F32, RG_SHAPE(2 * c + 1), x->device); /* mean, var, count */
        float *mv = saved0->data, *rm = running_mean ? running_mean->data : NULL;
        float *rv = running_var ? running_var->data : NULL;
        int64_t *nb = num_batches_tracked ? num_batches_tracked->data : NULL;
        if (!sync) { /* the three steps below in one call (on small planes, one pass over x) */
            be->batchnorm_train_forward(n, c, hw, x->data, momentum, eps, w, b, r, relu,
                                        stats->data, mv, rm, rv, nb, y->data);
        } else {
            /* The statistics' shift (see batchnorm_stats): without SyncBatchNorm each channel's
             * first value; here the ranks must share theirs: the running mean (the same on every
             * rank), or none. */
            const float *shift = running_mean ? running_mean->data : NULL;
            if (!shift) {
                rg_tensor *zeros = rg_tensor_empty(RG_F32, RG_SHAPE(c), x->device);
                be->fill(c, 0.0f, zeros->data);
                shift = zeros->data;
            }
            be->batchnorm_stats(n, c, hw, x->data, shift, stats->data);
            sync_sum(sync, stats->data, 2 * c + 1, x->device);
            be->batchnorm_finalize(c, momentum, stats->data, mv, rm, rv, nb);
            be->batchnorm_apply(n, c, hw, x->data, mv, mv + c, eps, w, b, r, relu, y->data);
        }
    } else {
        saved0 = running_mean, saved1 = running_var;
        be->batchnorm_apply(n, c, hw, x->data, running_mean->data, running_var->data, eps, w, b, r,
                            relu, y->data);
    }
    rg_node *nd = rg_tape_record(op, batchnorm2d_backward, y, residual ? 4 : 3,
                                 (rg_tensor *[]){x, weight, bias, residual});
    if (nd) {
        nd->saved[0] = saved0, nd->saved[1] = saved1;
        nd->iattr[0] = train, nd->iattr[1] = (int64_t)(intptr_t)(train ? sync : NULL);
        nd->iattr[2] = relu;
        nd->fattr[0] = eps;
    }
    return y;
}

rg_tensor *rg_batch_norm2d(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                           rg_tensor *running_mean, rg_tensor *running_var,
                           rg_tensor *num_batches_tracked, bool train, float momentum, float eps,
                           const rg_bn_sync *sync) {
    return batch_norm2d(x, weight, bias, running_mean, running_var, num_batches_tracked, train,
                        momentum, eps, sync, NULL, false);
}

rg_tensor *rg_batch_norm2d_relu(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                                rg_tensor *running_mean, rg_tensor *running_var,
                                rg_tensor *num_batches_tracked, bool train, float momentum,
                                float eps, const rg_bn_sync *sync) {
    return batch_norm2d(x, weight, bias, running_mean, running_var, num_batches_tracked, train,
                        momentum, eps, sync, NULL, true);
}

rg_tensor *rg_batch_norm2d_add_relu(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                                    rg_tensor *running_mean, rg_tensor *running_var,
                                    rg_tensor *num_batches_tracked, bool train, float momentum,
                                    float eps, const rg_bn_sync *sync, rg_tensor *residual) {
    RG_CHECK(residual, "batch_norm2d_add_relu: NULL residual");
    return batch_norm2d(x, weight, bias, running_mean, running_var, num_batches_tracked, train,
                        momentum, eps, sync, residual, true);
}
