/* hostdev.h — RG_HOSTDEV marks per-element functions that both the CPU loops and the CUDA kernels
 * call, so that the CPU tests exercise the very formula the GPU runs. */
#ifndef RG_HOSTDEV_H
#define RG_HOSTDEV_H

#ifdef __CUDACC__
#define RG_HOSTDEV __host__ __device__ __forceinline__
#else
#define RG_HOSTDEV __attribute__((always_inline)) inline
#endif

#endif
