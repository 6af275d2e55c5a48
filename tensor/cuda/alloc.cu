/* alloc.cu — device memory and page-locked host memory for the CUDA backend.
 *
 * cudaMalloc and cudaFree are slow (cudaFree synchronises the whole device), so a training step
 * must not call them. The bookkeeping of the caching allocator is plain C in tensor/block_cache.c
 * (tested on the CPU); this file plugs the CUDA calls into it:
 *   sys_alloc/sys_free  cudaMalloc/cudaFree, or cudaMallocAsync/cudaFreeAsync on the owning
 *                       stream with RG_CUDA_ALLOC_CACHE=0 (compute-sanitizer then sees every
 *                       allocation, and frees stay stream-ordered);
 *   events              cudaEventRecord / cudaEventQuery / cudaStreamWaitEvent.
 * Every block the backend table hands out belongs to the COMPUTE stream; a block that the COMM
 * stream also touches is announced with rg_cuda_record_stream (streams.h).
 *
 * Pinned host blocks (host_alloc) use a second cache whose owner is the pseudo-stream HOST: each
 * free records an event on the compute stream, where H2D copies from the block are queued, and the
 * block is handed out again only after that event completes — so a loader may free a batch's
 * staging buffer right after queueing its copy. */
#include <stdlib.h>

#include "tensor/cuda/cuda_impl.h"

/* ---- the callbacks ---- */

static void *device_alloc(void *user, size_t bytes, int stream) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)user;
    void *p = NULL;
    int prev = rg_cuda_swap_device(ctx->device);
    cudaError_t e =
        ctx->alloc_cache ? cudaMalloc(&p, bytes) : cudaMallocAsync(&p, bytes, ctx->stream[stream]);
    rg_cuda_swap_device(prev);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* recoverable: clear it, or the next launch check reports it */
        return NULL;
    }
    RG_CUDA_CHECK(e);
    return p;
}

static void device_free(void *user, void *p, int stream) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)user;
    int prev = rg_cuda_swap_device(ctx->device);
    if (ctx->alloc_cache)
        RG_CUDA_CHECK(cudaFree(p)); /* only when trimming: synchronises */
    else
        RG_CUDA_CHECK(cudaFreeAsync(p, ctx->stream[stream]));
    rg_cuda_swap_device(prev);
}

static void *host_sys_alloc(void *user, size_t bytes, int stream) {
    void *p = NULL;
    /* portable: the block is pinned for every device's context, not only this one */
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return NULL;
    }
    RG_CUDA_CHECK(e);
    return p;
}

static void host_sys_free(void *user, void *p, int stream) {
    RG_CUDA_CHECK(cudaFreeHost(p));
}

static void *event_new(void *user) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)user;
    cudaEvent_t ev;
    int prev = rg_cuda_swap_device(ctx->device);
    RG_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    rg_cuda_swap_device(prev);
    return (void *)ev;
}

static void event_free(void *user, void *ev) {
    RG_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)ev));
}

static void event_record(void *user, void *ev, int stream) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)user;
    RG_CHECK(stream < RG_CUDA_STREAM_COUNT, "event on the host pseudo-stream");
    RG_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, ctx->stream[stream]));
}

static bool event_done(void *user, void *ev) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* "not ready" is an answer, not an error */
        return false;
    }
    RG_CUDA_CHECK(e);
    return true;
}

static void event_sync(void *user, void *ev) {
    RG_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev));
}

/* A device stream waits on the device; the host pseudo-stream can only wait by blocking (this
 * happens only with RG_CUDA_ALLOC_CACHE=0, when a pinned block is freed for good). */
static void stream_wait(void *user, int stream, void *ev) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)user;
    if (stream == RG_CUDA_STREAM_HOST)
        RG_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev));
    else
        RG_CUDA_CHECK(cudaStreamWaitEvent(ctx->stream[stream], (cudaEvent_t)ev, 0));
}

static const rg_block_cache_ops device_ops = {
    .sys_alloc = device_alloc,
    .sys_free = device_free,
    .event_new = event_new,
    .event_free = event_free,
    .event_record = event_record,
    .event_done = event_done,
    .event_sync = event_sync,
    .stream_wait = stream_wait,
};

static const rg_block_cache_ops host_ops = {
    .sys_alloc = host_sys_alloc,
    .sys_free = host_sys_free,
    .event_new = event_new,
    .event_free = event_free,
    .event_record = event_record,
    .event_done = event_done,
    .event_sync = event_sync,
    .stream_wait = stream_wait,
};

void rg_cuda_alloc_init(rg_cuda_ctx *ctx) {
    ctx->mem = rg_block_cache_new(&device_ops, ctx, ctx->alloc_cache);
    ctx->pinned = rg_block_cache_new(&host_ops, ctx, ctx->alloc_cache);
    RG_CHECK(ctx->mem && ctx->pinned, "cuda:%d: out of host memory for the allocator", ctx->device);
}

/* ---- the backend table's memory entries (the current device's context) ---- */

void *rg_cuda_alloc(size_t bytes) {
    return rg_block_cache_get(rg_cuda_ctx_current()->mem, bytes, RG_CUDA_STREAM_COMPUTE);
}

void rg_cuda_free(void *p, size_t bytes) {
    if (p) rg_block_cache_put(rg_cuda_ctx_current()->mem, p);
}

rg_mem_stats rg_cuda_mem_stats(void) {
    return rg_block_cache_stats(rg_cuda_ctx_current()->mem);
}

void rg_cuda_mem_release_cached(void) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    rg_block_cache_trim(ctx->mem);
    rg_block_cache_trim(ctx->pinned);
}

void *rg_cuda_host_alloc(size_t bytes) {
    return rg_block_cache_get(rg_cuda_ctx_current()->pinned, bytes, RG_CUDA_STREAM_HOST);
}

void rg_cuda_host_free(void *p, size_t bytes) {
    if (!p) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    rg_block_cache_use(ctx->pinned, p, RG_CUDA_STREAM_COMPUTE); /* a queued copy may read it */
    rg_block_cache_put(ctx->pinned, p);
}

void *rg_cuda_scratch(rg_cuda_ctx *ctx, size_t bytes) {
    void *p = rg_block_cache_get(ctx->mem, bytes, RG_CUDA_STREAM_COMPUTE);
    if (!p)
        rg_fatal_oom(__FILE__, __LINE__, "cuda:%d: out of device memory for %zu bytes of scratch",
                     ctx->device, bytes);
    return p;
}

void rg_cuda_scratch_free(rg_cuda_ctx *ctx, void *p) {
    rg_block_cache_put(ctx->mem, p);
}
