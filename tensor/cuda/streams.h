/* streams.h — what the dist module's NCCL backend needs from the CUDA backend.
 *
 * Each device has two streams: COMPUTE, where every op of the backend table runs (cuBLAS and
 * cuDNN are bound to it), and COMM, a high-priority stream for collectives, so that NCCL kernels
 * overlap with backward instead of queueing behind it. Ordering between them is done on the
 * device with events, never by the host:
 *
 *   backward writes a bucket (COMPUTE) ──rg_cuda_stream_wait(dev, COMM, COMPUTE)──▶ ncclAllReduce
 *   on COMM ──rg_cuda_stream_wait(dev, COMPUTE, COMM)──▶ the optimizer reads the bucket (COMPUTE)
 *
 * A buffer that COMM reads or writes must be announced to the caching allocator with
 * rg_cuda_record_stream, or its memory could be handed to new COMPUTE work while NCCL still uses
 * it.
 *
 * The backend tables make their device current themselves; a thread that calls CUDA or NCCL
 * directly (the comm thread) must first make its device current (cudaSetDevice).
 *
 * Only for code that is built with CUDA (files under a cuda/ folder); plain C. */
#ifndef RG_CUDA_STREAMS_H
#define RG_CUDA_STREAMS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RG_CUDA_STREAM_COMPUTE,
    RG_CUDA_STREAM_COMM,
    RG_CUDA_STREAM_COUNT
} rg_cuda_stream_id;

/* Stream `id` of cuda:device, created with the device's context on first use. Stops (RG_CHECK)
 * for a device that does not exist. The backend owns it: never destroy it. */
cudaStream_t rg_cuda_stream(int device, rg_cuda_stream_id id);

/* Work queued on `waiter` from now on starts after all work queued so far on `signaller`. An
 * event recorded on signaller plus cudaStreamWaitEvent: the host does not wait. */
void rg_cuda_stream_wait(int device, rg_cuda_stream_id waiter, rg_cuda_stream_id signaller);

/* Tells the caching allocator that work queued on stream `id` uses block p (a pointer returned by
 * the backend's alloc, not an interior pointer): once p is freed, its memory is reused only after
 * that work has completed. As torch's Tensor.record_stream. */
void rg_cuda_record_stream(int device, void *p, rg_cuda_stream_id id);

/* A block of at least `bytes` owned by stream `id` (a buffer that NCCL fills, say): work on that
 * stream may reuse it as soon as it is freed. NULL when out of memory. Freed with the backend
 * table's free. */
void *rg_cuda_alloc_on(int device, size_t bytes, rg_cuda_stream_id id);

#ifdef __cplusplus
}
#endif

#endif
