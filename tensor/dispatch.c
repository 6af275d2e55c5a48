/* dispatch.c — the one place that maps a device to its backend table. This file and CMake are
 * the only places that know whether the CUDA backend was built. */
#include "tensor/backend_impl.h"

#ifdef RG_CUDA
#include "tensor/cuda/cuda_backend.h"
#endif

const rg_backend *rg_backend_for(rg_device dev) {
    switch (dev.type) {
    case RG_DEV_CPU:
        return &rg_cpu_backend;
    case RG_DEV_CUDA:
#ifdef RG_CUDA
        return rg_cuda_backend_for(dev.index);
#else
        rg_fatal(__FILE__, __LINE__, "device cuda:%d: this build has no CUDA backend "
                 "(configure with -DRG_CUDA=ON and the CUDA toolkit installed)", dev.index);
#endif
    default:
        rg_fatal(__FILE__, __LINE__, "bad device type %d", (int)dev.type);
    }
}

const rg_backend *rg_backend_table(rg_device_type type, int index) {
    switch (type) {
    case RG_DEV_CPU:
        return index == 0 ? &rg_cpu_backend : NULL;
    case RG_DEV_CUDA:
#ifdef RG_CUDA
        return rg_cuda_backend_table(index);
#else
        return NULL;
#endif
    default:
        return NULL;
    }
}

int rg_cuda_device_count(void) {
#ifdef RG_CUDA
    return rg_cuda_backend_device_count();
#else
    return 0;
#endif
}

bool rg_cuda_compiled(void) {
#ifdef RG_CUDA
    return true;
#else
    return false;
#endif
}

rg_mem_stats rg_mem_stats_get(rg_device dev) { return rg_backend_for(dev)->mem_stats(); }

void rg_mem_release_cached(rg_device dev) { rg_backend_for(dev)->mem_release_cached(); }
