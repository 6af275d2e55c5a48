/* batchnorm2d.cu — batch normalisation on the GPU (pairs with tensor/cpu/batchnorm2d.c; the
 * per-element formulas are shared through core/kernels.h).
 *
 * Why not cuDNN's cudnnBatchNormalizationForwardTraining: it fuses statistics and normalisation
 * in one call, so SyncBatchNorm could not sum the statistics across ranks between the two. One
 * set of split kernels serves both BatchNorm and SyncBatchNorm, and matches the CPU's passes:
 * the reductions give one block per channel (a fixed-order block sum in double, so a run has the
 * same bits every time), the elementwise passes are grid-stride loops. */
#include "tensor/cuda/cuda_impl.h"

#define BN_BLOCK 256

/* Sum over the block in double, returned to every thread (blockDim.x == BN_BLOCK). */
static __device__ double bn_block_sum(double v) {
    __shared__ double part[BN_BLOCK / 32];
    __shared__ double total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < BN_BLOCK / 32 ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) total = v;
    }
    __syncthreads();
    double r = total;
    __syncthreads(); /* total and part are reused by the caller's next sum */
    return r;
}

/* one block per channel: stats (2C+1) = (sum x, sum x^2, N*HW) */
__global__ void bn_stats_kernel(int64_t n, int64_t c, int64_t hw, const float *x, float *stats) {
    int64_t ch = blockIdx.x, m = n * hw;
    double s = 0.0, ss = 0.0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
        float v = x[((k / hw) * c + ch) * hw + k % hw];
        s += v, ss += (double)v * v;
    }
    s = bn_block_sum(s);
    ss = bn_block_sum(ss);
    if (threadIdx.x == 0) {
        stats[ch] = (float)s, stats[c + ch] = (float)ss;
        if (ch == 0) stats[2 * c] = (float)m;
    }
}

void rg_cuda_batchnorm_stats(int64_t n, int64_t c, int64_t hw, const float *x, float *stats) {
    if (c <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    bn_stats_kernel<<<(unsigned)c, BN_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, c, hw, x, stats);
    RG_CUDA_CHECK_LAUNCH();
}

__global__ void bn_finalize_kernel(int64_t c, float momentum, const float *stats, float *meanvar,
                                   float *rmean, float *rvar, int64_t *num_batches) {
    RG_CUDA_FOR(ch, c) rg_bn_finalize_channel(c, ch, momentum, stats, meanvar, rmean, rvar);
    if (num_batches && blockIdx.x == 0 && threadIdx.x == 0) ++*num_batches;
}

void rg_cuda_batchnorm_finalize(int64_t c, float momentum, const float *stats, float *meanvar,
                                float *running_mean, float *running_var, int64_t *num_batches) {
    if (c <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    bn_finalize_kernel<<<rg_cuda_grid(ctx, c), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        c, momentum, stats, meanvar, running_mean, running_var, num_batches);
    RG_CUDA_CHECK_LAUNCH();
}

__global__ void bn_apply_kernel(int64_t total, int64_t c, int64_t hw, const float *x,
                                const float *mean, const float *var, float eps,
                                const float *weight, const float *bias, float *y) {
    RG_CUDA_FOR(i, total) {
        int64_t ch = (i / hw) % c;
        float a = (weight ? weight[ch] : 1.0f) * rg_bn_invstd(var[ch], eps);
        y[i] = a * (x[i] - mean[ch]) + (bias ? bias[ch] : 0.0f);
    }
}

void rg_cuda_batchnorm_apply(int64_t n, int64_t c, int64_t hw, const float *x, const float *mean,
                             const float *var, float eps, const float *weight, const float *bias,
                             float *y) {
    int64_t total = n * c * hw;
    if (total <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    bn_apply_kernel<<<rg_cuda_grid(ctx, total), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        total, c, hw, x, mean, var, eps, weight, bias, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* one block per channel: sums (2C+1) = (sum dy, sum dy*xhat, N*HW) */
__global__ void bn_backward_reduce_kernel(int64_t n, int64_t c, int64_t hw, const float *x,
                                          const float *dy, const float *mean, const float *var,
                                          float eps, float *sums) {
    int64_t ch = blockIdx.x, m = n * hw;
    float mu = mean[ch];
    double sd = 0.0, sdx = 0.0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
        int64_t i = ((k / hw) * c + ch) * hw + k % hw;
        sd += dy[i], sdx += (double)dy[i] * (x[i] - mu);
    }
    sd = bn_block_sum(sd);
    sdx = bn_block_sum(sdx);
    if (threadIdx.x == 0) {
        sums[ch] = (float)sd, sums[c + ch] = (float)(sdx * rg_bn_invstd(var[ch], eps));
        if (ch == 0) sums[2 * c] = (float)m;
    }
}

void rg_cuda_batchnorm_backward_reduce(int64_t n, int64_t c, int64_t hw, const float *x,
                                       const float *dy, const float *mean, const float *var,
                                       float eps, float *sums) {
    if (c <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    bn_backward_reduce_kernel<<<(unsigned)c, BN_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, c, hw, x, dy, mean, var, eps, sums);
    RG_CUDA_CHECK_LAUNCH();
}

__global__ void bn_backward_data_kernel(int64_t total, int64_t c, int64_t hw, const float *x,
                                        const float *dy, const float *mean, const float *var,
                                        float eps, const float *weight, const float *sums,
                                        float beta, float *dx) {
    RG_CUDA_FOR(i, total) {
        int64_t ch = (i / hw) % c;
        float inv = rg_bn_invstd(var[ch], eps);
        float count = sums ? sums[2 * c] : 1.0f;
        float mean_dy = sums ? sums[ch] / count : 0.0f;
        float mean_dy_xhat = sums ? sums[c + ch] / count : 0.0f;
        float v = rg_bn_dx(dy[i], (x[i] - mean[ch]) * inv, (weight ? weight[ch] : 1.0f) * inv,
                           mean_dy, mean_dy_xhat);
        dx[i] = beta == 0.0f ? v : v + beta * dx[i];
    }
}

void rg_cuda_batchnorm_backward_data(int64_t n, int64_t c, int64_t hw, const float *x,
                                     const float *dy, const float *mean, const float *var,
                                     float eps, const float *weight, const float *sums,
                                     float beta, float *dx) {
    int64_t total = n * c * hw;
    if (total <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    bn_backward_data_kernel<<<rg_cuda_grid(ctx, total), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        total, c, hw, x, dy, mean, var, eps, weight, sums, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}
