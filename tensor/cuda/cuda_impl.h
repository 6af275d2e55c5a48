/* cuda_impl.h — private to the CUDA backend: the per-device context, error checks, launch helpers,
 * warp and block reductions, and the host entry points of the kernels (one .cu file per op, paired
 * with tensor/cpu/<op>.c; the per-device tables that gather them are in backend.cu).
 *
 * Conventions every .cu file follows:
 *   - all work goes on the current device's COMPUTE stream; nothing uses the legacy default stream;
 *   - every CUDA, cuBLAS and cuDNN call is checked; every kernel launch is followed by
 *     RG_CUDA_CHECK_LAUNCH() (cudaGetLastError), so a bad launch is reported where it happened;
 *   - elementwise kernels are grid-stride loops with 64-bit indices (tensors may pass 2^31
 *     elements); per-element formulas come from core/kernels.h, shared with the CPU backend;
 *   - no kernel uses atomics on floats, so every result is deterministic run to run. */
#ifndef RG_CUDA_IMPL_H
#define RG_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <limits.h>
#include <pthread.h>

#include "tensor/backend_impl.h"
#include "tensor/block_cache.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/per_thread.h"
#include "tensor/cuda/streams.h"

#define RG_CUDA_MAX_DEVICES 16 /* devices one process can use; more are not counted */
/* The pinned-host cache's pseudo-stream: "the host owns this block" (alloc.cu). */
#define RG_CUDA_STREAM_HOST RG_CUDA_STREAM_COUNT
static_assert(RG_CUDA_STREAM_HOST < RG_BLOCK_CACHE_MAX_STREAMS, "stream ids fit the cache");

typedef struct rg_cuda_conv_cache rg_cuda_conv_cache; /* conv2d.cu */

/* Everything one GPU needs, made once on first use (context.cu) and never freed. */
typedef struct rg_cuda_ctx {
    int device;
    int sm_count;
    bool tf32;          /* RG_CUDA_TF32=1: cuBLAS and cuDNN may use TF32 tensor cores */
    bool deterministic; /* RG_CUDA_DETERMINISTIC=1: only deterministic cuDNN algorithms */
    bool conv_find;     /* RG_CUDA_CONV_ALGO=find (default): time cuDNN's algorithms per shape */
    bool conv_verbose;  /* RG_CUDA_CONV_VERBOSE=1: print each conv algorithm chosen */
    bool wgrad_separate; /* RG_CUDA_WGRAD_SEPARATE=0: cuDNN accumulates dw itself (conv2d.cu) */
    bool conv_graph;     /* RG_CUDA_CONV_API=graph (default): also time cuDNN's graph API */
    bool conv_graph_only; /* RG_CUDA_CONV_API=graph-only: its plan wherever there is one */
    bool alloc_cache;   /* RG_CUDA_ALLOC_CACHE=0 turns the caching allocator off */
    cudaStream_t stream[RG_CUDA_STREAM_COUNT];
    cublasHandle_t cublas;      /* bound to stream[COMPUTE] */
    void *cublas_ws;            /* cuBLAS's workspace (context.cu) */
    cudnnHandle_t cudnn;        /* bound to stream[COMPUTE]; used only under cudnn_lock */
    pthread_mutex_t cudnn_lock; /* a cuDNN handle must not be used by two threads at once */
    rg_cuda_conv_cache *conv;   /* per-shape descriptors and algorithms; under cudnn_lock */
    rg_block_cache *mem;        /* device memory (alloc.cu) */
    rg_block_cache *pinned;     /* page-locked host memory (alloc.cu) */
    pthread_mutex_t event_lock; /* guards order_event */
    cudaEvent_t order_event;    /* stream-to-stream ordering (rg_cuda_stream_wait, copies) */
} rg_cuda_ctx;

/* ---- error checks: report file:line, the call and CUDA's message through rg_fatal ---- */

static inline void rg_cuda_check_(cudaError_t e, const char *call, const char *file, int line) {
    if (e != cudaSuccess)
        rg_fatal(file, line, "CUDA: %s failed: %s (%s)", call, cudaGetErrorString(e),
                 cudaGetErrorName(e));
}
static inline void rg_cublas_check_(cublasStatus_t e, const char *call, const char *file,
                                    int line) {
    if (e != CUBLAS_STATUS_SUCCESS)
        rg_fatal(file, line, "cuBLAS: %s failed: %s", call, cublasGetStatusString(e));
}
static inline void rg_cudnn_check_(cudnnStatus_t e, const char *call, const char *file, int line) {
    if (e != CUDNN_STATUS_SUCCESS)
        rg_fatal(file, line, "cuDNN: %s failed: %s", call, cudnnGetErrorString(e));
}
#define RG_CUDA_CHECK(call) rg_cuda_check_((call), #call, __FILE__, __LINE__)
#define RG_CUBLAS_CHECK(call) rg_cublas_check_((call), #call, __FILE__, __LINE__)
#define RG_CUDNN_CHECK(call) rg_cudnn_check_((call), #call, __FILE__, __LINE__)
/* After every <<<...>>>: launch errors (bad configuration, no kernel image for this GPU) surface
 * here, at the launch, instead of at some later synchronisation. */
#define RG_CUDA_CHECK_LAUNCH() RG_CUDA_CHECK(cudaGetLastError())

/* ---- launches ---- */

#define RG_CUDA_BLOCK 256 /* threads per block of the elementwise kernels */

/* Blocks for a grid-stride loop over n items: one per RG_CUDA_BLOCK items, at most 32 per SM (an
 * SM holds 8 blocks of 256 threads, so that is four full waves); larger n loops in the kernel
 * instead of making a grid that can exceed gridDim.x or waste time on block scheduling. */
static inline unsigned rg_cuda_grid(const rg_cuda_ctx *ctx, int64_t n) {
    int64_t blocks = (n + RG_CUDA_BLOCK - 1) / RG_CUDA_BLOCK, cap = (int64_t)ctx->sm_count * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

/* Blocks for kernels that give each row to one warp (RG_CUDA_BLOCK / 32 rows per block), with
 * the same cap; such kernels loop over rows with a warp-stride loop. */
static inline unsigned rg_cuda_warp_grid(const rg_cuda_ctx *ctx, int64_t rows) {
    return rg_cuda_grid(ctx, rows * 32);
}

/* A grid-stride loop with a 64-bit index. */
#define RG_CUDA_FOR(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)blockDim.x * gridDim.x)

/* A warp-stride loop: each warp takes rows warp, warp + warps, ... (all its lanes the same row). */
#define RG_CUDA_FOR_WARP(r, rows)                                                                  \
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (rows);            \
         r += ((int64_t)gridDim.x * blockDim.x) >> 5)

/* Multi-tensor kernels (one launch over a list of tensors, each cut into chunks of a block each;
 * the launch's arguments, passed by value, hold count and first[MAX + 1], the tensors' first
 * blocks, first[0] = 0). On the device: the tensor whose blocks [first[i], first[i+1]) hold block
 * b, by binary search. */
static __device__ __forceinline__ int rg_cuda_list_owner(const int *first, int count, int b) {
    int lo = 0, hi = count;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (first[mid] <= b)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* On the host: walks count tensors, tensor i of len(i) floats in blocks of `chunk`, skipping empty
 * ones; gathers them into a (count, first[], and the tensor itself through put(a, slot, i)) and
 * calls launch(a) whenever a is full, would pass a grid's 2^31 - 1 blocks, or the list ends. */
template <class Args, class Len, class Put, class Launch>
static void rg_cuda_list_launches(Args &a, int count, int64_t chunk, Len len, Put put,
                                  Launch launch) {
    const int max = (int)(sizeof a.first / sizeof a.first[0]) - 1;
    a.count = 0, a.first[0] = 0;
    for (int i = 0; i < count; i++) {
        int64_t n = len(i), chunks = (n + chunk - 1) / chunk;
        if (n <= 0) continue;
        RG_CHECK(chunks <= INT_MAX, "cuda: a tensor of %lld floats in a multi-tensor launch",
                 (long long)n);
        if (a.count == max || a.first[a.count] + chunks > INT_MAX) {
            launch(a);
            a.count = 0;
        }
        put(a, a.count, i);
        a.first[a.count + 1] = a.first[a.count] + (int)chunks;
        a.count++;
    }
    if (a.count > 0) launch(a);
}

/* Whether p may be read as float4 (and promised to cuDNN as 16-byte aligned). */
static inline bool rg_cuda_aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0;
}

static inline cudaStream_t rg_cuda_compute(const rg_cuda_ctx *ctx) {
    return ctx->stream[RG_CUDA_STREAM_COMPUTE];
}

/* ---- reductions in a fixed order (deterministic; every lane gets the result) ---- */

static __device__ __forceinline__ float rg_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float rg_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread.
 * Every thread of the block must call it. */
static __device__ __forceinline__ float rg_block_sum(float v) {
    __shared__ float warp_sums[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = rg_warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
        v = rg_warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

/* ---- context.cu ---- */

/* The context of cuda:device, made on first use. Stops (RG_CHECK) for a device that is not there.
 */
rg_cuda_ctx *rg_cuda_ctx_get(int device);
/* The context of the calling thread's current device (every table entry sets it first). */
rg_cuda_ctx *rg_cuda_ctx_current(void);
/* Makes device current for the calling thread; returns the one that was. */
int rg_cuda_swap_device(int device);
/* Work queued on `waiter` from now waits for what was queued on `signaller` (an event). */
void rg_cuda_order(rg_cuda_ctx *signal_ctx, cudaStream_t signaller, cudaStream_t waiter);

/* ---- the table's kernels, rg_cuda_<name>, each in tensor/cuda/<op>.cu (the list and its
 * comments: tensor/backend_impl.h); every one works on the calling thread's current device ---- */
#define RG_CUDA_PROTOTYPE(ret, fn, params) ret rg_cuda_##fn params;
RG_BACKEND_KERNELS(RG_CUDA_PROTOTYPE)
#undef RG_CUDA_PROTOTYPE

/* ---- helpers shared by the .cu files ---- */
/* alloc.cu */
void rg_cuda_alloc_init(rg_cuda_ctx *ctx);
/* Temporary device memory for one op's kernels on the compute stream (workspace, partial sums).
 * Give it back with rg_cuda_scratch_free right after the last launch that uses it: the cache
 * hands it out again only to work queued later on the same stream. Stops when out of memory. */
void *rg_cuda_scratch(rg_cuda_ctx *ctx, size_t bytes);
void rg_cuda_scratch_free(rg_cuda_ctx *ctx, void *p);
/* elementwise.cu: y = beta * y, with y never read when beta == 0 (cuDNN's and BLAS's beta rule) */
void rg_cuda_scale(rg_cuda_ctx *ctx, int64_t n, float beta, float *y);
/* reduce.cu: *out = scale * sum(x), on the device, in a fixed order */
void rg_cuda_sum_scaled(rg_cuda_ctx *ctx, int64_t n, const float *x, float scale, float *out);

/* ---- backend.cu ---- */
/* The table of cuda:device (device < RG_CUDA_MAX_DEVICES); its entries make that device current. */
const rg_backend *rg_cuda_table(int device);

#endif
