/* elementwise.cu — fills, axpby, relu, counter-based random fills and float16 packing on the GPU
 * (pairs with tensor/cpu/elementwise.c, whose broadcast ops are in broadcast.cu and whose
 * reductions are in reduce.cu, to keep each file short).
 *
 * Every kernel is a grid-stride loop (RG_CUDA_FOR) over a 64-bit index and calls the formula in
 * core/kernels.h that the CPU loop calls. These kernels are memory-bound: one float read and
 * one written per thread and iteration, consecutive threads on consecutive addresses. */
#include "tensor/cuda/cuda_impl.h"

/* ---- fill and scale ------------------------------------------------------------------------ */

/* x (n) = v */
__global__ void fill_kernel(int64_t n, float v, float *x) {
    RG_CUDA_FOR(i, n) x[i] = v;
}

void rg_cuda_fill(int64_t n, float v, float *x) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    fill_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, v, x);
    RG_CUDA_CHECK_LAUNCH();
}

/* y (n) *= beta */
__global__ void scale_kernel(int64_t n, float beta, float *y) {
    RG_CUDA_FOR(i, n) y[i] *= beta;
}

void rg_cuda_scale(rg_cuda_ctx *ctx, int64_t n, float beta, float *y) {
    if (n <= 0 || beta == 1.0f) return;
    if (beta == 0.0f) return rg_cuda_fill(n, 0.0f, y); /* y may hold garbage: never read it */
    scale_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, beta, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* ---- axpby and relu: four floats a thread at a time ------------------------------------------
 * These are pure streams (ReLU over a ResNet-50's activations is about 1 GB a step), so each
 * thread moves a float4 when every pointer is 16-byte aligned (the allocator's blocks are; a view
 * at an odd offset is not): a quarter of the load and store instructions for the same bytes.
 * n4 is the count of float4s (0 when not aligned); the last n - 4*n4 floats go one by one. */

/* float4s of a stream of n floats whose pointers are all aligned, 0 if one is not */
static int64_t vec4_count(int64_t n, const void *a, const void *b, const void *c) {
    return rg_cuda_aligned16(a) && rg_cuda_aligned16(b) && (!c || rg_cuda_aligned16(c)) ? n / 4 : 0;
}

/* blocks for n floats of which n4 float4s */
static unsigned vec4_grid(const rg_cuda_ctx *ctx, int64_t n, int64_t n4) {
    return rg_cuda_grid(ctx, n4 > 0 ? n4 : n);
}

static __device__ __forceinline__ float4 scale4(float a, float4 x) {
    return make_float4(a * x.x, a * x.y, a * x.z, a * x.w);
}
static __device__ __forceinline__ float4 axpby4(float a, float4 x, float b, float4 y) {
    return make_float4(a * x.x + b * y.x, a * x.y + b * y.y, a * x.z + b * y.z, a * x.w + b * y.w);
}

/* y (n) = a*x + b*y; x (n) may be y. With b == 0, y is not read (it may hold garbage). */
__global__ void axpby_kernel(int64_t n, int64_t n4, float a, const float *x, float b, float *y) {
    const float4 *x4 = (const float4 *)x;
    float4 *y4 = (float4 *)y;
    if (b == 0.0f) {
        RG_CUDA_FOR(i, n4) y4[i] = scale4(a, x4[i]);
        RG_CUDA_FOR(i, n - 4 * n4) y[4 * n4 + i] = a * x[4 * n4 + i];
    } else {
        RG_CUDA_FOR(i, n4) y4[i] = axpby4(a, x4[i], b, y4[i]);
        RG_CUDA_FOR(i, n - 4 * n4) y[4 * n4 + i] = a * x[4 * n4 + i] + b * y[4 * n4 + i];
    }
}

void rg_cuda_axpby(int64_t n, float a, const float *x, float b, float *y) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t n4 = vec4_count(n, x, y, NULL);
    axpby_kernel<<<vec4_grid(ctx, n, n4), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, n4, a, x, b,
                                                                                    y);
    RG_CUDA_CHECK_LAUNCH();
}

/* y (n) = relu(x (n)) */
__global__ void relu_forward_kernel(int64_t n, int64_t n4, const float *x, float *y) {
    const float4 *x4 = (const float4 *)x;
    float4 *y4 = (float4 *)y;
    RG_CUDA_FOR(i, n4) {
        float4 v = x4[i];
        y4[i] = make_float4(rg_k_relu(v.x), rg_k_relu(v.y), rg_k_relu(v.z), rg_k_relu(v.w));
    }
    RG_CUDA_FOR(i, n - 4 * n4) y[4 * n4 + i] = rg_k_relu(x[4 * n4 + i]);
}

void rg_cuda_relu_forward(int64_t n, const float *x, float *y) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t n4 = vec4_count(n, x, y, NULL);
    relu_forward_kernel<<<vec4_grid(ctx, n, n4), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, n4, x,
                                                                                           y);
    RG_CUDA_CHECK_LAUNCH();
}

static __device__ __forceinline__ float4 relu_grad4(float4 x, float4 g) {
    return make_float4(rg_k_relu_grad(x.x, g.x), rg_k_relu_grad(x.y, g.y), rg_k_relu_grad(x.z, g.z),
                       rg_k_relu_grad(x.w, g.w));
}

/* dx (n) = relu'(x) * dy + beta * dx;  x, dy (n) */
__global__ void relu_backward_kernel(int64_t n, int64_t n4, const float *x, const float *dy,
                                     float beta, float *dx) {
    const float4 *x4 = (const float4 *)x, *g4 = (const float4 *)dy;
    float4 *d4 = (float4 *)dx;
    if (beta == 0.0f) {
        RG_CUDA_FOR(i, n4) d4[i] = relu_grad4(x4[i], g4[i]);
        RG_CUDA_FOR(i, n - 4 * n4) dx[4 * n4 + i] = rg_k_relu_grad(x[4 * n4 + i], dy[4 * n4 + i]);
    } else {
        RG_CUDA_FOR(i, n4) d4[i] = axpby4(1.0f, relu_grad4(x4[i], g4[i]), beta, d4[i]);
        RG_CUDA_FOR(i, n - 4 * n4) {
            int64_t k = 4 * n4 + i;
            dx[k] = rg_k_relu_grad(x[k], dy[k]) + beta * dx[k];
        }
    }
}

void rg_cuda_relu_backward(int64_t n, const float *x, const float *dy, float beta, float *dx) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int64_t n4 = vec4_count(n, x, dy, dx);
    relu_backward_kernel<<<vec4_grid(ctx, n, n4), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, n4, x, dy, beta, dx);
    RG_CUDA_CHECK_LAUNCH();
}

/* ---- counter-based random fills ------------------------------------------------------------
 * x[i] takes stream position offset + i (core/kernels.h). One Philox call yields the four
 * positions 4c..4c+3, so each thread owns one counter c and the elements at those positions. The
 * four rg_philox_uniform calls are unconditional and name their positions (c << 2) | j, so the
 * compiler sees one shared counter and computes Philox once (see dropout.cu). */

/* x (n) = lo + (hi - lo) * u(seed, offset + i) */
__global__ void uniform_kernel(int64_t n, float lo, float hi, uint64_t seed, uint64_t offset,
                               float *x) {
    int64_t counters = rg_philox_counters(n, offset);
    RG_CUDA_FOR(g, counters) {
        float u[4];
        int64_t idx[4];
        bool in[4];
        for (uint64_t j = 0; j < 4; j++) /* unconditional: one shared Philox call */
            u[j] = rg_philox_uniform(seed, rg_philox_position(offset, n, g, j, &idx[j], &in[j]));
        for (int j = 0; j < 4; j++)
            if (in[j]) x[idx[j]] = lo + (hi - lo) * u[j];
    }
}

void rg_cuda_uniform(int64_t n, float lo, float hi, uint64_t seed, uint64_t offset, float *x) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    uniform_kernel<<<rg_cuda_grid(ctx, rg_philox_counters(n, offset)), RG_CUDA_BLOCK, 0,
                     rg_cuda_compute(ctx)>>>(n, lo, hi, seed, offset, x);
    RG_CUDA_CHECK_LAUNCH();
}

/* x (n) = mean + std * normal(seed, offset/2 + i), as the CPU: normal i uses positions
 * 2(offset/2 + i) and 2(offset/2 + i) + 1. Initialisation only, so one element per thread. */
__global__ void normal_kernel(int64_t n, float mean, float std, uint64_t seed, uint64_t offset,
                              float *x) {
    RG_CUDA_FOR(i, n) x[i] = mean + std * rg_philox_normal(seed, offset / 2 + (uint64_t)i);
}

void rg_cuda_normal(int64_t n, float mean, float std, uint64_t seed, uint64_t offset, float *x) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    normal_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, mean, std, seed, offset, x);
    RG_CUDA_CHECK_LAUNCH();
}

/* ---- float16 packing ----------------------------------------------------------------------- */

/* y (n) = f16(x (n)), round to nearest even */
__global__ void f32_to_f16_kernel(int64_t n, const float *x, uint16_t *y) {
    RG_CUDA_FOR(i, n) y[i] = rg_f32_to_f16(x[i]);
}

void rg_cuda_f32_to_f16(int64_t n, const float *x, uint16_t *y) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    f32_to_f16_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, x, y);
    RG_CUDA_CHECK_LAUNCH();
}

/* y (n) = f32(x (n)), exact */
__global__ void f16_to_f32_kernel(int64_t n, const uint16_t *x, float *y) {
    RG_CUDA_FOR(i, n) y[i] = rg_f16_to_f32(x[i]);
}

void rg_cuda_f16_to_f32(int64_t n, const uint16_t *x, float *y) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    f16_to_f32_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, x, y);
    RG_CUDA_CHECK_LAUNCH();
}
