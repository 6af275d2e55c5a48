/* cuda_bench.h — `ringgrad-bench --device cuda`: ringgrad's CUDA backend next to the libraries
 * it is built on, called directly.
 *
 *   gemm  the backend's gemm against cublasSgemm, TFLOP/s;
 *   conv  conv2d forward, backward data and backward filter against cuDNN with its fastest
 *         algorithm (benchmarked by cudnnFind*), TFLOP/s;
 *   cnn   one training step of the Fashion-MNIST CNN (Adam), images/s, alone and under DDP;
 *   resnet one training step of a ResNet (default ResNet-50 on 3x224x224, batch 32, SGD with
 *         momentum), images/s; the peer is bench/torch_resnet_step.py --device cuda;
 *   comm  allreduce bus bandwidth through the nccl communicator, against the DDP reducer
 *         (bucketed, with and without float16) on the same bytes; run it under mpirun, one
 *         rank per GPU.
 * Times come from CUDA events on the compute stream; each pair is measured interleaved and
 * reported as medians. Without a GPU it says so and returns 1. */
#ifndef RGB_CUDA_BENCH_H
#define RGB_CUDA_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "ringgrad.h"
#include "autograd/autograd_impl.h" /* fires the hooks by hand: the reducer alone */
#include "tensor/backend_impl.h" /* kernels are timed through the backend table */

/* The whole of `ringgrad-bench --device cuda ...`: parses argv itself (the same program's
 * flags, see cuda_bench.c) and returns the exit code. */
int rg_bench_cuda(int argc, char **argv);

/* ---- shared by the parts (cuda_bench.c, cuda_bench_train.c) ---- */

typedef struct {
    rg_dist *dist;
    rg_device dev;
    const rg_backend *gpu;
    rg_cuda_timer *timer;
    int rank, size;
    int iters;  /* timed repetitions per result (median) */
    int batch;  /* images per conv shape and per CNN step */
    int max_mb; /* comm: largest allreduce, MiB */
    const char *model; /* resnet: the model (default resnet50) */
    int image_size;    /* resnet: 3xSxS images (default 224) */
    int resnet_batch;  /* resnet: images per step (default 32) */
    bool print; /* rank 0 prints */
} rgbc_ctx;

/* Milliseconds that `reps` calls of fn(arg) take on the GPU, timed by events. (Medians come
 * from bench.h's rgb_median.) */
double rgbc_time_ms(rgbc_ctx *b, void (*fn)(void *), void *arg, int reps);

void rgbc_run_cnn(rgbc_ctx *b);
void rgbc_run_resnet(rgbc_ctx *b);
void rgbc_run_comm(rgbc_ctx *b);

/* ---- the libraries called directly (cuda/vendor.c; vendor_nocuda.c without CUDA) ---- */

typedef struct rgbc_vendor rgbc_vendor;
typedef enum { RGBC_FWD, RGBC_BWD_DATA, RGBC_BWD_FILTER, RGBC_PASS_COUNT } rgbc_pass;

/* Handles bound to dev's compute stream (where the event timers record). NULL without CUDA. */
rgbc_vendor *rgbc_vendor_new(int device);
void rgbc_vendor_free(rgbc_vendor *v);
/* c (m,n) = a (m,k) b (k,n), row-major, with cublasSgemm in the backend's math mode. */
void rgbc_vendor_gemm(rgbc_vendor *v, int64_t m, int64_t n, int64_t k, const float *a,
                      const float *b, float *c);
/* Prepares shape s: descriptors and, for each pass, cuDNN's fastest algorithm as measured by
 * cudnnFind*AlgorithmEx on the given buffers. Returns false if cuDNN offers none. */
bool rgbc_vendor_conv_plan(rgbc_vendor *v, const rg_conv2d_shape *s, float *x, float *w, float *y);
/* One pass of the planned shape: fwd y = conv(x, w); bwd data x = conv^T(y, w); bwd filter
 * w = corr(x, y). */
void rgbc_vendor_conv(rgbc_vendor *v, rgbc_pass pass, float *x, float *w, float *y);
/* The algorithm the plan chose for a pass (cuDNN's enum value). */
int rgbc_vendor_conv_algo(const rgbc_vendor *v, rgbc_pass pass);
/* cudaProfilerStart / Stop: the range a profiler started with --profile-from-start off (ncu,
 * nsys) records; without one attached, nothing. */
void rgbc_profiler(bool on);

#endif
