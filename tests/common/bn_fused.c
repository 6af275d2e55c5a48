/* bn_fused.c — the fused BatchNorm ops against the ops they replace, bit for bit, on any device:
 * tensor/test_batchnorm2d.c runs it on the CPU, cuda/test_cuda_ops.c on the GPU. */
#include <string.h>

#include "rgtest.h"

/* t as a long-lived tensor on dev (t itself on the CPU; else a copy, and t is freed). */
static rg_tensor *on(rg_device dev, rg_tensor *t) {
    if (!t || dev.type == RG_DEV_CPU) return t;
    rg_tensor *d = rg_tensor_new(t->dtype, t->ndim, t->shape, dev);
    cr_assert(d, "%s", rg_last_error());
    rg_tensor_copy_(d, t);
    rg_tensor_set_requires_grad(d, rg_tensor_requires_grad(t));
    rg_tensor_free(t);
    return d;
}

void rgt_bn_fused_matches_unfused(rg_device dev, bool add) {
    const int64_t hs[2] = {5, 9}, ws[2] = {6, 9};
    char name[32];
    for (int t = 0; t < 8; t++) {
        bool train = t & 1, affine = t & 2;
        int64_t h = hs[t >> 2], w = ws[t >> 2], numel = 3 * 4 * h * w;
        float *got[7], *want[7];
        for (int fused = 0; fused < 2; fused++) {
            rg_tensor *x = on(dev, rgt_param(RG_SHAPE(3, 4, h, w), -2, 2, 30));
            rg_tensor *g = affine ? on(dev, rgt_param(RG_SHAPE(4), 0.5, 2, 31)) : NULL;
            rg_tensor *b = affine ? on(dev, rgt_param(RG_SHAPE(4), -1, 1, 32)) : NULL;
            rg_tensor *rm = on(dev, rgt_uniform(RG_SHAPE(4), -1, 1, 33));
            rg_tensor *rv = on(dev, rgt_uniform(RG_SHAPE(4), 0.5, 2, 34));
            rg_tensor *r = on(dev, rgt_uniform(RG_SHAPE(3, 4, h, w), -1, 1, 35));
            rg_tensor *res = add ? on(dev, rgt_param(RG_SHAPE(3, 4, h, w), -1, 1, 36)) : NULL;
            rg_scope_begin();
            rg_tensor *y;
            if (fused && add)
                y = rg_batch_norm2d_add_relu(x, g, b, rm, rv, NULL, train, 0.1f, 1e-5f, NULL, res);
            else if (fused)
                y = rg_batch_norm2d_relu(x, g, b, rm, rv, NULL, train, 0.1f, 1e-5f, NULL);
            else {
                y = rg_batch_norm2d(x, g, b, rm, rv, NULL, train, 0.1f, 1e-5f, NULL);
                y = rg_relu(add ? rg_add(y, res) : y);
            }
            rg_tensor *loss = rg_sum(rg_mul(y, r));
            rg_backward(add ? rg_add(loss, rg_sum(rg_mul(res, r))) : loss);
            float **out = fused ? got : want;
            out[0] = rgt_copy_out(y), out[1] = rgt_copy_out(x->grad);
            out[2] = affine ? rgt_copy_out(g->grad) : NULL;
            out[3] = affine ? rgt_copy_out(b->grad) : NULL;
            out[4] = rgt_copy_out(rm), out[5] = rgt_copy_out(rv);
            out[6] = add ? rgt_copy_out(res->grad) : NULL;
            rg_scope_end();
            int zeros = 0;
            for (int64_t i = 0; i < numel; i++) zeros += out[0][i] == 0.0f;
            cr_assert(zeros > numel / 6 && zeros < numel * 5 / 6, "the ReLU cut %d of %lld", zeros,
                      (long long)numel);
            rgt_free_all(7, (rg_tensor *[]){x, g, b, rm, rv, r, res});
        }
        int64_t n[7] = {numel, numel, 4, 4, 4, 4, numel};
        for (int k = 0; k < 7; k++) {
            cr_assert(!want[k] == !got[k]);
            cr_assert(!want[k] || memcmp(got[k], want[k], (size_t)n[k] * sizeof(float)) == 0,
                      "%s, add %d case %d: output %d differs",
                      rg_device_str(dev, name, sizeof name), add, t, k);
            free(got[k]), free(want[k]);
        }
    }
}
