/* dropout.cu — inverted dropout on the GPU with the CPU's exact mask (pairs with
 * tensor/cpu/dropout.c).
 *
 * keep(i) = rg_dropout_keep(p, seed, offset + i) (core/kernels.h) is a pure function of the
 * Philox stream position, so the GPU and the CPU drop the same elements and nothing depends on
 * the launch shape. Forward can store the mask as bits (the op asks for it when backward will
 * run), and backward then reads it instead of recomputing it.
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

/* y (n) = keep(i) ? x * scale : 0;  x (n). With mask, the keeps as bits too (core/kernels.h):
 * a warp takes 32 consecutive counters (a warp-stride loop, so its lanes stay together), lane l's
 * four keeps are bits 4(l % 8) ... of word l / 8 of the warp's four, and three xor-shuffles gather
 * each word, which its first lane stores: no atomics, no zeroing. */
__global__ void dropout_forward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                       uint64_t offset, const float *x, float *y, uint32_t *mask) {
    int64_t counters = rg_philox_counters(n, offset), words = rg_dropout_mask_words(n, offset);
    int lane = (int)(threadIdx.x & 31);
    RG_CUDA_FOR_WARP(r, (counters + 31) / 32) {
        int64_t g = 32 * r + lane; /* past the last counter: no element is in[] */
        bool keep[4], in[4];
        int64_t idx[4];
        for (uint64_t j = 0; j < 4; j++) /* unconditional: one shared Philox call */
            keep[j] =
                rg_dropout_keep(p, seed, rg_philox_position(offset, n, g, j, &idx[j], &in[j]));
        uint32_t nibble = 0;
        for (int j = 0; j < 4; j++)
            if (in[j]) {
                y[idx[j]] = keep[j] ? x[idx[j]] * scale : 0.0f;
                nibble |= (uint32_t)keep[j] << j;
            }
        if (mask) { /* the same for the whole grid: every lane takes part in the shuffles */
            uint32_t v = nibble << (4 * (lane & 7));
            for (int d = 1; d < 8; d <<= 1) v |= __shfl_xor_sync(0xffffffffu, v, d);
            int64_t word = 4 * r + (lane >> 3);
            if ((lane & 7) == 0 && word < words) mask[word] = v;
        }
    }
}

void rg_cuda_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                             float *y, uint32_t *mask) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t warps = (rg_philox_counters(n, offset) + 31) / 32; /* of 32 counters */
    dropout_forward_kernel<<<rg_cuda_warp_grid(ctx, warps), RG_CUDA_BLOCK, 0,
                             rg_cuda_compute(ctx)>>>(n, p, keep_scale(p), seed, offset, x, y, mask);
    RG_CUDA_CHECK_LAUNCH();
}

/* dx (n) = beta*dx + (keep(i) ? dy * scale : 0);  dy (n); the keeps from mask when given (the
 * thread's nibble of it), else drawn again */
__global__ void dropout_backward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                        uint64_t offset, const uint32_t *mask, const float *dy,
                                        float beta, float *dx) {
    int64_t counters = rg_philox_counters(n, offset);
    RG_CUDA_FOR(g, counters) {
        bool keep[4], in[4];
        int64_t idx[4];
        if (mask) {
            uint32_t nibble = mask[g >> 3] >> (4 * (g & 7));
            for (uint64_t j = 0; j < 4; j++) {
                rg_philox_position(offset, n, g, j, &idx[j], &in[j]);
                keep[j] = (nibble >> j) & 1u;
            }
        } else {
            for (uint64_t j = 0; j < 4; j++)
                keep[j] =
                    rg_dropout_keep(p, seed, rg_philox_position(offset, n, g, j, &idx[j], &in[j]));
        }
        for (int j = 0; j < 4; j++) {
            if (!in[j]) continue;
            float v = keep[j] ? dy[idx[j]] * scale : 0.0f;
            dx[idx[j]] = beta == 0.0f ? v : v + beta * dx[idx[j]];
        }
    }
}

void rg_cuda_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset,
                              const uint32_t *mask, const float *dy, float beta, float *dx) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    dropout_backward_kernel<<<rg_cuda_grid(ctx, rg_philox_counters(n, offset)), RG_CUDA_BLOCK, 0,
                              rg_cuda_compute(ctx)>>>(n, p, keep_scale(p), seed, offset, mask, dy,
                                                      beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}
