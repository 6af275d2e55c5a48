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
 * The gather adds in increasing output order, exactly as the CPU loop does. */
#include "tensor/cuda/cuda_impl.h"

/* y, argmax (N,C,P,Q) = max and its flat in-plane index over each window of x (N,C,H,W) */
__global__ void maxpool2d_forward_kernel(rg_pool2d_shape s, const float *x, float *y,
                                         int32_t *argmax) {
    int64_t pq = s.p * s.q;
    RG_CUDA_FOR(i, s.n * s.c * pq) {
        int64_t plane = i / pq, p = i % pq / s.q, q = i % s.q;
        const float *xp = x + plane * s.h * s.w;
        float best = -INFINITY;
        int32_t at = -1;
        for (int r = 0; r < s.kernel_h; r++) {
            int64_t h = p * s.stride_h - s.pad_h + r;
            if (h < 0 || h >= s.h) continue;
            for (int t = 0; t < s.kernel_w; t++) {
                int64_t w = q * s.stride_w - s.pad_w + t;
                if (w < 0 || w >= s.w) continue;
                float v = xp[h * s.w + w];
                if (v > best || at < 0 || v != v) best = v, at = (int32_t)(h * s.w + w);
            }
        }
        y[i] = best;
        argmax[i] = at;
    }
}

void rg_cuda_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y,
                               int32_t *argmax) {
    RG_CHECK(s->h * s->w <= INT32_MAX, "cuda max_pool2d: plane %lldx%lld too large for an int32 "
             "argmax", (long long)s->h, (long long)s->w);
    int64_t n = s->n * s->c * s->p * s->q;
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    maxpool2d_forward_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        *s, x, y, argmax);
    RG_CUDA_CHECK_LAUNCH();
}

/* First and last output index (along one axis) whose window covers input index h. */
static __device__ __forceinline__ void covering(int64_t h, int pad, int kernel, int stride,
                                                int64_t outs, int64_t *lo, int64_t *hi) {
    int64_t first = h + pad - kernel + 1; /* lowest window start that still reaches h */
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    int64_t last = (h + pad) / stride;
    *hi = last < outs - 1 ? last : outs - 1;
}

/* dx (N,C,H,W) = beta*dx + sum of dy (N,C,P,Q) over the outputs whose argmax is this element */
__global__ void maxpool2d_backward_kernel(rg_pool2d_shape s, const float *dy,
                                          const int32_t *argmax, float beta, float *dx) {
    int64_t hw = s.h * s.w, pq = s.p * s.q;
    RG_CUDA_FOR(i, s.n * s.c * hw) {
        int64_t plane = i / hw, h = i % hw / s.w, w = i % s.w;
        int64_t p0, p1, q0, q1;
        covering(h, s.pad_h, s.kernel_h, s.stride_h, s.p, &p0, &p1);
        covering(w, s.pad_w, s.kernel_w, s.stride_w, s.q, &q0, &q1);
        const float *dyp = dy + plane * pq;
        const int32_t *ap = argmax + plane * pq;
        float g = beta == 0.0f ? 0.0f : beta * dx[i];
        for (int64_t p = p0; p <= p1; p++)
            for (int64_t q = q0; q <= q1; q++)
                if (ap[p * s.q + q] == (int32_t)(h * s.w + w)) g += dyp[p * s.q + q];
        dx[i] = g;
    }
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
