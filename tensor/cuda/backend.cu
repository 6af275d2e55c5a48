/* backend.cu — the CUDA backend's table, and its plain memory operations.
 *
 * What it teaches: where a GPU framework waits. Every entry only queues work on the current
 * device's compute stream and returns; the host waits in exactly three places:
 *   - copy D2H: the caller reads the host buffer next (rg_tensor_item, rg_tensor_copy_to_host),
 *     so the copy is followed by cudaStreamSynchronize of the compute stream;
 *   - synchronize: waits for both streams of the device, by definition;
 *   - mem_release_cached: cudaFree synchronises the device (never called in a training step).
 * H2D copies from pageable memory return once the driver has staged the source (it may wait for
 * the stream to do so); from pinned memory (host_alloc) they are fully asynchronous. */
#include <string.h>

#include "tensor/cuda/cuda_impl.h"

static void cuda_memset0(void *p, size_t bytes) {
    if (bytes) RG_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, rg_cuda_compute(rg_cuda_ctx_current())));
}

/* The device that owns device pointer p. */
static int device_of(const void *p) {
    cudaPointerAttributes attr;
    RG_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
    RG_CHECK(attr.type == cudaMemoryTypeDevice, "cuda copy: source %p is not device memory", p);
    return attr.device;
}

/* Device to device. Within a device, stream order is enough. Across devices (peer copy through
 * UVA), the copy on dst's stream first waits for the work queued on src's device, and src's
 * stream then waits for the copy, so that neither side reuses its buffer too early. */
static void copy_d2d(rg_cuda_ctx *ctx, void *dst, const void *src, size_t bytes) {
    int src_device = device_of(src);
    if (src_device == ctx->device) {
        RG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rg_cuda_compute(ctx)));
        return;
    }
    rg_cuda_ctx *sctx = rg_cuda_ctx_get(src_device);
    rg_cuda_order(sctx, rg_cuda_compute(sctx), rg_cuda_compute(ctx));
    RG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, rg_cuda_compute(ctx)));
    rg_cuda_order(ctx, rg_cuda_compute(ctx), rg_cuda_compute(sctx));
}

static void cuda_copy(void *dst, const void *src, size_t bytes, rg_copy_kind kind) {
    if (bytes == 0 || dst == src) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    cudaStream_t s = rg_cuda_compute(ctx);
    switch (kind) {
    case RG_COPY_H2H:
        memmove(dst, src, bytes);
        return;
    case RG_COPY_H2D:
        RG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
        return;
    case RG_COPY_D2H:
        RG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
        RG_CUDA_CHECK(cudaStreamSynchronize(s)); /* the host reads dst next */
        return;
    case RG_COPY_D2D:
        copy_d2d(ctx, dst, src, bytes);
        return;
    default:
        rg_fatal(__FILE__, __LINE__, "cuda copy: bad kind %d", (int)kind);
    }
}

static void cuda_synchronize(void) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    for (int s = 0; s < RG_CUDA_STREAM_COUNT; s++) RG_CUDA_CHECK(cudaStreamSynchronize(ctx->stream[s]));
}

/* Every entry of rg_backend, in its declaration order (C++20 designated initialisers). */
extern "C" const rg_backend rg_cuda_backend = {
    .name = "cuda",
    .alloc = rg_cuda_alloc,
    .free = rg_cuda_free,
    .memset0 = cuda_memset0,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .mem_stats = rg_cuda_mem_stats,
    .mem_release_cached = rg_cuda_mem_release_cached,
    .fill = rg_cuda_fill,
    .axpby = rg_cuda_axpby,
    .binary = rg_cuda_binary,
    .reduce_bcast = rg_cuda_reduce_bcast,
    .relu_forward = rg_cuda_relu_forward,
    .relu_backward = rg_cuda_relu_backward,
    .sum = rg_cuda_sum,
    .argmax = rg_cuda_argmax,
    .uniform = rg_cuda_uniform,
    .normal = rg_cuda_normal,
    .gemm = rg_cuda_gemm,
    .conv2d_forward = rg_cuda_conv2d_forward,
    .conv2d_backward_data = rg_cuda_conv2d_backward_data,
    .conv2d_backward_filter = rg_cuda_conv2d_backward_filter,
    .maxpool2d_forward = rg_cuda_maxpool2d_forward,
    .maxpool2d_backward = rg_cuda_maxpool2d_backward,
    .dropout_forward = rg_cuda_dropout_forward,
    .dropout_backward = rg_cuda_dropout_backward,
    .cross_entropy_forward = rg_cuda_cross_entropy_forward,
    .cross_entropy_backward = rg_cuda_cross_entropy_backward,
    .sgd_step = rg_cuda_sgd_step,
    .adam_step = rg_cuda_adam_step,
    .f32_to_f16 = rg_cuda_f32_to_f16,
    .f16_to_f32 = rg_cuda_f16_to_f32,
    .host_alloc = rg_cuda_host_alloc,
    .host_free = rg_cuda_host_free,
};
