/* backend.c — the CPU backend's table, plain memory operations and thread control. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

static void cpu_memset0(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}

static void cpu_copy(void *dst, const void *src, size_t bytes, rg_copy_kind kind) {
    RG_CHECK(kind == RG_COPY_H2H, "cpu backend: device copy without a device backend");
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static void cpu_synchronize(void) {}

const rg_backend rg_cpu_backend = {
    .name = "cpu",
    .alloc = rg_cpu_alloc,
    .free = rg_cpu_free,
    .memset0 = cpu_memset0,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .mem_stats = rg_cpu_mem_stats,
    .mem_release_cached = rg_cpu_mem_release_cached,
    .fill = rg_cpu_fill,
    .axpby = rg_cpu_axpby,
    .binary = rg_cpu_binary,
    .reduce_bcast = rg_cpu_reduce_bcast,
    .relu_forward = rg_cpu_relu_forward,
    .relu_backward = rg_cpu_relu_backward,
    .sum = rg_cpu_sum,
    .argmax = rg_cpu_argmax,
    .uniform = rg_cpu_uniform,
    .normal = rg_cpu_normal,
    .gemm = rg_cpu_gemm,
    .conv2d_forward = rg_cpu_conv2d_forward,
    .conv2d_backward_data = rg_cpu_conv2d_backward_data,
    .conv2d_backward_filter = rg_cpu_conv2d_backward_filter,
    .maxpool2d_forward = rg_cpu_maxpool2d_forward,
    .maxpool2d_backward = rg_cpu_maxpool2d_backward,
    .dropout_forward = rg_cpu_dropout_forward,
    .dropout_backward = rg_cpu_dropout_backward,
    .cross_entropy_forward = rg_cpu_cross_entropy_forward,
    .cross_entropy_backward = rg_cpu_cross_entropy_backward,
    .sgd_step = rg_cpu_sgd_step,
    .adam_step = rg_cpu_adam_step,
    .f32_to_f16 = rg_cpu_f32_to_f16,
    .f16_to_f32 = rg_cpu_f16_to_f32,
    .host_alloc = rg_cpu_alloc,
    .host_free = rg_cpu_free,
};

static int num_threads; /* 0 until rg_set_num_threads runs */

int rg_set_num_threads(int n) {
    if (n <= 0) {
        const char *env = getenv("RG_NUM_THREADS");
        n = env ? atoi(env) : 0;
        if (n <= 0) n = omp_get_num_procs();
    }
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    num_threads = n;
    return n;
}

int rg_num_threads(void) { return num_threads ? num_threads : rg_set_num_threads(0); }
