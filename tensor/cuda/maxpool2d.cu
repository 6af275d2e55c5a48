/* maxpool2d.cu — max pooling on the GPU with custom kernels (pairs with tensor/cpu/maxpool2d.c).
 *
 * Why not cudnnPoolingForward: the op layer saves, for each output, the flat index of its maximum
 * within the (n, c) input plane (int32 argmax) and backward routes dy there; cuDNN keeps no such
 * index and recomputes the maximum in its backward. These kernels produce and consume the CPU's
 * argmax layout, with the CPU's rules for ties (first maximum) and NaN, so the op front-end is
 * unchanged and the two backends agree bit for bit.
 *
 * Backward is written as a gather, one thread per INPUT element summing the dy of the outputs
 * whose window chose it, instead of a scatter from each output: overlapping windows (stride <
 * kernel) would need atomicAdd, whose order — and so whose rounding — changes from run to run.
 * The gather adds in increasing output order, exactly as the CPU loop does. The per-thread bodies
 * are in per_thread.h, where the CPU tests run them against tensor/cpu/maxpool2d.c. */
#include "tensor/cuda/cuda_impl.h"

/* y, argmax (N,C,P,Q) = max and its flat in-plane index over each window of x (N,C,H,W) */
__global__ void maxpool2d_forward_kernel(rg_pool2d_shape s, const float *x, float *y,
                                         int32_t *argmax) {
    RG_CUDA_FOR(i, s.n * s.c * s.p * s.q) rg_maxpool2d_forward_at(&s, x, i, y, argmax);
}

void rg_cuda_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y,
                               int32_t *argmax) {
    RG_CHECK(s->h * s->w <= INT32_MAX,
             "cuda max_pool2d: plane %lldx%lld too large for an int32 "
             "argmax",
             (long long)s->h, (long long)s->w);
    int64_t n = s->n * s->c * s->p * s->q;
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    maxpool2d_forward_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        *s, x, y, argmax);
    RG_CUDA_CHECK_LAUNCH();
}

/* dx (N,C,H,W) = beta*dx + sum of dy (N,C,P,Q) over the outputs whose argmax is this element */
__global__ void maxpool2d_backward_kernel(rg_pool2d_shape s, const float *dy, const int32_t *argmax,
                                          float beta, float *dx) {
    RG_CUDA_FOR(i, s.n * s.c * s.h * s.w) rg_maxpool2d_backward_at(&s, dy, argmax, beta, dx, i);
}

void rg_cuda_maxpool2d_backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax,
                                float beta, float *dx) {
    int64_t n = s->n * s->c * s->h * s->w;
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    maxpool2d_backward_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        *s, dy, argmax, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}
