/* context.cu — one context per GPU (streams, cuBLAS and cuDNN handles, memory caches), device
 * discovery and selection, the stream API for the dist module and the event timers.
 *
 * What it teaches: which device an op runs on. The kernels' host functions work on the calling
 * thread's *current* device, the CUDA runtime's per-thread notion, and find its context here.
 * rg_cuda_backend_for(index) returns cuda:index's own table (backend.cu), whose every entry first
 * makes cuda:index current (PyTorch's device guard, without the restore): a tensor on cuda:1 is
 * worked on by cuda:1 from any thread, whatever device that thread used last.
 *
 * Global state, and the only mutable kind in the backend: the table `contexts`, one slot per
 * device, each filled once under init_lock and read-only afterwards (readers take the fast path
 * through an acquire load), and the device count, read once through pthread_once. Contexts are
 * made lazily so that a rank touches only its own GPU (a context costs hundreds of MiB), and live
 * until the process exits, like the primary CUDA contexts they sit on: tearing them down from an
 * atexit handler would race with the driver's own shutdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cuda/cuda_impl.h"
#include "ringgrad/device.h"

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int device_count;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static rg_cuda_ctx *contexts[RG_CUDA_MAX_DEVICES];

static void count_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error for a CPU run */
        n = 0;
    }
    device_count = n < RG_CUDA_MAX_DEVICES ? n : RG_CUDA_MAX_DEVICES;
}

extern "C" int rg_cuda_backend_device_count(void) {
    pthread_once(&count_once, count_devices);
    return device_count;
}

static bool env_flag(const char *name, bool fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    return strcmp(v, "0") != 0;
}

int rg_cuda_swap_device(int device) {
    int prev;
    RG_CUDA_CHECK(cudaGetDevice(&prev));
    if (prev != device) RG_CUDA_CHECK(cudaSetDevice(device));
    return prev;
}

/* Streams are non-blocking (no implicit ordering with the legacy default stream, which some
 * libraries still use) and the comm stream gets the highest priority, so that a ready allreduce
 * is scheduled ahead of the backward kernels it overlaps with. */
static void create_streams(rg_cuda_ctx *ctx) {
    int least, greatest;
    RG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    RG_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx->stream[RG_CUDA_STREAM_COMPUTE],
                                               cudaStreamNonBlocking, least));
    RG_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx->stream[RG_CUDA_STREAM_COMM],
                                               cudaStreamNonBlocking, greatest));
}

/* cuBLAS's default math mode keeps float32 GEMMs in full float32; TF32 tensor cores (10-bit
 * mantissa inputs, about 8x the throughput on A100/H100) only when asked for.
 * The handle gets a workspace of its own, 32 MiB on Hopper and later and 4 MiB before (cuBLAS's
 * recommendation; PyTorch gives its handles the same), rather than the library's default pool,
 * so that its size is known and the same on every machine. It is set after cublasSetStream,
 * which resets it, and lives as long as the context. (On the H200 the backend's products run at
 * 1.00 of cublasSgemm on a handle of the bench's own, with it.) */
static void create_handles(rg_cuda_ctx *ctx) {
    RG_CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    RG_CUBLAS_CHECK(cublasSetStream(ctx->cublas, rg_cuda_compute(ctx)));
    int major = 0;
    RG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device));
    size_t ws_bytes = (size_t)(major >= 9 ? 32 : 4) << 20;
    RG_CUDA_CHECK(cudaMalloc(&ctx->cublas_ws, ws_bytes));
    RG_CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, ws_bytes));
    RG_CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                             : CUBLAS_DEFAULT_MATH));
    RG_CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    RG_CUDNN_CHECK(cudnnSetStream(ctx->cudnn, rg_cuda_compute(ctx)));
}

static rg_cuda_ctx *ctx_create(int device) {
    rg_cuda_ctx *ctx = (rg_cuda_ctx *)calloc(1, sizeof *ctx);
    RG_CHECK(ctx, "cuda:%d: out of host memory for the device context", device);
    ctx->device = device;
    ctx->tf32 = env_flag("RG_CUDA_TF32", false);
    ctx->deterministic = env_flag("RG_CUDA_DETERMINISTIC", false);
    const char *algo = getenv("RG_CUDA_CONV_ALGO");
    RG_CHECK(!algo || !*algo || !strcmp(algo, "find") || !strcmp(algo, "heuristic"),
             "RG_CUDA_CONV_ALGO is '%s'; it takes find (time cuDNN's algorithms, the default) or "
             "heuristic (cuDNN's ranking, the default with RG_CUDA_DETERMINISTIC=1)",
             algo);
    /* Timing can pick another algorithm on another run (two within noise of each other), so a
     * run that asks to be reproducible takes the heuristic's fixed choice unless told to time. */
    ctx->conv_find = algo && *algo ? !strcmp(algo, "find") : !ctx->deterministic;
    ctx->conv_verbose = env_flag("RG_CUDA_CONV_VERBOSE", false);
    ctx->wgrad_separate = env_flag("RG_CUDA_WGRAD_SEPARATE", true);
    const char *api = getenv("RG_CUDA_CONV_API");
    RG_CHECK(!api || !*api || !strcmp(api, "graph") || !strcmp(api, "graph-only") ||
                 !strcmp(api, "legacy"),
             "RG_CUDA_CONV_API is '%s'; it takes graph (time cuDNN's graph-API engines beside "
             "cudnnFind's algorithms and take the faster: the default), legacy (cudnnFind's "
             "algorithms only) or graph-only (the graph API's plan wherever there is one: for "
             "tests)",
             api);
    /* graph by default since the H100 run of the thirteenth session: ResNet-50's FP32 step
     * 44.0 -> 40.0 ms, TF32 1% faster (docs/PERFORMANCE.md); it acts only with find timing */
    ctx->conv_graph = !api || !*api || !strncmp(api, "graph", 5);
    ctx->conv_graph_only = api && !strcmp(api, "graph-only");
    ctx->alloc_cache = env_flag("RG_CUDA_ALLOC_CACHE", true);
    int prev = rg_cuda_swap_device(device);
    RG_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
    create_streams(ctx);
    create_handles(ctx);
    pthread_mutex_init(&ctx->cudnn_lock, NULL);
    pthread_mutex_init(&ctx->event_lock, NULL);
    RG_CUDA_CHECK(cudaEventCreateWithFlags(&ctx->order_event, cudaEventDisableTiming));
    rg_cuda_alloc_init(ctx);
    rg_cuda_swap_device(prev);
    return ctx;
}

rg_cuda_ctx *rg_cuda_ctx_get(int device) {
    int n = rg_cuda_backend_device_count();
    RG_CHECK(device >= 0 && device < n, "cuda:%d: no such device (%d CUDA device%s visible)",
             device, n, n == 1 ? "" : "s");
    rg_cuda_ctx *ctx = __atomic_load_n(&contexts[device], __ATOMIC_ACQUIRE);
    if (ctx) return ctx;
    pthread_mutex_lock(&init_lock);
    ctx = contexts[device];
    if (!ctx) {
        ctx = ctx_create(device);
        __atomic_store_n(&contexts[device], ctx, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&init_lock);
    return ctx;
}

rg_cuda_ctx *rg_cuda_ctx_current(void) {
    int device;
    RG_CUDA_CHECK(cudaGetDevice(&device));
    return rg_cuda_ctx_get(device);
}

extern "C" const rg_backend *rg_cuda_backend_for(int index) {
    rg_cuda_ctx_get(index); /* checks the index; makes the context on first use */
    return rg_cuda_table(index);
}

void rg_cuda_order(rg_cuda_ctx *signal_ctx, cudaStream_t signaller, cudaStream_t waiter) {
    if (signaller == waiter) return;
    pthread_mutex_lock(&signal_ctx->event_lock);
    RG_CUDA_CHECK(cudaEventRecord(signal_ctx->order_event, signaller));
    /* the wait takes the event as recorded now; recording it again later does not affect it */
    RG_CUDA_CHECK(cudaStreamWaitEvent(waiter, signal_ctx->order_event, 0));
    pthread_mutex_unlock(&signal_ctx->event_lock);
}

/* ---- device selection (ringgrad/device.h) ---- */

extern "C" rg_status rg_cuda_set_device(int local_rank, rg_device *dev) {
    RG_CHECK(local_rank >= 0, "rg_cuda_set_device: local rank %d", local_rank);
    int n = rg_cuda_backend_device_count();
    if (n == 0)
        return rg_error(RG_EDEVICE, "rg_cuda_set_device: no CUDA device is visible (check the "
                                    "driver, nvidia-smi and CUDA_VISIBLE_DEVICES)");
    int device = n == 1 ? 0 : local_rank;
    if (device >= n)
        return rg_error(RG_EDEVICE,
                        "rg_cuda_set_device: local rank %d has no GPU of its own "
                        "(%d visible): run at most %d ranks per host",
                        local_rank, n, n);
    rg_cuda_ctx_get(device);
    RG_CUDA_CHECK(cudaSetDevice(device));
    if (dev) dev->type = RG_DEV_CUDA, dev->index = device;
    return RG_OK;
}

extern "C" rg_status rg_cuda_device_name(int index, char *buf, size_t n) {
    RG_CHECK(buf && n > 0, "rg_cuda_device_name: no buffer");
    buf[0] = '\0';
    if (index < 0 || index >= rg_cuda_backend_device_count())
        return rg_error(RG_EDEVICE, "rg_cuda_device_name: no device cuda:%d", index);
    cudaDeviceProp prop;
    RG_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(buf, n, "%s", prop.name);
    return RG_OK;
}

/* ---- streams for the dist module (tensor/cuda/streams.h) ---- */

static void check_stream_id(rg_cuda_stream_id id) {
    RG_CHECK((unsigned)id < RG_CUDA_STREAM_COUNT, "bad CUDA stream id %d", (int)id);
}

extern "C" cudaStream_t rg_cuda_stream(int device, rg_cuda_stream_id id) {
    check_stream_id(id);
    return rg_cuda_ctx_get(device)->stream[id];
}

extern "C" void rg_cuda_stream_wait(int device, rg_cuda_stream_id waiter,
                                    rg_cuda_stream_id signaller) {
    check_stream_id(waiter);
    check_stream_id(signaller);
    rg_cuda_ctx *ctx = rg_cuda_ctx_get(device);
    rg_cuda_order(ctx, ctx->stream[signaller], ctx->stream[waiter]);
}

extern "C" void rg_cuda_record_stream(int device, void *p, rg_cuda_stream_id id) {
    check_stream_id(id);
    rg_block_cache_use(rg_cuda_ctx_get(device)->mem, p, (int)id);
}

extern "C" void *rg_cuda_alloc_on(int device, size_t bytes, rg_cuda_stream_id id) {
    check_stream_id(id);
    return rg_block_cache_get(rg_cuda_ctx_get(device)->mem, bytes, (int)id);
}

/* ---- event timers (ringgrad/device.h) ---- */

struct rg_cuda_timer {
    rg_cuda_ctx *ctx;
    cudaEvent_t start, stop;
};

extern "C" rg_status rg_cuda_timer_new(rg_device dev, rg_cuda_timer **out) {
    *out = NULL;
    if (dev.type != RG_DEV_CUDA || dev.index < 0 || dev.index >= rg_cuda_backend_device_count())
        return rg_error(RG_EDEVICE, "rg_cuda_timer_new: no CUDA device %d", dev.index);
    rg_cuda_timer *t = (rg_cuda_timer *)calloc(1, sizeof *t);
    if (!t) return rg_error(RG_ENOMEM, "rg_cuda_timer_new: out of host memory");
    t->ctx = rg_cuda_ctx_get(dev.index);
    int prev = rg_cuda_swap_device(dev.index);
    RG_CUDA_CHECK(cudaEventCreate(&t->start));
    RG_CUDA_CHECK(cudaEventCreate(&t->stop));
    rg_cuda_swap_device(prev);
    *out = t;
    return RG_OK;
}

extern "C" void rg_cuda_timer_free(rg_cuda_timer *t) {
    if (!t) return;
    RG_CUDA_CHECK(cudaEventDestroy(t->start));
    RG_CUDA_CHECK(cudaEventDestroy(t->stop));
    free(t);
}

extern "C" void rg_cuda_timer_start(rg_cuda_timer *t) {
    RG_CHECK(t, "rg_cuda_timer_start: NULL timer");
    RG_CUDA_CHECK(cudaEventRecord(t->start, rg_cuda_compute(t->ctx)));
}

extern "C" void rg_cuda_timer_stop(rg_cuda_timer *t) {
    RG_CHECK(t, "rg_cuda_timer_stop: NULL timer");
    RG_CUDA_CHECK(cudaEventRecord(t->stop, rg_cuda_compute(t->ctx)));
}

extern "C" float rg_cuda_timer_elapsed_ms(rg_cuda_timer *t) {
    RG_CHECK(t, "rg_cuda_timer_elapsed_ms: NULL timer");
    float ms = 0.0f;
    RG_CUDA_CHECK(cudaEventSynchronize(t->stop)); /* the one wait, documented in ringgrad/device.h */
    RG_CUDA_CHECK(cudaEventElapsedTime(&ms, t->start, t->stop));
    return ms;
}
