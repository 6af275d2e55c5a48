/* cuda_api.h — the CUDA backend's public extras: one GPU per rank, device names, and timers made
 * of CUDA events. Declared in every build: without the CUDA backend each function reports
 * RG_ENOTSUP (tensor/cuda_api_nocuda.c), so programs need no #ifdef to offer --device cuda. */
#ifndef RG_CUDA_API_H
#define RG_CUDA_API_H

#include <stddef.h>

#include "tensor/status.h"
#include "tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Picks the GPU of this MPI local rank (rg_comm_local_rank) and makes it the calling thread's
 * current device: cuda:local_rank, or cuda:0 when exactly one GPU is visible (a launcher that
 * sets CUDA_VISIBLE_DEVICES per rank). Writes it to *dev unless dev is NULL. Returns RG_EDEVICE
 * when there is no GPU or this rank has none of its own, RG_ENOTSUP in a build without CUDA;
 * rg_last_error() says which. Other threads (loader, comm thread) get their device through
 * rg_backend_for(dev), which makes dev current for the thread that calls it. */
rg_status rg_cuda_set_device(int local_rank, rg_device *dev);

/* The name of cuda:index ("NVIDIA H100 80GB HBM3") into buf (n bytes, NUL-terminated). */
rg_status rg_cuda_device_name(int index, char *buf, size_t n);

/* ---- timing with CUDA events (for ringgrad-bench) ----
 * A timer brackets work queued on dev's compute stream; reading it waits for the stop event
 * only, never for the whole device:
 *   rg_cuda_timer *t;  rg_cuda_timer_new(dev, &t);
 *   rg_cuda_timer_start(t);  ... ops on dev ...  rg_cuda_timer_stop(t);
 *   float ms = rg_cuda_timer_elapsed_ms(t);      host waits here, once
 *   rg_cuda_timer_free(t); */
typedef struct rg_cuda_timer rg_cuda_timer;

/* *out = a new timer on cuda device dev (caller frees it), or NULL with RG_EDEVICE / RG_ENOTSUP. */
rg_status rg_cuda_timer_new(rg_device dev, rg_cuda_timer **out);
void rg_cuda_timer_free(rg_cuda_timer *t);  /* NULL is a no-op */
void rg_cuda_timer_start(rg_cuda_timer *t); /* records the start event on the compute stream */
void rg_cuda_timer_stop(rg_cuda_timer *t);  /* records the stop event */
/* Milliseconds between start and stop; blocks until the stop event has completed. */
float rg_cuda_timer_elapsed_ms(rg_cuda_timer *t);

#ifdef __cplusplus
}
#endif

#endif
