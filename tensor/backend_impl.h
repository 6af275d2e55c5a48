/* backend_impl.h — a backend is a table of kernels, one entry per op (like ggml-backend's iface).
 *
 * The op layer (ops/) checks shapes, allocates outputs and records the tape; then it calls
 * exactly one backend entry through rg_backend_for(device). Kernels take raw device pointers and
 * sizes, as in llm.c, so a kernel reads the same on the CPU and in CUDA. Every backward kernel
 * takes `beta`, as cuDNN does: out = result + beta * out, with beta 0 (overwrite; out may hold
 * garbage) or 1 (accumulate into an existing gradient).
 *
 * #ifdef RG_CUDA appears only in the dispatcher (tensor/dispatch.c) and in CMake. Internal: users
 * see devices, threads and memory statistics through ringgrad/device.h. */
#ifndef RG_BACKEND_IMPL_H
#define RG_BACKEND_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernels.h"
#include "ringgrad/device.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Binary elementwise ops: out = a (op) b, with b broadcast against a. */
#define RG_BINARY_OPS(X)                                                                           \
    X(ADD, add) /* a + b */                                                                        \
    X(MUL, mul) /* a * b */

typedef enum {
#define RG_BINARY_ENUM(NAME, name) RG_BINARY_##NAME,
    RG_BINARY_OPS(RG_BINARY_ENUM)
#undef RG_BINARY_ENUM
        RG_BINARY_COUNT
} rg_binary_op;

/* How b (or a gradient of b's shape) lines up with an output of a's shape. Dimensions are
 * collapsed where possible; bstride is 0 along the dimensions b is broadcast over. */
typedef struct {
    int ndim;
    int64_t shape[RG_MAX_DIMS];   /* the output's (== a's) shape after collapsing */
    int64_t bstride[RG_MAX_DIMS]; /* b's strides in elements, 0 on broadcast dims */
    int64_t n;                    /* output elements */
    int64_t nb;                   /* b elements */
} rg_bcast;

/* 2-D convolution, square or not; no groups, no dilation. */
typedef struct {
    int64_t n, c, h, w;       /* input (N,C,H,W) */
    int64_t k, r, s;          /* weight (K,C,R,S) */
    int64_t p, q;             /* output (N,K,P,Q) */
    int stride_h, stride_w, pad_h, pad_w;
    /* A ReLU fused onto the output (rg_conv2d_relu). Forward: relu writes max(0, conv) instead of
     * conv. Backward: relu_y, when not NULL, is that forward's output y (N,K,P,Q), and dy is the
     * gradient of y: the passes use dy where y > 0 and 0 elsewhere, as the ReLU's backward would
     * have written it (NaN in y passes dy, as rg_relu's backward). */
    bool relu;
    const float *relu_y;
    /* A max-pool fused onto the output, after the ReLU if there is one
     * (rg_conv2d_relu_maxpool2d); NULL otherwise. pool->(n, c, h, w) is (n, k, p, q). Forward:
     * y is the pooled output (N, K, pool->p, pool->q), and pool_argmax receives the pool's argmax
     * (as maxpool2d_forward writes it). Backward: dy is the gradient of that pooled output,
     * pool_argmax routes it back, and relu_y (with a ReLU) is the pooled output: the passes see
     * what max-pool's backward and then the ReLU's would have written. */
    const struct rg_pool2d_shape *pool;
    int32_t *pool_argmax;
} rg_conv2d_shape;

typedef struct rg_pool2d_shape {
    int64_t n, c, h, w; /* input (N,C,H,W) */
    int64_t p, q;       /* output (N,C,P,Q) */
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
} rg_pool2d_shape;

/* One tensor of a multi-tensor SGD step (sgd_step_many): n floats of param, grad and the momentum
 * buffer (NULL without momentum), and the rule's hyper-parameters for it. */
typedef struct {
    int64_t n;
    float *param;
    const float *grad;
    float *momentum_buf;
    rg_sgd_hparams h;
} rg_sgd_tensor;

typedef enum { RG_COPY_H2H, RG_COPY_H2D, RG_COPY_D2H, RG_COPY_D2D, RG_COPY_KIND_COUNT } rg_copy_kind;



/* ---- the kernel list: X(return type, name, (parameters)) ----
 * The one declaration of every backend entry. It generates the rg_backend struct below, the CPU
 * prototypes (rg_cpu_<name>, tensor/cpu/cpu.h), the CUDA prototypes (rg_cuda_<name>,
 * tensor/cuda/cuda_impl.h), both tables (tensor/cpu/backend.c, tensor/cuda/backend.cu) and the
 * test that no entry is NULL (tests/tensor/test_backend.c). A new kernel is one line here, then
 * its CPU and CUDA implementations. */
#define RG_BACKEND_KERNELS(X)                                                                      \
    /* ---- memory ---- */                                                                         \
    X(void *, alloc, (size_t bytes)) /* NULL when out of memory; 64-byte aligned */                \
    X(void, free, (void *p, size_t bytes))                                                         \
    X(void, memset0, (void *p, size_t bytes))                                                      \
    /* p[i][0..n[i]) = 0 for i < count, in as few launches as the backend can (CUDA: one per       \
     * 128 tensors): zeroing a model's gradients one memset per tensor is launch-bound on a GPU */ \
    X(void, zero_f32_many, (int count, float *const *p, const int64_t *n))                         \
    X(void, copy, (void *dst, const void *src, size_t bytes, rg_copy_kind kind))                   \
    X(void, synchronize, (void)) /* wait for all queued work of this backend */                    \
    X(rg_mem_stats, mem_stats, (void))                                                             \
    X(void, mem_release_cached, (void))                                                            \
    /* host memory for staging batches: page-locked on CUDA, so that H2D copies from it run        \
     * asynchronously; plain cached host memory on the CPU. A block may be freed as soon as its    \
     * copy has been queued: the CUDA backend reuses it only after the copy has run. */            \
    X(void *, host_alloc, (size_t bytes)) /* NULL when out of memory; 64-byte aligned */           \
    X(void, host_free, (void *p, size_t bytes))                                                    \
                                                                                                   \
    /* ---- elementwise and reductions (float32; n elements) ---- */                               \
    X(void, fill, (int64_t n, float v, float *x))                                                  \
    X(void, axpby, (int64_t n, float a, const float *x, float b, float *y)) /* y = a*x + b*y */    \
    X(void, binary,                                                                                \
      (rg_binary_op op, const rg_bcast *bc, const float *a, const float *b, float *out))           \
    /* db = beta*db + sum of dy over the dimensions b was broadcast along; dy has out's shape. If  \
     * x is not NULL the summand is dy*x (for the gradient of a product), x having out's shape. */ \
    X(void, reduce_bcast,                                                                          \
      (const rg_bcast *bc, const float *dy, const float *x, float beta, float *db))                \
    X(void, relu_forward, (int64_t n, const float *x, float *y))                                   \
    X(void, relu_backward, (int64_t n, const float *x, const float *dy, float beta, float *dx))    \
    X(void, sum, (int64_t n, const float *x, float *out)) /* out: one element */                   \
    X(void, argmax, (int64_t rows, int64_t cols, const float *x, int64_t *out)) /* per row */      \
    /* counter-based fills (core/kernels.h): x[i] from stream element offset + i; a normal uses    \
     * elements offset + 2i and offset + 2i + 1 */                                                 \
    X(void, uniform, (int64_t n, float lo, float hi, uint64_t seed, uint64_t offset, float *x))    \
    X(void, normal, (int64_t n, float mean, float std, uint64_t seed, uint64_t offset, float *x))  \
                                                                                                   \
    /* ---- matrix product, row-major: C = alpha * op(A) * op(B) + beta * C;                       \
     * op(A) is (m,k), op(B) is (k,n), C is (m,n); lda/ldb/ldc are row strides ---- */             \
    X(void, gemm,                                                                                  \
      (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,   \
       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc))               \
                                                                                                   \
    /* ---- convolution: y = conv(x, w) + b;  x (N,C,H,W), w (K,C,R,S), b (K) or NULL ---- */      \
    X(void, conv2d_forward,                                                                        \
      (const rg_conv2d_shape *s, const float *x, const float *w, const float *b, float *y))        \
    /* dx = beta*dx + conv_transpose(dy, w) */                                                     \
    X(void, conv2d_backward_data,                                                                  \
      (const rg_conv2d_shape *s, const float *dy, const float *w, float beta, float *dx))          \
    /* dw = beta*dw + corr(x, dy);  db = beta*db + sum_{n,p,q} dy (db may be NULL) */              \
    X(void, conv2d_backward_filter,                                                                \
      (const rg_conv2d_shape *s, const float *x, const float *dy, float beta, float *dw,           \
       float *db))                                                                                 \
    /* the two above in one call, so that they share their reading of dy; dx or dw may be NULL, */ \
    /* db (may be NULL) only with dw */                                                            \
    X(void, conv2d_backward,                                                                       \
      (const rg_conv2d_shape *s, const float *x, const float *dy, const float *w, float beta_x,    \
       float *dx, float beta_w, float *dw, float *db))                                             \
                                                                                                   \
    /* ---- max pooling; argmax holds the flat input index (within one (n,c) plane) of each max */ \
    X(void, maxpool2d_forward,                                                                     \
      (const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax))                       \
    X(void, maxpool2d_backward,                                                                    \
      (const rg_pool2d_shape *s, const float *dy, const int32_t *argmax, float beta, float *dx))   \
                                                                                                   \
    /* ---- batch normalisation over x (N,C,HW), per channel; a statistics buffer is (3C+1):       \
     * two per-channel sums and the element count, which SyncBatchNorm sums across ranks in one    \
     * allreduce (its first 2C+1 floats), then the shift of each channel's sums.                   \
     * mean, var (C); var biased; weight, bias (C) ---- */                                         \
    /* stats = (sum (x-K), sum (x-K)^2, N*HW, K): sums about a shift K per channel, K = shift[ch], \
     * or where shift is NULL the channel's first value (image 0, pixel 0). Sums of x and x^2      \
     * leave float nothing of the variance when a channel's mean is thousands of its standard      \
     * deviations; about a value of the channel they keep it. Summing two ranks' buffers needs     \
     * the same shift on both. */                                                                  \
    X(void, batchnorm_stats,                                                                       \
      (int64_t n, int64_t c, int64_t hw, const float *x, const float *shift, float *stats))        \
    /* meanvar (2C+1) = (mean, biased var, count) from stats; running_mean/var (may be NULL)       \
     * = (1-momentum)*running + momentum*(mean | unbiased var); *num_batches += 1 (may be NULL) */ \
    X(void, batchnorm_finalize,                                                                    \
      (int64_t c, float momentum, const float *stats, float *meanvar, float *running_mean,         \
       float *running_var, int64_t *num_batches))                                                  \
    /* y = (x - mean) / sqrt(var + eps) * weight + bias, then + residual (the same shape as x)     \
     * where residual is not NULL, then, when relu, relu(y) (as relu_forward: NaN stays NaN) */    \
    X(void, batchnorm_apply,                                                                       \
      (int64_t n, int64_t c, int64_t hw, const float *x, const float *mean, const float *var,      \
       float eps, const float *weight, const float *bias, const float *residual, bool relu,        \
       float *y))                                                                                  \
    /* batchnorm_stats (shift NULL), batchnorm_finalize and batchnorm_apply in one call, with the  \
     * same results bit for bit: training's forward without SyncBatchNorm. stats is (3C+1) of      \
     * scratch; meanvar (2C+1) as batchnorm_finalize writes it. On small planes the CPU takes a    \
     * run of channels through all three while it is in cache. */                                  \
    X(void, batchnorm_train_forward,                                                               \
      (int64_t n, int64_t c, int64_t hw, const float *x, float momentum, float eps,                \
       const float *weight, const float *bias, const float *residual, bool relu, float *stats,     \
       float *meanvar, float *running_mean, float *running_var, int64_t *num_batches, float *y))   \
    /* Both backward passes: where relu_y (the fused ReLU's output, the op's y) is not NULL, dy    \
     * stands for rg_k_relu_grad(relu_y, dy), 0 where relu_y <= 0, so that the masked copy of dy   \
     * is never written.                                                                           \
     * sums = (sum dy, sum dy*xhat, N*HW), xhat = (x - mean) / sqrt(var + eps); and the affine     \
     * parameters' gradients from them where not NULL: dweight = beta_w*dweight + sum dy*xhat,     \
     * dbias = beta_b*dbias + sum dy (a beta of 0 does not read the old values) */                 \
    X(void, batchnorm_backward_reduce,                                                             \
      (int64_t n, int64_t c, int64_t hw, const float *x, const float *dy, const float *relu_y,     \
       const float *mean, const float *var, float eps, float *sums, float beta_w, float *dweight,  \
       float beta_b, float *dbias))                                                                \
    /* dx = beta*dx + w*invstd*(dy - sum_dy/count - xhat*sum_dy_xhat/count), count = sums[2C];     \
     * sums NULL (statistics were constants, evaluation mode): dx = beta*dx + w*invstd*dy */       \
    X(void, batchnorm_backward_data,                                                               \
      (int64_t n, int64_t c, int64_t hw, const float *x, const float *dy, const float *relu_y,     \
       const float *mean, const float *var, float eps, const float *weight, const float *sums,     \
       float beta, float *dx))                                                                     \
    /* batchnorm_backward_reduce, then batchnorm_backward_data with the sums it wrote, in one      \
     * call, with the same results bit for bit: training's backward without SyncBatchNorm. sums    \
     * (2C+1) as batchnorm_backward_reduce writes it. On small planes the CPU takes a run of       \
     * channels through both while its x and dy are in cache. */                                   \
    X(void, batchnorm_backward,                                                                    \
      (int64_t n, int64_t c, int64_t hw, const float *x, const float *dy, const float *relu_y,     \
       const float *mean, const float *var, float eps, const float *weight, float *sums,           \
       float beta_w, float *dweight, float beta_b, float *dbias, float beta, float *dx))           \
                                                                                                   \
    /* ---- dropout: keep(i) = rg_dropout_keep(p, seed, offset + i). Forward writes the keeps      \
     * into mask (rg_dropout_mask_words(n, offset) words, laid out as core/kernels.h says) unless  \
     * mask is NULL; backward reads them from mask, or recomputes them from (seed, offset) when    \
     * mask is NULL ---- */                                                                        \
    X(void, dropout_forward,                                                                       \
      (int64_t n, float p, uint64_t seed, uint64_t offset, const float *x, float *y,               \
       uint32_t *mask))                                                                            \
    X(void, dropout_backward,                                                                      \
      (int64_t n, float p, uint64_t seed, uint64_t offset, const uint32_t *mask, const float *dy,  \
       float beta, float *dx))                                                                     \
                                                                                                   \
    /* ---- fused log-softmax + negative log-likelihood, mean over the rows: logits (N,C), labels  \
     * (N) in [0,C); writes probs = softmax(logits) (N,C) for backward and loss (one element) =    \
     * -mean_n log softmax(logits)[n, label_n]; with label smoothing e (PyTorch's formula):        \
     * loss = mean_n [(1-e) nll_n + e/C sum_k -log softmax(logits)[n,k]] ---- */                   \
    X(void, cross_entropy_forward,                                                                 \
      (int64_t n, int64_t c, const float *logits, const int64_t *labels, float smoothing,          \
       float *probs, float *loss))                                                                 \
    /* dlogits = beta*dlogits + dloss * (probs - (1-e) onehot(labels) - e/C) / N;  dloss: one      \
     * element */                                                                                  \
    X(void, cross_entropy_backward,                                                                \
      (int64_t n, int64_t c, const float *probs, const int64_t *labels, float smoothing,           \
       const float *dloss, float beta, float *dlogits))                                            \
                                                                                                   \
    /* ---- global average pooling: y (NC) = mean of each of the NC planes of x (NC,HW) ---- */    \
    X(void, avgpool_global_forward, (int64_t nc, int64_t hw, const float *x, float *y))            \
    /* dx = beta*dx + dy / HW broadcast over each plane */                                         \
    X(void, avgpool_global_backward,                                                               \
      (int64_t nc, int64_t hw, const float *dy, float beta, float *dx))                            \
                                                                                                   \
    /* ---- fused optimizer updates (formulas in core/kernels.h) ---- */                           \
    /* SGD (rg_sgd_update) over count tensors, in as few launches as the backend can (CUDA: one    \
     * per 48); a single tensor is a list of one */                                                \
    X(void, sgd_step_many, (int count, const rg_sgd_tensor *t))                                    \
    X(void, adam_step,                                                                             \
      (int64_t n, const rg_adam_hparams *h, float *param, const float *grad, float *m, float *v))  \
                                                                                                   \
    /* ---- float16 packing for gradient compression ---- */                                       \
    X(void, f32_to_f16, (int64_t n, const float *x, uint16_t *y))                                  \
    X(void, f16_to_f32, (int64_t n, const uint16_t *x, float *y))

typedef struct rg_backend {
    const char *name; /* "cpu", "cuda" */
#define RG_BACKEND_FIELD(ret, fn, params) ret(*fn) params;
    RG_BACKEND_KERNELS(RG_BACKEND_FIELD)
#undef RG_BACKEND_FIELD
} rg_backend;

/* The backend that runs ops on `dev`. Stops (RG_CHECK) for a device this build cannot use. */
const rg_backend *rg_backend_for(rg_device dev);

/* The table of a device type without touching the device (no context is made, no GPU needed):
 * for the test that checks every entry. NULL when this build has no such backend. */
const rg_backend *rg_backend_table(rg_device_type type, int index);

/* The CPU backend's table for the instruction set chosen at start-up (tensor/cpu/isa.c): the
 * first use reads RG_ISA and stops (RG_CHECK) when it names no set this CPU and build can run. */
const rg_backend *rg_cpu_backend_get(void);
#define rg_cpu_backend (*rg_cpu_backend_get())

/* The CPU table of one instruction set ("generic", "avx2", "avx512", "native"), for tests and
 * benchmarks that compare them; NULL when this build lacks that set or this CPU cannot run it. */
const rg_backend *rg_cpu_backend_isa(const char *name);

#ifdef __cplusplus
}
#endif

#endif
