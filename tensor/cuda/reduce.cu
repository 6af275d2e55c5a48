/* reduce.cu — sum of all elements and argmax per row on the GPU (pairs with the reductions in
 * tensor/cpu/elementwise.c).
 *
 * What it teaches: a deterministic reduction. Floating-point addition is not associative, so a
 * sum with atomicAdd changes in the last bits from run to run. Here the grid size depends only on
 * n (never on the GPU model or on timing), each thread sums a fixed strided slice, each block
 * combines its threads with a fixed tree (warp shuffles, then one warp over the warp sums), and a
 * second one-block launch combines the block partials the same way. Same input, same bits —
 * on any GPU. */
#include "tensor/cuda/cuda_impl.h"

#define SUM_BLOCK 512       /* threads per block */
#define SUM_PER_THREAD 8    /* aim for at least this many elements per thread... */
#define SUM_MAX_BLOCKS 1024 /* ...and at most this many partial sums */

/* out[blockIdx.x] = scale * sum of x[i] over this block's grid-stride slice; x (n) */
__global__ void sum_kernel(int64_t n, const float *x, float scale, float *out) {
    float s = 0.0f;
    RG_CUDA_FOR(i, n) s += x[i];
    s = rg_block_sum(s);
    if (threadIdx.x == 0) out[blockIdx.x] = scale * s;
}

void rg_cuda_sum_scaled(rg_cuda_ctx *ctx, int64_t n, const float *x, float scale, float *out) {
    int64_t want = (n + SUM_BLOCK * SUM_PER_THREAD - 1) / (SUM_BLOCK * SUM_PER_THREAD);
    unsigned blocks = (unsigned)(want < 1 ? 1 : want < SUM_MAX_BLOCKS ? want : SUM_MAX_BLOCKS);
    cudaStream_t s = rg_cuda_compute(ctx);
    if (blocks == 1) { /* small n: one launch straight into out (n == 0 writes 0) */
        sum_kernel<<<1, SUM_BLOCK, 0, s>>>(n, x, scale, out);
        RG_CUDA_CHECK_LAUNCH();
        return;
    }
    float *partial = (float *)rg_cuda_scratch(ctx, blocks * sizeof(float)); /* (blocks) */
    sum_kernel<<<blocks, SUM_BLOCK, 0, s>>>(n, x, 1.0f, partial);
    RG_CUDA_CHECK_LAUNCH();
    sum_kernel<<<1, SUM_BLOCK, 0, s>>>(blocks, partial, scale, out);
    RG_CUDA_CHECK_LAUNCH();
    rg_cuda_scratch_free(ctx, partial);
}

void rg_cuda_sum(int64_t n, const float *x, float *out) {
    rg_cuda_sum_scaled(rg_cuda_ctx_current(), n, x, 1.0f, out);
}

/* ---- argmax: one warp per row -------------------------------------------------------------
 * The CPU scans a row left to right keeping the first strict maximum, which also means: NaNs are
 * skipped, unless x[0] is NaN, in which case the answer is 0. The warp reproduces that exactly:
 * each lane keeps the first maximum of its strided slice, skipping NaNs, then the lanes combine
 * (larger value wins, equal values go to the smaller index) — an associative rule, so the
 * butterfly gives every lane the same answer as the sequential scan. */

/* out (rows) = index of the first maximum of each row of x (rows, cols) */
__global__ void argmax_kernel(int64_t rows, int64_t cols, const float *x, int64_t *out) {
    int lane = threadIdx.x & 31;
    RG_CUDA_FOR_WARP(r, rows) {
        const float *xr = x + r * cols;
        float best = 0.0f;
        int64_t at = -1; /* -1: no candidate yet */
        for (int64_t j = lane; j < cols; j += 32) {
            float v = xr[j];
            if (v == v && rg_argmax_better(v, j, best, at)) best = v, at = j;
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int64_t oa = __shfl_xor_sync(0xffffffffu, at, o);
            if (rg_argmax_better(ob, oa, best, at)) best = ob, at = oa;
        }
        if (lane == 0) out[r] = (at < 0 || xr[0] != xr[0]) ? 0 : at;
    }
}

void rg_cuda_argmax(int64_t rows, int64_t cols, const float *x, int64_t *out) {
    if (rows <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    argmax_kernel<<<rg_cuda_warp_grid(ctx, rows), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        rows, cols, x, out);
    RG_CUDA_CHECK_LAUNCH();
}
