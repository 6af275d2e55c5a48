/* device.h — devices as a program sees them: the CPU thread count, memory statistics of the
 * caching allocators, and the CUDA extras (one GPU per rank, device names, timers made of CUDA
 * events). Declared in every build: without the CUDA backend each CUDA function reports
 * RG_ENOTSUP (tensor/cuda_api_nocuda.c), so programs need no #ifdef to offer --device cuda. */
#ifndef RG_DEVICE_H
#define RG_DEVICE_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU threads ----
 * Threads used by CPU kernels (OpenMP's; OpenBLAS is kept at one thread, and large matrix products
 * are shared out over OpenMP's threads: tensor/cpu/gemm.c). Set it from the main thread before
 * training (the OpenMP setting belongs to the thread that makes it, and kernels run on the main
 * thread); reading it is safe from any thread. Thread safety in general: see docs/ARCHITECTURE.md
 * ("Threads"): one training step (forward, rg_backward, optimizer) runs on one thread at a time;
 * concurrent rg_backward calls over shared parameters are not supported. */
#define RG_MAX_THREADS 1024

/* Sets the count: n in 1..RG_MAX_THREADS (more is a tier-2 error), or n <= 0 for RG_NUM_THREADS,
 * else one per core (an invalid RG_NUM_THREADS is ignored with a warning on stderr). Returns the
 * count now in effect. */
RG_API int rg_set_num_threads(int n);
/* The count in effect; the first call without a prior rg_set_num_threads picks the default once. */
RG_API int rg_num_threads(void);
/* RG_NUM_THREADS, validated: *n = its value, or 0 when it is unset. RG_EINVAL with a message when
 * it is not a whole number from 1 to RG_MAX_THREADS ("abc", "0", "-3", "100000"). */
RG_API RG_NODISCARD rg_status rg_env_num_threads(int *n);

/* ---- CPU instruction set ----
 * The hot CPU kernels (convolution, element-wise loops, dropout, max-pooling) are built for
 * several instruction sets and one is chosen at the first use: the best this CPU runs, or the
 * one the environment variable RG_ISA names ("avx512", "avx2", "generic"; "native" in a
 * -DRG_NATIVE=ON build, which has only that one). */
/* Makes the choice now. RG_EINVAL when RG_ISA names an unknown set or one this CPU or build
 * cannot run; rg_last_error() says which and lists those it can. Without this call, the first
 * CPU kernel makes the choice and stops the program (RG_CHECK) on such a value. */
RG_API RG_NODISCARD rg_status rg_cpu_isa_init(void);
/* The chosen set's name ("avx512", "avx2", "generic" or "native"): a static string. Makes the
 * choice if none was made yet (and stops, as above, on a bad RG_ISA). */
RG_API const char *rg_cpu_isa(void);
/* Whether this build has kernels for the set `name` and this CPU can run them. */
RG_API bool rg_cpu_isa_supported(const char *name);

/* ---- memory ---- */
/* Statistics of a backend's caching allocator, in bytes. */
typedef struct rg_mem_stats {
    /* read-only: a snapshot filled by the call that returns it */
    size_t in_use;       /* handed out to tensors now */
    size_t cached;       /* held for reuse */
    size_t peak_in_use;
    uint64_t sys_allocs; /* calls that reached the system allocator (malloc / cudaMalloc) */
    uint64_t reuses;     /* allocations served from the cache */
} rg_mem_stats;

RG_API rg_mem_stats rg_mem_stats_get(rg_device dev);
/* RG_CPU_MEM_LIMIT, validated: *bytes = its value (a number of bytes with an optional K, M or G,
 * powers of 1024: "512M", "1.5G"), or SIZE_MAX when it is unset or empty. RG_EINVAL with a message
 * when it does not parse. The CPU allocator caps what tensors hold (in use + cached) at it; and
 * a block of 64 MB or more must fit in what the host can still give (MemAvailable + SwapFree, or
 * the memory cgroup's room where that is less: a container's limit). An invalid value is ignored
 * there, with a warning on stderr. */
RG_API RG_NODISCARD rg_status rg_env_cpu_mem_limit(size_t *bytes);
/* Returns every cached block to the system. */
RG_API void rg_mem_release_cached(rg_device dev);

/* ---- CUDA ---- */
/* Number of CUDA devices usable by this process: 0 in a build without CUDA or with no GPU. */
RG_API int rg_cuda_device_count(void);
/* Whether this build contains the CUDA backend. */
RG_API bool rg_cuda_compiled(void);

/* Picks the GPU of this MPI local rank (rg_comm_local_rank) and makes it the calling thread's
 * current device: cuda:local_rank, or cuda:0 when exactly one GPU is visible (a launcher that
 * sets CUDA_VISIBLE_DEVICES per rank). Writes it to *dev unless dev is NULL. Returns RG_EDEVICE
 * when there is no GPU or this rank has none of its own, RG_ENOTSUP in a build without CUDA;
 * rg_last_error() says which. Other threads (loader, comm thread) get their device through
 * rg_backend_for(dev), which makes dev current for the thread that calls it. */
RG_API RG_NODISCARD rg_status rg_cuda_set_device(int local_rank, rg_device *dev);

/* The name of cuda:index ("NVIDIA H100 80GB HBM3") into buf (n bytes, NUL-terminated). */
RG_API RG_NODISCARD rg_status rg_cuda_device_name(int index, char *buf, size_t n);

/* ---- timing with CUDA events (for ringgrad-bench) ----
 * A timer brackets work queued on dev's compute stream; reading it waits for the stop event
 * only, never for the whole device:
 *   rg_cuda_timer *t;  rg_cuda_timer_new(dev, &t);
 *   rg_cuda_timer_start(t);  ... ops on dev ...  rg_cuda_timer_stop(t);
 *   float ms = rg_cuda_timer_elapsed_ms(t);      host waits here, once
 *   rg_cuda_timer_free(t); */
typedef struct rg_cuda_timer rg_cuda_timer;

/* *out = a new timer on cuda device dev (caller frees it), or NULL with RG_EDEVICE / RG_ENOTSUP. */
RG_API RG_NODISCARD rg_status rg_cuda_timer_new(rg_device dev, rg_cuda_timer **out);
RG_API void rg_cuda_timer_free(rg_cuda_timer *t);  /* NULL is a no-op */
RG_API
void rg_cuda_timer_start(rg_cuda_timer *t); /* records the start event on the compute stream */
RG_API void rg_cuda_timer_stop(rg_cuda_timer *t);  /* records the stop event */
/* Milliseconds between start and stop; blocks until the stop event has completed. */
RG_API float rg_cuda_timer_elapsed_ms(rg_cuda_timer *t);

#ifdef __cplusplus
}
#endif

#endif
