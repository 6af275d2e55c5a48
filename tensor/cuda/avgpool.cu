/* avgpool.cu — global average pooling on the GPU (pairs with tensor/cpu/avgpool.c): one warp per
 * plane for the forward sum (a fixed-order shuffle sum), a grid-stride loop for the backward. */
#include "tensor/cuda/cuda_impl.h"

/* y (NC) = mean of each plane of x (NC,HW) */
__global__ void avgpool_global_forward_kernel(int64_t nc, int64_t hw, const float *x, float *y) {
    int lane = threadIdx.x & 31;
    RG_CUDA_FOR_WARP(r, nc) {
        float s = 0.0f;
        for (int64_t j = lane; j < hw; j += 32) s += x[r * hw + j];
        s = rg_warp_sum(s);
        if (lane == 0) y[r] = s / (float)hw;
    }
}

void rg_cuda_avgpool_global_forward(int64_t nc, int64_t hw, const float *x, float *y) {
    if (nc <= 0 || hw <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    avgpool_global_forward_kernel<<<rg_cuda_warp_grid(ctx, nc), RG_CUDA_BLOCK, 0,
                                    rg_cuda_compute(ctx)>>>(nc, hw, x, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* dx (NC,HW) = beta*dx + dy[plane] / HW */
__global__ void avgpool_global_backward_kernel(int64_t nc, int64_t hw, const float *dy,
                                               float beta, float *dx) {
    RG_CUDA_FOR(i, nc * hw) {
        float g = dy[i / hw] / (float)hw;
        dx[i] = beta == 0.0f ? g : g + beta * dx[i];
    }
}

void rg_cuda_avgpool_global_backward(int64_t nc, int64_t hw, const float *dy, float beta,
                                     float *dx) {
    if (nc <= 0 || hw <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    avgpool_global_backward_kernel<<<rg_cuda_grid(ctx, nc * hw), RG_CUDA_BLOCK, 0,
                                     rg_cuda_compute(ctx)>>>(nc, hw, dy, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}
