/* dropout.cu — inverted dropout on the GPU with the CPU's exact mask (pairs with
 * tensor/cpu/dropout.c).
 *
 * keep(i) = rg_dropout_keep(p, seed, offset + i) (core/kernels.h) is a pure function of the
 * Philox stream position, so the GPU and the CPU drop the same elements and nothing depends on
 * the launch shape. Forward can store the mask as bits (the op asks for it when backward will
 * run), and backward then reads it instead of recomputing it.
 *
 * One Philox call yields the decisions of eight stream positions (8c .. 8c+7: two 16-bit halves
 * of each of its four words), so a thread owns one counter c, draws it once, and takes the (up
 * to eight) elements at its positions (rg_dropout_counter_*, per_thread.h, which
 * tests/cuda/test_cuda_per_thread.c runs on the host for every counter against the CPU's mask).
 * When the offset is a multiple of 4 and the pointers 16-byte aligned (the allocator's blocks
 * are), a counter whose eight elements all lie in the tensor moves them as two float4s; the one or
 * two counters at the ends go element by element with bounds checks. */
#include "tensor/cuda/cuda_impl.h"

/* v masked by bits 0-3 of byte (a float4's four keeps) and scaled */
static __device__ __forceinline__ float4 keep4(float4 v, uint32_t byte, float scale) {
    return make_float4(byte & 1u ? v.x * scale : 0.0f, byte & 2u ? v.y * scale : 0.0f,
                       byte & 4u ? v.z * scale : 0.0f, byte & 8u ? v.w * scale : 0.0f);
}

/* Whether whole counters may move as float4s: element 8c - offset is then a multiple of 4 */
static bool vec_ok(uint64_t offset, const void *a, const void *b) {
    return (offset & 3u) == 0 && rg_cuda_aligned16(a) && rg_cuda_aligned16(b);
}

/* y (n) = keep(i) ? x * scale : 0;  x (n). With mask, the keeps as bits too (core/kernels.h):
 * a warp takes 32 consecutive counters (a warp-stride loop, so its lanes stay together), lane l's
 * eight keeps are byte l % 4 of word l / 4 of the warp's eight, and two xor-shuffles gather each
 * word, which its first lane stores: no atomics, no zeroing. */
__global__ void dropout_forward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                       uint64_t offset, bool vec, const float *x, float *y,
                                       uint32_t *mask) {
    int64_t counters = rg_stream_counters(n, offset, RG_DROPOUT_SHIFT);
    int64_t words = rg_dropout_mask_words(n, offset);
    int lane = (int)(threadIdx.x & 31);
    RG_CUDA_FOR_WARP(r, (counters + 31) / 32) {
        int64_t g = 32 * r + lane; /* past the last counter: no element is in range */
        bool whole;
        int64_t first = rg_dropout_counter_first(offset, g, n, &whole);
        uint32_t byte = rg_dropout_counter_keeps(p, seed, offset, g);
        if (vec && whole) {
            const float4 *x4 = reinterpret_cast<const float4 *>(x + first);
            float4 *y4 = reinterpret_cast<float4 *>(y + first);
            y4[0] = keep4(x4[0], byte, scale), y4[1] = keep4(x4[1], byte >> 4, scale);
        } else {
            byte &= rg_dropout_counter_range(offset, g, n); /* the mask's bits outside are 0 */
            for (int64_t j = 0; j < RG_DROPOUT_PER_COUNTER; j++) {
                int64_t i = first + j;
                if (i >= 0 && i < n) y[i] = (byte >> j) & 1u ? x[i] * scale : 0.0f;
            }
        }
        if (mask) { /* the same for the whole grid: every lane takes part in the shuffles */
            uint32_t v = byte << (8 * (lane & 3));
            for (int d = 1; d < 4; d <<= 1) v |= __shfl_xor_sync(0xffffffffu, v, d);
            int64_t word = 8 * r + (lane >> 2);
            if ((lane & 3) == 0 && word < words) mask[word] = v;
        }
    }
}

void rg_cuda_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                             float *y, uint32_t *mask) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t warps = (rg_stream_counters(n, offset, RG_DROPOUT_SHIFT) + 31) / 32; /* 32 counters */
    dropout_forward_kernel<<<rg_cuda_warp_grid(ctx, warps), RG_CUDA_BLOCK, 0,
                             rg_cuda_compute(ctx)>>>(n, p, rg_dropout_scale(p), seed, offset,
                                                     vec_ok(offset, x, y), x, y, mask);
    RG_CUDA_CHECK_LAUNCH();
}

/* dx (n) = beta*dx + (keep(i) ? dy * scale : 0);  dy (n); the keeps from mask when given (the
 * thread's byte of it), else drawn again */
__global__ void dropout_backward_kernel(int64_t n, float p, float scale, uint64_t seed,
                                        uint64_t offset, bool vec, const uint32_t *mask,
                                        const float *dy, float beta, float *dx) {
    int64_t counters = rg_stream_counters(n, offset, RG_DROPOUT_SHIFT);
    RG_CUDA_FOR(g, counters) {
        uint32_t byte = mask ? (mask[g >> 2] >> (8 * (g & 3))) & 0xFFu
                             : rg_dropout_counter_keeps(p, seed, offset, g);
        bool whole;
        int64_t first = rg_dropout_counter_first(offset, g, n, &whole);
        if (vec && whole) {
            const float4 *dy4 = reinterpret_cast<const float4 *>(dy + first);
            float4 *dx4 = reinterpret_cast<float4 *>(dx + first);
            for (int h = 0; h < 2; h++) {
                float4 v = keep4(dy4[h], byte >> (4 * h), scale);
                if (beta != 0.0f) {
                    float4 o = dx4[h];
                    v.x += beta * o.x, v.y += beta * o.y, v.z += beta * o.z, v.w += beta * o.w;
                }
                dx4[h] = v;
            }
        } else {
            for (int64_t j = 0; j < RG_DROPOUT_PER_COUNTER; j++) {
                int64_t i = first + j;
                if (i < 0 || i >= n) continue;
                float v = (byte >> j) & 1u ? dy[i] * scale : 0.0f;
                dx[i] = beta == 0.0f ? v : v + beta * dx[i];
            }
        }
    }
}

void rg_cuda_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset,
                              const uint32_t *mask, const float *dy, float beta, float *dx) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t counters = rg_stream_counters(n, offset, RG_DROPOUT_SHIFT);
    dropout_backward_kernel<<<rg_cuda_grid(ctx, counters), RG_CUDA_BLOCK, 0,
                              rg_cuda_compute(ctx)>>>(n, p, rg_dropout_scale(p), seed, offset,
                                                      vec_ok(offset, dy, dx), mask, dy, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}
