/* batchnorm2d.c — the BatchNorm2d layer, as PyTorch's nn.BatchNorm2d(C) (momentum 0.1, eps 1e-5,
 * affine, tracking running statistics) and, once a sync hook is set, nn.SyncBatchNorm.
 *
 * Its state_dict is PyTorch's, in PyTorch's order: weight (C) = 1, bias (C) = 0 (parameters),
 * running_mean (C) = 0, running_var (C) = 1, num_batches_tracked (int64, shape ()) = 0 (buffers). */
#include "layers/layers_impl.h"
#include "ringgrad/layer.h"
#include "ringgrad/ops.h"

typedef struct {
    rg_layer base;
    rg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    float momentum, eps;
    const rg_bn_sync *sync; /* borrowed; NULL: statistics of this rank's batch only */
} bn_layer;

static rg_tensor *bn_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    bn_layer *b = (bn_layer *)l;
    return rg_batch_norm2d(x, b->weight, b->bias, b->running_mean, b->running_var,
                           b->num_batches_tracked, mode == RG_TRAIN, b->momentum, b->eps, b->sync);
}

static const rg_layer_vtable bn_vt = {.kind = "BatchNorm2d", .forward = bn_forward};

rg_tensor *rg_batchnorm2d_layer_forward_relu(rg_layer *l, rg_tensor *x, rg_mode mode) {
    if (!l || l->vt != &bn_vt) return NULL;
    bn_layer *b = (bn_layer *)l;
    return rg_batch_norm2d_relu(x, b->weight, b->bias, b->running_mean, b->running_var,
                                b->num_batches_tracked, mode == RG_TRAIN, b->momentum, b->eps,
                                b->sync);
}

rg_tensor *rg_batchnorm2d_forward_add_relu(rg_layer *l, rg_tensor *x, rg_tensor *residual,
                                           rg_mode mode) {
    if (!l || l->vt != &bn_vt) return NULL;
    bn_layer *b = (bn_layer *)l;
    if (rg_fusion_level() == RG_FUSE_NONE) return rg_relu(rg_add(bn_forward(l, x, mode), residual));
    return rg_batch_norm2d_add_relu(x, b->weight, b->bias, b->running_mean, b->running_var,
                                    b->num_batches_tracked, mode == RG_TRAIN, b->momentum, b->eps,
                                    b->sync, residual);
}

static rg_tensor *new_f32(const char *name, int64_t c, float v) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(c), RG_CPU);
    RG_CHECK_ALLOC(t, "BatchNorm2d %s: %s", name, rg_last_error());
    if (v != 0.0f) rg_tensor_fill_(t, v);
    return t;
}

rg_layer *rg_batchnorm2d_new(const char *name, int64_t channels) {
    const char *nm = name ? name : "";
    RG_CHECK(channels > 0, "BatchNorm2d %s: %lld channels", nm, (long long)channels);
    bn_layer *b = (bn_layer *)rg_layer_alloc(sizeof *b, &bn_vt, name);
    b->momentum = 0.1f, b->eps = 1e-5f;
    b->weight = rg_layer_add_param(&b->base, "weight", new_f32(nm, channels, 1.0f), false);
    b->bias = rg_layer_add_param(&b->base, "bias", new_f32(nm, channels, 0.0f), false);
    b->running_mean = rg_layer_add_param(&b->base, "running_mean", new_f32(nm, channels, 0.0f),
                                         true);
    b->running_var = rg_layer_add_param(&b->base, "running_var", new_f32(nm, channels, 1.0f),
                                        true);
    rg_tensor *nbt = rg_tensor_new(RG_I64, 0, NULL, RG_CPU);
    RG_CHECK_ALLOC(nbt, "BatchNorm2d %s: %s", nm, rg_last_error());
    b->num_batches_tracked = rg_layer_add_param(&b->base, "num_batches_tracked", nbt, true);
    return &b->base;
}

bool rg_batchnorm2d_set_sync(rg_layer *l, const rg_bn_sync *sync) {
    if (!l || l->vt != &bn_vt) return false;
    ((bn_layer *)l)->sync = sync;
    return true;
}
