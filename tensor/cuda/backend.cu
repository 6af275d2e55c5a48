/* backend.cu — the CUDA backend's tables (one per device) and its plain memory operations.
 *
 * What it teaches: where a GPU framework waits. Every entry only queues work on its device's
 * compute stream and returns; the host waits in these places only:
 *   - copy D2H: the caller reads the host buffer next (rg_tensor_item, rg_tensor_copy_to_host),
 *     so the copy is followed by cudaStreamSynchronize of the compute stream;
 *   - synchronize: waits for both streams of the device, by definition;
 *   - mem_release_cached, and an allocation that finds the device full: cudaFree synchronises the
 *     device, and pending blocks are waited for before they are freed (never in a steady step);
 *   - rg_cuda_timer_elapsed_ms (context.cu) waits for its stop event.
 * H2D copies from pageable memory return once the driver has staged the source (it may wait for
 * the stream to do so); from pinned memory (host_alloc) they are fully asynchronous. */
#include <string.h>

#include <array>
#include <utility>

#include "tensor/cuda/cuda_impl.h"

void rg_cuda_memset0(void *p, size_t bytes) {
    if (bytes) RG_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, rg_cuda_compute(rg_cuda_ctx_current())));
}

/* A launch of zero_f32_many: tensor i's chunks of ZERO_CHUNK floats are blocks [first[i],
 * first[i+1]), found by a binary search, as in optim.cu's multi-tensor SGD. 128 tensors make
 * 4 + 129 * 4 + 128 * 16 = 2,568 bytes of parameters (at most 4 KB). A model's gradients are
 * zeroed every step: ResNet-50's 161 tensors were 161 cudaMemsetAsync calls, now 2 launches. */
#define ZERO_MANY 128
#define ZERO_CHUNK 16384
struct zero_many_args {
    int count;
    int first[ZERO_MANY + 1];
    float *p[ZERO_MANY];
    int64_t n[ZERO_MANY];
};
static_assert(sizeof(zero_many_args) <= 4096, "a kernel's parameters are at most 4 KB");

__global__ void zero_many_kernel(const __grid_constant__ zero_many_args a) {
    int b = (int)blockIdx.x, lo = rg_cuda_list_owner(a.first, a.count, b);
    float *p = a.p[lo];
    int64_t start = (int64_t)(b - a.first[lo]) * ZERO_CHUNK;
    int64_t end = start + ZERO_CHUNK < a.n[lo] ? start + ZERO_CHUNK : a.n[lo];
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) p[i] = 0.0f;
}

void rg_cuda_zero_f32_many(int count, float *const *p, const int64_t *n) {
    cudaStream_t st = rg_cuda_compute(rg_cuda_ctx_current());
    zero_many_args a;
    rg_cuda_list_launches(
        a, count, ZERO_CHUNK, [&](int i) { return n[i]; },
        [&](zero_many_args &b, int slot, int i) { b.p[slot] = p[i], b.n[slot] = n[i]; },
        [&](const zero_many_args &b) {
            zero_many_kernel<<<(unsigned)b.first[b.count], RG_CUDA_BLOCK, 0, st>>>(b);
            RG_CUDA_CHECK_LAUNCH();
        });
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
        RG_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rg_cuda_compute(ctx)));
        return;
    }
    rg_cuda_ctx *sctx = rg_cuda_ctx_get(src_device);
    rg_cuda_order(sctx, rg_cuda_compute(sctx), rg_cuda_compute(ctx));
    RG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, rg_cuda_compute(ctx)));
    rg_cuda_order(ctx, rg_cuda_compute(ctx), rg_cuda_compute(sctx));
}

void rg_cuda_copy(void *dst, const void *src, size_t bytes, rg_copy_kind kind) {
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

void rg_cuda_synchronize(void) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    for (int s = 0; s < RG_CUDA_STREAM_COUNT; s++)
        RG_CUDA_CHECK(cudaStreamSynchronize(ctx->stream[s]));
}

/* ---- one table per device ----
 * The entries take no device argument, yet the table that rg_backend_for(cuda:D) returns must run
 * on D whichever thread calls it, now or later (a thread may keep a table, as the DDP reducer
 * does). So each device gets its own table of tiny wrappers generated from the one implementation:
 * on<D, f>::run makes D the calling thread's current device, then calls f, which works on the
 * current device. When D is already current this costs one cudaGetDevice. */
template <int D, auto F> struct on;
template <int D, typename R, typename... A, R (*F)(A...)> struct on<D, F> {
    static R run(A... args) {
        rg_cuda_swap_device(D);
        return F(args...);
    }
};

/* Every entry of the kernel list (tensor/backend_impl.h), in its order (C++20 designated
 * initialisers), each wrapped to run on D. */
template <int D> static constexpr rg_backend table_for() {
    return rg_backend{
        .name = "cuda",
#define RG_CUDA_ENTRY(ret, fn, params) .fn = on<D, rg_cuda_##fn>::run,
        RG_BACKEND_KERNELS(RG_CUDA_ENTRY)
#undef RG_CUDA_ENTRY
    };
}

template <size_t... D>
static constexpr std::array<rg_backend, sizeof...(D)> tables_for(std::index_sequence<D...>) {
    return {table_for<(int)D>()...};
}

/* Read-only, built at compile time. */
static constexpr std::array<rg_backend, RG_CUDA_MAX_DEVICES> tables =
    tables_for(std::make_index_sequence<RG_CUDA_MAX_DEVICES>{});

const rg_backend *rg_cuda_table(int device) {
    return &tables[(size_t)device];
}

extern "C" const rg_backend *rg_cuda_backend_table(int index) {
    return index >= 0 && index < RG_CUDA_MAX_DEVICES ? rg_cuda_table(index) : nullptr;
}
