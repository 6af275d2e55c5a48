/* vendor.c — cuBLAS and cuDNN called directly: the reference the CUDA bench holds ringgrad's
 * backend against. Built only with CUDA (vendor_nocuda.c otherwise).
 *
 * The comparison is fair on purpose: same stream (the compute stream, so the same event timers
 * bracket both), same precision (FP32 unless RG_CUDA_TF32=1, as the backend), and for cuDNN the
 * algorithm is the one cudnnFind*AlgorithmEx measured fastest — what the backend picks too by
 * default (RG_CUDA_CONV_ALGO=find), and the ceiling for its heuristic mode. */
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda_bench.h"
#include "tensor/cuda/streams.h"

#define CK(call, ok, what)                                                                         \
    do {                                                                                           \
        if ((call) != (ok)) {                                                                      \
            fprintf(stderr, "ringgrad-bench: %s failed: %s (%s:%d)\n", what, #call, __FILE__,      \
                    __LINE__);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CUDA(call) CK(call, cudaSuccess, "CUDA")
#define CUBLAS(call) CK(call, CUBLAS_STATUS_SUCCESS, "cuBLAS")
#define CUDNN(call) CK(call, CUDNN_STATUS_SUCCESS, "cuDNN")

struct rgbc_vendor {
    int device;
    bool tf32;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    /* the planned conv shape */
    rg_conv2d_shape shape;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int algo[RGBC_PASS_COUNT];
    cudnnMathType_t math[RGBC_PASS_COUNT];
    void *ws;
    size_t ws_bytes;
};

rgbc_vendor *rgbc_vendor_new(int device) {
    rgbc_vendor *v = calloc(1, sizeof *v);
    CK(v != NULL, true, "calloc");
    const char *tf32 = getenv("RG_CUDA_TF32");
    v->device = device;
    v->tf32 = tf32 && *tf32 && strcmp(tf32, "0") != 0;
    CUDA(cudaSetDevice(device));
    cudaStream_t s = rg_cuda_stream(device, RG_CUDA_STREAM_COMPUTE);
    CUBLAS(cublasCreate(&v->cublas));
    CUBLAS(cublasSetStream(v->cublas, s));
    CUBLAS(
        cublasSetMathMode(v->cublas, v->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    CUDNN(cudnnCreate(&v->cudnn));
    CUDNN(cudnnSetStream(v->cudnn, s));
    CUDNN(cudnnCreateTensorDescriptor(&v->xd));
    CUDNN(cudnnCreateTensorDescriptor(&v->yd));
    CUDNN(cudnnCreateFilterDescriptor(&v->wd));
    CUDNN(cudnnCreateConvolutionDescriptor(&v->cd));
    return v;
}

void rgbc_vendor_free(rgbc_vendor *v) {
    if (!v) return;
    CUDA(cudaSetDevice(v->device));
    if (v->ws) CUDA(cudaFree(v->ws));
    cudnnDestroyTensorDescriptor(v->xd);
    cudnnDestroyTensorDescriptor(v->yd);
    cudnnDestroyFilterDescriptor(v->wd);
    cudnnDestroyConvolutionDescriptor(v->cd);
    cudnnDestroy(v->cudnn);
    cublasDestroy(v->cublas);
    free(v);
}

/* Row-major C = A B is column-major C^T = B^T A^T: swap the operands (as tensor/cuda/gemm.cu). */
void rgbc_vendor_gemm(rgbc_vendor *v, int64_t m, int64_t n, int64_t k, const float *a,
                      const float *b, float *c) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS(cublasSgemm_64(v->cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c,
                          n));
}

/* ---- convolution ---- */

static bool usable(cudnnStatus_t status, cudnnMathType_t math, bool tf32) {
    bool tensor_op = math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return status == CUDNN_STATUS_SUCCESS && (tf32 || !tensor_op);
}

#define WS_LIMIT ((size_t)1 << 30) /* the backend's default workspace cap */

bool rgbc_vendor_conv_plan(rgbc_vendor *v, const rg_conv2d_shape *s, float *x, float *w, float *y) {
    v->shape = *s;
    CUDNN(cudnnSetTensor4dDescriptor(v->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)s->n,
                                     (int)s->c, (int)s->h, (int)s->w));
    CUDNN(cudnnSetTensor4dDescriptor(v->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)s->n,
                                     (int)s->k, (int)s->p, (int)s->q));
    CUDNN(cudnnSetFilter4dDescriptor(v->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)s->k,
                                     (int)s->c, (int)s->r, (int)s->s));
    CUDNN(cudnnSetConvolution2dDescriptor(v->cd, s->pad_h, s->pad_w, s->stride_h, s->stride_w, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN(cudnnSetConvolutionMathType(v->cd, v->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    if (!v->ws) CUDA(cudaMalloc(&v->ws, WS_LIMIT));
    v->ws_bytes = WS_LIMIT;
    int n = 0;
    bool ok[RGBC_PASS_COUNT] = {false, false, false};
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN(cudnnFindConvolutionForwardAlgorithmEx(v->cudnn, v->xd, x, v->wd, w, v->cd, v->yd, y,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fwd, v->ws,
                                                 v->ws_bytes));
    for (int i = 0; i < n && !ok[RGBC_FWD]; i++)
        if ((ok[RGBC_FWD] = usable(fwd[i].status, fwd[i].mathType, v->tf32)))
            v->algo[RGBC_FWD] = fwd[i].algo, v->math[RGBC_FWD] = fwd[i].mathType;
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(v->cudnn, v->wd, w, v->yd, y, v->cd, v->xd, x,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, bd,
                                                      v->ws, v->ws_bytes));
    for (int i = 0; i < n && !ok[RGBC_BWD_DATA]; i++)
        if ((ok[RGBC_BWD_DATA] = usable(bd[i].status, bd[i].mathType, v->tf32)))
            v->algo[RGBC_BWD_DATA] = bd[i].algo, v->math[RGBC_BWD_DATA] = bd[i].mathType;
    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(v->cudnn, v->xd, x, v->yd, y, v->cd, v->wd,
                                                        w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &n, bf, v->ws, v->ws_bytes));
    for (int i = 0; i < n && !ok[RGBC_BWD_FILTER]; i++)
        if ((ok[RGBC_BWD_FILTER] = usable(bf[i].status, bf[i].mathType, v->tf32)))
            v->algo[RGBC_BWD_FILTER] = bf[i].algo, v->math[RGBC_BWD_FILTER] = bf[i].mathType;
    return ok[RGBC_FWD] && ok[RGBC_BWD_DATA] && ok[RGBC_BWD_FILTER];
}

void rgbc_vendor_conv(rgbc_vendor *v, rgbc_pass pass, float *x, float *w, float *y) {
    const float one = 1.0f, zero = 0.0f;
    CUDNN(cudnnSetConvolutionMathType(v->cd, v->math[pass]));
    switch (pass) {
    case RGBC_FWD:
        CUDNN(cudnnConvolutionForward(v->cudnn, &one, v->xd, x, v->wd, w, v->cd,
                                      (cudnnConvolutionFwdAlgo_t)v->algo[pass], v->ws, v->ws_bytes,
                                      &zero, v->yd, y));
        break;
    case RGBC_BWD_DATA:
        CUDNN(cudnnConvolutionBackwardData(v->cudnn, &one, v->wd, w, v->yd, y, v->cd,
                                           (cudnnConvolutionBwdDataAlgo_t)v->algo[pass], v->ws,
                                           v->ws_bytes, &zero, v->xd, x));
        break;
    default:
        CUDNN(cudnnConvolutionBackwardFilter(v->cudnn, &one, v->xd, x, v->yd, y, v->cd,
                                             (cudnnConvolutionBwdFilterAlgo_t)v->algo[pass], v->ws,
                                             v->ws_bytes, &zero, v->wd, w));
        break;
    }
}

int rgbc_vendor_conv_algo(const rgbc_vendor *v, rgbc_pass pass) {
    return v->algo[pass];
}

/* ---- profiler range ---- */

/* A profiler range is a convenience: a failure is reported, never fatal, and its error cleared
 * so that the next launch check does not see it. */
void rgbc_profiler(bool on) {
    cudaError_t e = on ? cudaProfilerStart() : cudaProfilerStop();
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "ringgrad-bench: %s: %s (ignored)\n",
                on ? "cudaProfilerStart" : "cudaProfilerStop", cudaGetErrorString(e));
    }
}
