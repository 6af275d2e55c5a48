/* ops.h — the differentiable ops. Each returns a new tensor owned by the current step scope and,
 * when an input requires a gradient, records itself on the tape. Inputs must share one device.
 * Misuse (shape, dtype or device mismatch) stops with a message naming the op and the shapes.
 *
 * Each op lives in ops/<op>.c with its forward and its backward side by side; the kernels
 * it calls are in tensor/cpu/<op>.c and tensor/cuda/<op>.cu. */
#ifndef RG_OPS_H
#define RG_OPS_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- matrix products (ops/matmul.c) ---- */
/* y = a b;                    a (M,K), b (K,N) -> (M,N) */
RG_API rg_tensor *rg_matmul(rg_tensor *a, rg_tensor *b);
/* y = x w^T + bias;           x (N,in), w (out,in), bias (out) or NULL -> (N,out) */
RG_API rg_tensor *rg_linear(rg_tensor *x, rg_tensor *w, rg_tensor *bias);

/* ---- elementwise (ops/elementwise.c) ---- */
/* y = a + b, y = a * b;  b broadcasts against a with NumPy's rules (either operand may be the
 * smaller one, as long as one of them has the result's shape) */
RG_API rg_tensor *rg_add(rg_tensor *a, rg_tensor *b);
RG_API rg_tensor *rg_mul(rg_tensor *a, rg_tensor *b);
/* y = s x */
RG_API rg_tensor *rg_scale(rg_tensor *x, float s);
/* y = max(x, 0) */
RG_API rg_tensor *rg_relu(rg_tensor *x);

/* ---- reductions (ops/reduce.c) ---- */
/* sum and mean of all elements -> one element (shape ()) */
RG_API rg_tensor *rg_sum(rg_tensor *x);
RG_API rg_tensor *rg_mean(rg_tensor *x);
/* index of the largest element along the last dimension; x (..., C) -> int64 (...); no gradient */
RG_API rg_tensor *rg_argmax(rg_tensor *x);

/* ---- shape (ops/reshape.c): views, no copy ---- */
/* one dimension of `shape` may be -1 (inferred) */
RG_API rg_tensor *rg_reshape(rg_tensor *x, int ndim, const int64_t *shape);
/* (N, d1, d2, ...) -> (N, d1*d2*...), in C,H,W order */
RG_API rg_tensor *rg_flatten(rg_tensor *x);

/* ---- convolution and pooling (ops/conv2d.c, ops/maxpool2d.c) ---- */
/* y = conv(x, w) + bias;  x (N,C,H,W), w (K,C,R,S), bias (K) or NULL -> (N,K,P,Q) with
 * P = (H + 2 padding - R) / stride + 1 and likewise Q */
RG_API rg_tensor *rg_conv2d(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride, int padding);
/* rg_relu(rg_conv2d(...)) in one op, with the same results bit for bit: the ReLU is applied as
 * the convolution writes y, and its gradient mask as the backward reads dy, which saves two
 * passes over y (Sequential fuses a Conv2d followed by a ReLU into it: see layer.h) */
RG_API rg_tensor *rg_conv2d_relu(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride,
                                 int padding);
/* rg_max_pool2d(rg_conv2d_relu(...), pool_kernel, pool_stride, pool_padding) in one op, with the
 * same results bit for bit: on the CPU the convolution's output and its gradient never reach
 * memory (Sequential fuses Conv2d, ReLU, MaxPool2d into it) */
RG_API rg_tensor *rg_conv2d_relu_maxpool2d(rg_tensor *x, rg_tensor *w, rg_tensor *bias, int stride,
                                           int padding, int pool_kernel, int pool_stride,
                                           int pool_padding);
/* y[n,c,p,q] = max over the kernel window;  x (N,C,H,W) -> (N,C,P,Q); padding counts as -inf */
RG_API rg_tensor *rg_max_pool2d(rg_tensor *x, int kernel, int stride, int padding);
/* y[n,c,0,0] = mean of x[n,c,:,:] (PyTorch's AdaptiveAvgPool2d(1));  x (N,C,H,W) -> (N,C,1,1)
 * (ops/avgpool.c) */
RG_API rg_tensor *rg_global_avg_pool2d(rg_tensor *x);

/* ---- batch normalisation (ops/batchnorm2d.c) ---- */
/* SyncBatchNorm's hook, set by a higher layer (the trainer, through dist/): sums buf (n floats on
 * dev) elementwise over every rank, in place. Returns RG_OK or a status with rg_last_error(). */
typedef struct rg_bn_sync {
    rg_status (*allreduce_sum)(void *ctx, float *buf, int64_t n, rg_device dev);
    void *ctx;
} rg_bn_sync;
/* PyTorch's BatchNorm2d per channel of x (N,C,H,W) -> (N,C,H,W):
 * y = (x - mean) / sqrt(var + eps) * weight + bias. Training: mean and biased var over (N,H,W)
 * (over every rank's batch when sync is not NULL: SyncBatchNorm), and running_mean/var (C) move
 * by `momentum` towards mean and the unbiased var, num_batches_tracked (int64, one element) += 1.
 * Evaluation: mean, var = running_mean, running_var. weight, bias (C) may be NULL (no affine);
 * running statistics and num_batches_tracked may be NULL in training. */
RG_API rg_tensor *rg_batch_norm2d(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                                  rg_tensor *running_mean, rg_tensor *running_var,
                                  rg_tensor *num_batches_tracked, bool train, float momentum,
                                  float eps, const rg_bn_sync *sync);
/* rg_relu(rg_batch_norm2d(...)) in one op, with the same results bit for bit: the ReLU is applied
 * as the normalisation writes y, which saves a pass over y and the stored pre-ReLU activation
 * (Sequential fuses a BatchNorm2d followed by a ReLU into it: see layer.h). */
RG_API rg_tensor *rg_batch_norm2d_relu(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                                       rg_tensor *running_mean, rg_tensor *running_var,
                                       rg_tensor *num_batches_tracked, bool train, float momentum,
                                       float eps, const rg_bn_sync *sync);
/* rg_relu(rg_add(rg_batch_norm2d(...), residual)) in one op, bit for bit: a residual block's end
 * (the ResNet blocks of models/resnet.c run their last BatchNorm2d, the shortcut's add and the
 * ReLU as this). residual has x's shape and gets dy masked by y > 0 as its gradient. */
RG_API rg_tensor *rg_batch_norm2d_add_relu(rg_tensor *x, rg_tensor *weight, rg_tensor *bias,
                                           rg_tensor *running_mean, rg_tensor *running_var,
                                           rg_tensor *num_batches_tracked, bool train,
                                           float momentum, float eps, const rg_bn_sync *sync,
                                           rg_tensor *residual);

/* ---- regularisation (ops/dropout.c) ---- */
/* Training: y = keep ? x / (1-p) : 0 with P(keep) = 1-p (p quantised to 2^-16), the mask drawn
 * from Philox stream (seed, *offset); *offset advances by numel rounded up to a multiple of 8 (a
 * Philox counter's eight decisions). Evaluation (train false) or p == 0: y = x. */
RG_API rg_tensor *rg_dropout(rg_tensor *x, float p, bool train, uint64_t seed, uint64_t *offset);

/* ---- loss (ops/cross_entropy.c) ---- */
/* Fused, numerically stable log-softmax + negative log-likelihood, mean over the batch:
 * loss = -1/N sum_n log softmax(logits[n])[labels[n]];  logits (N,C) float32, labels (N) int64
 * with values in [0, C) (checked) -> one element */
RG_API rg_tensor *rg_cross_entropy(rg_tensor *logits, rg_tensor *labels);
/* The same with label smoothing e in [0, 1] (PyTorch's label_smoothing):
 * loss = mean_n [(1-e) nll_n + e mean_k -log softmax(logits[n])[k]] */
RG_API rg_tensor *rg_cross_entropy_smooth(rg_tensor *logits, rg_tensor *labels, float smoothing);

#ifdef __cplusplus
}
#endif

#endif
