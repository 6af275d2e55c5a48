/* cuda_backend.h — the CUDA backend as the dispatcher sees it. */
#ifndef RG_CUDA_BACKEND_H
#define RG_CUDA_BACKEND_H

#include "tensor/backend_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend table for cuda:index (stops with a clear message if the device is unusable). */
const rg_backend *rg_cuda_backend_for(int index);
/* cuda:index's table without making its context (no GPU needed); NULL past the devices one
 * process can use. For the test that checks every entry. */
const rg_backend *rg_cuda_backend_table(int index);
/* cudaGetDeviceCount, or 0 when no driver or device is present. */
int rg_cuda_backend_device_count(void);
/* Convolution plans and directions on the calling thread's current GPU that run a graph-API plan
 * (RG_CUDA_CONV_API=graph or graph-only; conv2d_graph.cu). For the tests. */
int rg_cuda_conv_graph_count(void);

#ifdef __cplusplus
}
#endif

#endif
