/* backend.cu — placeholder until the CUDA backend lands: device discovery only. */
#include <cuda_runtime.h>

#include "tensor/cuda/cuda_backend.h"

extern "C" int rg_cuda_backend_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

extern "C" const rg_backend *rg_cuda_backend_for(int index) {
    rg_fatal(__FILE__, __LINE__, "cuda:%d: the CUDA backend is not implemented yet", index);
}
