/* vendor_nocuda.c — cuda/vendor.c in a build without CUDA: never reached, because
 * rg_bench_cuda stops first when there is no CUDA device (and a build without CUDA has none). */
#include "cuda_bench.h"

rgbc_vendor *rgbc_vendor_new(int device) {
    return NULL;
}

void rgbc_vendor_free(rgbc_vendor *v) {}

void rgbc_vendor_gemm(rgbc_vendor *v, int64_t m, int64_t n, int64_t k, const float *a,
                      const float *b, float *c) {}

bool rgbc_vendor_conv_plan(rgbc_vendor *v, const rg_conv2d_shape *s, float *x, float *w, float *y) {
    return false;
}

void rgbc_vendor_conv(rgbc_vendor *v, rgbc_pass pass, float *x, float *w, float *y) {}

int rgbc_vendor_conv_algo(const rgbc_vendor *v, rgbc_pass pass) {
    return -1;
}

void rgbc_profiler(bool on) {}
