/* layers_impl.h — what the layers share privately. */
#ifndef RG_LAYERS_IMPL_H
#define RG_LAYERS_IMPL_H

#include "ringgrad/layer.h"

/* relu(forward of the Conv2d l) as one fused op (rg_conv2d_relu), or NULL when l is not a Conv2d.
 * Sequential's fusion (sequential.c) asks each child this way, so that the public vtable stays
 * as it is and layers compiled against it keep working. */
rg_tensor *rg_conv2d_layer_forward_relu(rg_layer *l, rg_tensor *x);

/* max_pool2d(relu(forward of the Conv2d l)) as one fused op (rg_conv2d_relu_maxpool2d), pool
 * being {kernel, stride, padding}; NULL when l is not a Conv2d. */
rg_tensor *rg_conv2d_layer_forward_relu_pool(rg_layer *l, rg_tensor *x, const int pool[3]);

/* relu(forward of the BatchNorm2d l) as one fused op (rg_batch_norm2d_relu), or NULL when l is
 * not a BatchNorm2d. */
rg_tensor *rg_batchnorm2d_layer_forward_relu(rg_layer *l, rg_tensor *x, rg_mode mode);

/* RG_FUSE: 0 fuses nothing, "relu" a Conv2d or BatchNorm2d and its ReLU but not a pool after
 * them (to measure what the pool's fusion adds), anything else (or unset) everything
 * (sequential.c). */
typedef enum { RG_FUSE_NONE, RG_FUSE_RELU, RG_FUSE_ALL } rg_fusion;
rg_fusion rg_fusion_level(void);

/* When l is a MaxPool2d: true, and its {kernel, stride, padding} in pool. */
bool rg_maxpool2d_layer_params(const rg_layer *l, int pool[3]);

#endif
