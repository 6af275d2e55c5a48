/* batchnorm2d.cu — batch normalisation on the GPU (pairs with tensor/cpu/batchnorm2d.c; the
 * per-element formulas are shared through core/kernels.h).
 *
 * Why not cuDNN's cudnnBatchNormalizationForwardTraining: it fuses statistics and normalisation
 * in one call, so SyncBatchNorm could not sum the statistics across ranks between the two. One
 * set of split kernels serves both BatchNorm and SyncBatchNorm, and matches the CPU's passes.
 *
 * How the kernels walk (N,C,H,W): channel ch is N planes of HW contiguous floats, C*HW apart.
 * Each plane is cut into chunks of BN_CHUNK = 32 * BN_VEC elements, and a warp takes a chunk
 * with BN_VEC coalesced loads per lane, all issued before any is used. Nothing divides per
 * element: the plane and channel come once per chunk. A warp, not a block, per chunk keeps the
 * lanes busy on small planes (7x7 = 49 in a ResNet's last stage: one chunk, 49 of 128 slots, of
 * which the last two loads per lane are skipped as a whole).
 *
 * The two reductions (statistics, backward sums) give each channel S blocks (S from the shape
 * alone: enough blocks to fill a large GPU even when C is 64), each block sums its chunks in
 * double with a fixed tree, and a second launch adds the S partials of a channel in order. The
 * grid never depends on the GPU model or on timing, so a run has the same bits every time and on
 * every GPU. The first version gave one block per channel with a 64-bit division per element:
 * 13.0 ms of a ResNet-50 step (batch 32, H200) against cuDNN's 5.4 ms in PyTorch. */
#include "tensor/cuda/cuda_impl.h"

#define BN_BLOCK 256           /* threads per block */
#define BN_VEC 4               /* elements a lane takes from one chunk */
#define BN_CHUNK (32 * BN_VEC) /* elements a warp takes at a time, all from one plane */
#define BN_WARPS (BN_BLOCK / 32)
#define BN_REDUCE_BLOCKS 1024 /* the reductions aim for about this many blocks in all */

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

/* a / b for non-negative a, b, in 32 bits when both fit (a 64-bit division is a long software
 * routine on the GPU; this runs once per chunk) */
static __device__ __forceinline__ int64_t bn_div(int64_t a, int64_t b) {
    return ((a | b) >> 31) == 0 ? (int64_t)((uint32_t)a / (uint32_t)b) : a / b;
}

/* chunks per plane */
static int64_t chunks(int64_t hw) {
    return (hw + BN_CHUNK - 1) / BN_CHUNK;
}

/* ---- the reductions ------------------------------------------------------------------------ */

/* part (2, C, S): over the chunks of channel blockIdx.x that block s = blockIdx.y takes,
 * statistics (BWD false): sum (x - K) and sum (x - K)^2, K = mean[ch] (the shift) or, where mean
 * is NULL, x[0][ch][0], which block 0 writes to kout[ch]; backward (BWD true): sum dy and
 * sum dy*(x - mean) */
template <bool BWD>
__global__ void bn_reduce_kernel(int64_t n, int64_t c, int64_t hw, int64_t q, const float *x,
                                 const float *dy, const float *relu_y, const float *mean,
                                 double *part, float *kout) {
    int64_t ch = blockIdx.x, s = blockIdx.y, nblk = gridDim.y, items = n * q;
    int lane = threadIdx.x & 31;
    /* BWD: the mean; statistics: the shift K (0 for an empty batch, which has no first value) */
    float mu = mean ? mean[ch] : n > 0 && hw > 0 ? x[ch * hw] : 0.0f;
    if (!BWD && s == 0 && threadIdx.x == 0) kout[ch] = mu;
    double a = 0.0, b = 0.0;
    for (int64_t t = s * BN_WARPS + (threadIdx.x >> 5); t < items; t += nblk * BN_WARPS) {
        int64_t p = q == 1 ? t : bn_div(t, q), j0 = (t - p * q) * BN_CHUNK + lane;
        int64_t at = (p * c + ch) * hw;
        float v[BN_VEC], g[BN_VEC];
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) { /* all loads first, so they are in flight together */
            int64_t j = j0 + k * 32;
            v[k] = j < hw ? x[at + j] - (BWD ? 0.0f : mu) : 0.0f; /* statistics: about K */
            if (BWD) g[k] = j < hw ? dy[at + j] : 0.0f;
            if (BWD && relu_y && j < hw) g[k] = rg_k_relu_grad(relu_y[at + j], g[k]);
        }
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) {
            if (BWD) {
                a += g[k], b += (double)g[k] * (v[k] - mu); /* 0 past the plane's end */
            } else {
                a += v[k], b += (double)v[k] * v[k];
            }
        }
    }
    a = bn_block_sum(a);
    b = bn_block_sum(b);
    if (threadIdx.x == 0) part[ch * nblk + s] = a, part[(c + ch) * nblk + s] = b;
}

/* What the backward's combine also writes: the affine parameters' gradients (NULL: not wanted),
 * so that they cost no launches of their own (two per BatchNorm, 106 a ResNet-50 step). */
struct bn_param_grads {
    float beta_w, beta_b;
    float *dweight, *dbias;
};

/* out (2C+1) = the S partials of each channel added in order, the second sum times
 * invstd(var[ch]) when var is given (backward), and the count m; with var, also g's gradients */
__global__ void bn_combine_kernel(int64_t c, int64_t nblk, int64_t m, const double *part,
                                  const float *var, float eps, float *out, bn_param_grads g) {
    RG_CUDA_FOR(ch, c) {
        double a = 0.0, b = 0.0;
        for (int64_t s = 0; s < nblk; s++) a += part[ch * nblk + s], b += part[(c + ch) * nblk + s];
        float sa = (float)a, sb = (float)(var ? b * rg_bn_invstd(var[ch], eps) : b);
        out[ch] = sa, out[c + ch] = sb;
        if (ch == 0) out[2 * c] = (float)m;
        if (g.dweight) g.dweight[ch] = rg_bn_grad_param(sb, g.beta_w, g.dweight[ch]);
        if (g.dbias) g.dbias[ch] = rg_bn_grad_param(sa, g.beta_b, g.dbias[ch]);
    }
}

/* The two launches of one reduction; dy and relu_y are NULL for the statistics, whose shift is
 * mean (NULL: each channel's first value) and is written to kout. */
static void bn_reduce(int64_t n, int64_t c, int64_t hw, const float *x, const float *dy,
                      const float *relu_y, const float *mean, const float *var, float eps,
                      float *out, float *kout, bn_param_grads g) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    cudaStream_t st = rg_cuda_compute(ctx);
    int64_t q = chunks(hw), items = n * q;
    int64_t nblk = (BN_REDUCE_BLOCKS + c - 1) / c, most = (items + BN_WARPS - 1) / BN_WARPS;
    nblk = nblk < most ? nblk : most; /* every warp gets a chunk */
    nblk = nblk < 1 ? 1 : nblk < 65535 ? nblk : 65535;
    double *part = (double *)rg_cuda_scratch(ctx, (size_t)(2 * c * nblk) * sizeof(double));
    dim3 grid((unsigned)c, (unsigned)nblk);
    bool bwd = dy != NULL;
    if (bwd)
        bn_reduce_kernel<true>
            <<<grid, BN_BLOCK, 0, st>>>(n, c, hw, q, x, dy, relu_y, mean, part, NULL);
    else
        bn_reduce_kernel<false>
            <<<grid, BN_BLOCK, 0, st>>>(n, c, hw, q, x, dy, NULL, mean, part, kout);
    RG_CUDA_CHECK_LAUNCH();
    bn_combine_kernel<<<rg_cuda_grid(ctx, c), RG_CUDA_BLOCK, 0, st>>>(
        c, nblk, n * hw, part, bwd ? var : NULL, eps, out, g);
    RG_CUDA_CHECK_LAUNCH();
    rg_cuda_scratch_free(ctx, part);
}

/* stats (3C+1) = (sum (x-K), sum (x-K)^2, N*HW, K) per channel, K = shift[ch] or x[0][ch][0] */
void rg_cuda_batchnorm_stats(int64_t n, int64_t c, int64_t hw, const float *x, const float *shift,
                             float *stats) {
    if (c <= 0) return;
    bn_reduce(n, c, hw, x, NULL, NULL, shift, NULL, 0.0f, stats, stats + 2 * c + 1,
              bn_param_grads{0.0f, 0.0f, NULL, NULL});
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

/* sums (2C+1) = (sum dy, sum dy*xhat, N*HW) per channel, dy masked by relu_y where not NULL;
 * dweight, dbias from them */
void rg_cuda_batchnorm_backward_reduce(int64_t n, int64_t c, int64_t hw, const float *x,
                                       const float *dy, const float *relu_y, const float *mean,
                                       const float *var, float eps, float *sums, float beta_w,
                                       float *dweight, float beta_b, float *dbias) {
    if (c <= 0) return;
    bn_reduce(n, c, hw, x, dy, relu_y, mean, var, eps, sums, NULL,
              bn_param_grads{beta_w, beta_b, dweight, dbias});
}

/* ---- the elementwise passes: a grid-stride loop over the N*C*Q chunks ----------------------- */

/* Blocks for a walk over items chunks, a warp each (capped like rg_cuda_grid). */
static unsigned walk_grid(const rg_cuda_ctx *ctx, int64_t items) {
    int64_t blocks = (items + BN_WARPS - 1) / BN_WARPS;
    int64_t cap = (int64_t)ctx->sm_count * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

/* y = weight * (x - mean) * invstd(var) + bias, then + residual where given, then relu(y) when
 * relu */
__global__ void bn_apply_kernel(int64_t n, int64_t c, int64_t hw, int64_t q, const float *x,
                                const float *mean, const float *var, float eps, const float *weight,
                                const float *bias, const float *residual, bool relu, float *y) {
    int lane = threadIdx.x & 31;
    for (int64_t t = (int64_t)blockIdx.x * BN_WARPS + (threadIdx.x >> 5), items = n * c * q;
         t < items; t += (int64_t)gridDim.x * BN_WARPS) {
        int64_t pc = q == 1 ? t : bn_div(t, q), ch = pc - bn_div(pc, c) * c;
        int64_t j0 = (t - pc * q) * BN_CHUNK + lane;
        float a = (weight ? weight[ch] : 1.0f) * rg_bn_invstd(var[ch], eps), mu = mean[ch];
        float b = bias ? bias[ch] : 0.0f;
        const float *xp = x + pc * hw, *rp = residual ? residual + pc * hw : NULL;
        float *yp = y + pc * hw;
        float v[BN_VEC], s[BN_VEC];
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) { /* loads first (y may be x: each j is its own) */
            int64_t j = j0 + k * 32;
            v[k] = j < hw ? xp[j] : 0.0f;
            s[k] = rp && j < hw ? rp[j] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) {
            int64_t j = j0 + k * 32;
            float r = a * (v[k] - mu) + b;
            if (rp) r += s[k];
            if (j < hw) yp[j] = relu ? rg_k_relu(r) : r;
        }
    }
}

void rg_cuda_batchnorm_apply(int64_t n, int64_t c, int64_t hw, const float *x, const float *mean,
                             const float *var, float eps, const float *weight, const float *bias,
                             const float *residual, bool relu, float *y) {
    if (n * c * hw <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t q = chunks(hw);
    bn_apply_kernel<<<walk_grid(ctx, n * c * q), BN_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, c, hw, q, x, mean, var, eps, weight, bias, residual, relu, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* Training's forward without SyncBatchNorm: the three launches above, in order on the compute
 * stream (the CPU fuses them to keep a run of channels in a core's cache; these kernels' grid-wide
 * reduction has no such reuse to gain). */
void rg_cuda_batchnorm_train_forward(int64_t n, int64_t c, int64_t hw, const float *x,
                                     float momentum, float eps, const float *weight,
                                     const float *bias, const float *residual, bool relu,
                                     float *stats, float *meanvar, float *running_mean,
                                     float *running_var, int64_t *num_batches, float *y) {
    rg_cuda_batchnorm_stats(n, c, hw, x, NULL, stats);
    rg_cuda_batchnorm_finalize(c, momentum, stats, meanvar, running_mean, running_var, num_batches);
    rg_cuda_batchnorm_apply(n, c, hw, x, meanvar, meanvar + c, eps, weight, bias, residual, relu,
                            y);
}

/* dx = beta*dx + weight*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)), dy masked by relu_y where
 * not NULL; without sums (evaluation) the two means are 0 */
__global__ void bn_backward_data_kernel(int64_t n, int64_t c, int64_t hw, int64_t q, const float *x,
                                        const float *dy, const float *relu_y, const float *mean,
                                        const float *var, float eps, const float *weight,
                                        const float *sums, float beta, float *dx) {
    int lane = threadIdx.x & 31;
    float count = sums ? sums[2 * c] : 1.0f;
    for (int64_t t = (int64_t)blockIdx.x * BN_WARPS + (threadIdx.x >> 5), items = n * c * q;
         t < items; t += (int64_t)gridDim.x * BN_WARPS) {
        int64_t pc = q == 1 ? t : bn_div(t, q), ch = pc - bn_div(pc, c) * c;
        int64_t j0 = (t - pc * q) * BN_CHUNK + lane;
        float inv = rg_bn_invstd(var[ch], eps), mu = mean[ch];
        float w_inv = (weight ? weight[ch] : 1.0f) * inv;
        float mean_dy = sums ? sums[ch] / count : 0.0f;
        float mean_dy_xhat = sums ? sums[c + ch] / count : 0.0f;
        const float *xp = x + pc * hw, *gp = dy + pc * hw, *rp = relu_y ? relu_y + pc * hw : NULL;
        float *dp = dx + pc * hw;
        float v[BN_VEC], g[BN_VEC], d[BN_VEC];
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) { /* loads first (dx may be dy: each j is its own) */
            int64_t j = j0 + k * 32;
            v[k] = j < hw ? xp[j] : 0.0f;
            g[k] = j < hw ? gp[j] : 0.0f;
            if (rp && j < hw) g[k] = rg_k_relu_grad(rp[j], g[k]);
            d[k] = j < hw && beta != 0.0f ? dp[j] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < BN_VEC; k++) {
            int64_t j = j0 + k * 32;
            float r = rg_bn_dx(g[k], (v[k] - mu) * inv, w_inv, mean_dy, mean_dy_xhat);
            if (j < hw) dp[j] = beta == 0.0f ? r : r + beta * d[k];
        }
    }
}

void rg_cuda_batchnorm_backward_data(int64_t n, int64_t c, int64_t hw, const float *x,
                                     const float *dy, const float *relu_y, const float *mean,
                                     const float *var, float eps, const float *weight,
                                     const float *sums, float beta, float *dx) {
    if (n * c * hw <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t q = chunks(hw);
    bn_backward_data_kernel<<<walk_grid(ctx, n * c * q), BN_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, c, hw, q, x, dy, relu_y, mean, var, eps, weight, sums, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}

/* Training's backward without SyncBatchNorm: the two launches above, in order on the compute
 * stream (the CPU fuses them to keep a run of channels in a core's cache). */
void rg_cuda_batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float *x, const float *dy,
                                const float *relu_y, const float *mean, const float *var, float eps,
                                const float *weight, float *sums, float beta_w, float *dweight,
                                float beta_b, float *dbias, float beta, float *dx) {
    rg_cuda_batchnorm_backward_reduce(n, c, hw, x, dy, relu_y, mean, var, eps, sums, beta_w,
                                      dweight, beta_b, dbias);
    rg_cuda_batchnorm_backward_data(n, c, hw, x, dy, relu_y, mean, var, eps, weight, sums, beta,
                                    dx);
}
