/* cudatest.h — helpers for the CUDA backend's tests: skip visibly without a GPU, move buffers
 * between the CPU and cuda:0 through the backend tables, and compare the two backends.
 *
 * A test that needs a GPU starts with RGT_REQUIRE_CUDA(): without one it prints "SKIPPED" and
 * calls cr_skip_test, and tests/cuda/tests.cmake makes CTest report the program as skipped, not
 * passed. */
#ifndef RG_CUDATEST_H
#define RG_CUDATEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgtest.h"
#include "ringgrad/device.h"

#define RGT_REQUIRE_CUDA()                                                                         \
    do {                                                                                           \
        if (rg_cuda_device_count() == 0) {                                                         \
            fprintf(stderr, "SKIPPED %s: no CUDA device\n", __func__);                             \
            cr_skip_test("no CUDA device");                                                        \
        }                                                                                          \
    } while (0)

static inline const rg_backend *rgt_gpu(void) {
    return rg_backend_for(RG_CUDA_DEVICE(0));
}

/* A cuda:0 copy of `bytes` bytes of host memory; free with rgt_dev_free. */
static inline void *rgt_dev(const void *host, size_t bytes) {
    const rg_backend *be = rgt_gpu();
    void *d = be->alloc(bytes);
    cr_assert(d, "cuda alloc of %zu bytes failed", bytes);
    if (host) be->copy(d, host, bytes, RG_COPY_H2D);
    return d;
}

static inline void rgt_dev_free(void *d, size_t bytes) {
    rgt_gpu()->free(d, bytes);
}

/* Copies a device buffer back to the host (waits for the GPU). */
static inline void rgt_host(void *host, const void *dev, size_t bytes) {
    rgt_gpu()->copy(host, dev, bytes, RG_COPY_D2H);
}

/* n floats, uniform in [lo, hi), from Philox stream `seed` (malloc'ed; the caller frees). */
static inline float *rgt_rand(int64_t n, float lo, float hi, uint64_t seed) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    cr_assert(x);
    rg_cpu_backend.uniform(n, lo, hi, seed, 0, x);
    return x;
}

/* Asserts that the n floats at device pointer dev match host `want` within atol + rtol |want|. */
static inline void rgt_assert_dev_close(const float *dev, const float *want, int64_t n, double atol,
                                        double rtol, const char *what) {
    float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    cr_assert(got);
    rgt_host(got, dev, (size_t)n * sizeof *got);
    rgt_assert_close(got, want, n, atol, rtol, what);
    free(got);
}

/* Asserts bitwise equality of n bytes at device pointer dev and host `want`. */
static inline void rgt_assert_dev_equal(const void *dev, const void *want, size_t bytes,
                                        const char *what) {
    unsigned char *got = malloc(bytes ? bytes : 1);
    cr_assert(got);
    rgt_host(got, dev, bytes);
    const unsigned char *w = want;
    for (size_t i = 0; i < bytes; i++)
        if (got[i] != w[i])
            cr_assert_fail("%s: byte %zu of %zu differs (%u, want %u)", what, i, bytes, got[i],
                           w[i]);
    free(got);
}

#endif
