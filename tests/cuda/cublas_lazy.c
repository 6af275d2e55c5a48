/* cuBLAS is loaded on first use (tensor/cuda/cublas_lazy.c), not at start-up: a process that never
 * touches a GPU never maps it, the first cuBLAS call maps it, and a cuBLAS that cannot be loaded is
 * an error that names the file. Built only with the CUDA backend (tests.cmake); none of these needs
 * a GPU. Criterion runs each test in a process of its own, so each starts with cuBLAS unloaded. */
#include <cublas_v2.h>

#include "cudatest.h"

/* Whether this process has a file whose name contains `name` mapped. */
static bool mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

Test(cublas_lazy, a_process_that_uses_no_gpu_does_not_load_cublas) {
    cr_assert(mapped("libcudart"), "the check sees the libraries that are linked");
    cr_assert_not(mapped("libcublas"), "cuBLAS is mapped before any use");
    /* what a CPU-only run does: count the GPUs, compute on the CPU */
    int n = rg_cuda_device_count();
    cr_assert_geq(n, 0);
    const rg_backend *cpu = rg_backend_for(RG_CPU);
    float a[12], b[20], c[15];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    for (int i = 0; i < 20; i++) b[i] = 1.0f;
    cpu->gemm(false, false, 3, 5, 4, 1.0f, a, 4, b, 5, 0.0f, c, 5);
    cr_assert_float_eq(c[0], 0.0f + 1 + 2 + 3, 0.0f);
    cr_assert_not(mapped("libcublas"), "cuBLAS is mapped after CPU work");
}

Test(cublas_lazy, the_first_cublas_call_loads_it) {
    cr_assert_not(mapped("libcublas"));
    /* The status string comes from the real library once it is loaded; no GPU is needed. */
    const char *s = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
    cr_assert_not_null(s);
    cr_assert(mapped("libcublas"), "cuBLAS is mapped after its first call");
    cr_assert_null(strstr(s, "cannot load"), "the library loaded: %s", s);
    cr_assert_gt(strlen(s), 0);
    /* without a GPU, a handle cannot be made, and the call says so rather than crashing */
    if (rg_cuda_device_count() == 0) {
        cublasHandle_t h = NULL;
        cr_assert_neq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    }
}

Test(cublas_lazy, a_cublas_that_cannot_be_loaded_is_an_error_naming_it) {
    cr_assert_eq(setenv("RG_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.0", 1), 0);
    cublasHandle_t h = NULL;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_NOT_INITIALIZED);
    cr_assert_null(h);
    cr_assert_eq(
        cublasSgemm_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, NULL, NULL, 1, NULL, 1, NULL, NULL, 1),
        CUBLAS_STATUS_NOT_INITIALIZED);
    const char *why = cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
    cr_assert_not_null(strstr(why, "/nonexistent/libcublas.so.0"), "%s", why);
    cr_assert_not_null(strstr(why, "cannot load cuBLAS"), "%s", why);
    cr_assert_not(mapped("libcublas"));
}
