/* dropout.cu — inverted dropout on the GPU with the CPU's exact mask (pairs with
 * tensor/cpu/dropout.c).
 *
 * keep(i) = rg_dropout_keep(p, seed, offset + i) (core/kernels.h) is a pure function of the
 * Philox stream position, so the GPU and the CPU drop the same elements, forward and backward
 * recompute the mask instead of storing it, and nothing depends on the launch shape.
 *
 * One Philox call yields four stream positions (4c .. 4c+3), so a thread owns one counter c and
 * the (up to four) elements at its positions (rg_philox_position, per_thread.h). The four
 * rg_dropout_keep calls are made unconditionally, with positions written (c << 2) | j: the
 * compiler then sees that they share one counter and computes Philox once instead of four times
 * (checked in the PTX: 22 multiplies per thread, not 80). The bounds checks come after, on the
 * stores. */
#include "tensor/cuda/cuda_impl.h"

/* 1/(1-p) for the kept elements; p == 1 drops everything */
static float keep_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* y (n) = keep(i) ? x * scale : 0;  x (n) */
__global__ void dropout_forward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                       uint64_t offset, const float *x, float *y) {
    int64_t counters = rg_philox_counters(n, offset);
    RG_CUDA_FOR(g, counters) {
        bool keep[4], in[4];
        int64_t idx[4];
        for (uint64_t j = 0; j < 4; j++) /* unconditional: one shared Philox call */
            keep[j] =
                rg_dropout_keep(p, seed, rg_philox_position(offset, n, g, j, &idx[j], &in[j]));
        for (int j = 0; j < 4; j++)
            if (in[j]) y[idx[j]] = keep[j] ? x[idx[j]] * scale : 0.0f;
    }
}

void rg_cuda_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                             float *y) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    dropout_forward_kernel<<<rg_cuda_grid(ctx, rg_philox_counters(n, offset)), RG_CUDA_BLOCK, 0,
                             rg_cuda_compute(ctx)>>>(n, p, keep_scale(p), seed, offset, x, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* dx (n) = beta*dx + (keep(i) ? dy * scale : 0);  dy (n) */
__global__ void dropout_backward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                        uint64_t offset, const float *dy, float beta, float *dx) {
    int64_t counters = rg_philox_counters(n, offset);
    RG_CUDA_FOR(g, counters) {
        bool keep[4], in[4];
        int64_t idx[4];
        for (uint64_t j = 0; j < 4; j++)
            keep[j] =
                rg_dropout_keep(p, seed, rg_philox_position(offset, n, g, j, &idx[j], &in[j]));
        for (int j = 0; j < 4; j++) {
            if (!in[j]) continue;
            float v = keep[j] ? dy[idx[j]] * scale : 0.0f;
            dx[idx[j]] = beta == 0.0f ? v : v + beta * dx[idx[j]];
        }
    }
}

void rg_cuda_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                              float beta, float *dx) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    dropout_backward_kernel<<<rg_cuda_grid(ctx, rg_philox_counters(n, offset)), RG_CUDA_BLOCK, 0,
                              rg_cuda_compute(ctx)>>>(n, p, keep_scale(p), seed, offset, dy, beta,
                                                      dx);
    RG_CUDA_CHECK_LAUNCH();
}
