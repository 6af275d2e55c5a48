/* dist_cuda.h — what the dist module's CUDA files share: checked CUDA calls and device selection.
 *
 * A CUDA call that fails on the comm thread means the device is unusable (a fault, a lost GPU):
 * the request fails with RG_EDEVICE naming the call, the way an NCCL failure fails it. On the
 * caller's thread (submit, finish), which cannot return a status, it stops like the CUDA
 * backend's own checks do. Plain C: only the CUDA runtime API, no kernels. */
#ifndef RG_DIST_CUDA_H
#define RG_DIST_CUDA_H

#include <cuda_runtime_api.h>

#include "dist/comm_impl.h"
#include "tensor/cuda/streams.h"

RG_NODISCARD static inline rg_status rg_dist_cuda_error(cudaError_t e, const char *call) {
    return rg_error(RG_EDEVICE, "CUDA: %s failed: %s (%s)", call, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

/* Returns RG_EDEVICE from the enclosing function when `call` fails. */
#define RG_DIST_CUDA(call)                                                                         \
    do {                                                                                           \
        cudaError_t rg_e_ = (call);                                                                \
        if (rg_e_ != cudaSuccess) return rg_dist_cuda_error(rg_e_, #call);                         \
    } while (0)

/* Stops (rg_fatal) when `call` fails: for functions that cannot return a status. */
#define RG_DIST_CUDA_FATAL(call)                                                                   \
    do {                                                                                           \
        cudaError_t rg_e_ = (call);                                                                \
        if (rg_e_ != cudaSuccess)                                                                  \
            rg_fatal(__FILE__, __LINE__, "CUDA: %s failed: %s", #call, cudaGetErrorString(rg_e_)); \
    } while (0)

/* Makes `device` the calling thread's current device; returns the one that was. */
static inline int rg_dist_cuda_use(int device) {
    int prev = device;
    RG_DIST_CUDA_FATAL(cudaGetDevice(&prev));
    if (prev != device) RG_DIST_CUDA_FATAL(cudaSetDevice(device));
    return prev;
}

#endif
