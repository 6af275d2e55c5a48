/* cublas_lazy.c — cuBLAS loaded on first use, not when the process starts.
 *
 * Why: libcublas.so pulls in libcublasLt.so (540 MB), whose start-up code touches about 25,000
 * pages before main() runs. Linked normally, every process of a CUDA build paid that, GPU or not:
 * `ringgrad-train --help` took 0.36 s, 0.17 s of it in the kernel, on a VM where a page fault
 * costs 11 us (the Zen 5 of 2026-11-29, docs/PERFORMANCE.md), and Criterion starts a fresh process
 * for every test, so the suite spent more time loading cuBLAS than testing. cudart, cuDNN and NCCL
 * cost 100-200 page faults each and stay linked as usual.
 *
 * So the library does not link cuBLAS. It defines the few cuBLAS functions the backend (and the
 * bench) call, with the prototypes of <cublas_v2.h>, and each one forwards to the real function,
 * found with dlopen/dlsym the first time any of them is called (under pthread_once). The call sites
 * are unchanged: cublasCreate is still cublasCreate. The library is looked for by its soname
 * (libcublas.so.<major> of the headers the build used: LD_LIBRARY_PATH, the loader's cache), then
 * in the toolkit's library folder that CMake found (RG_CUDA_LIBDIR); RG_CUBLAS_LIBRARY=FILE loads
 * that file and no other (a cuBLAS elsewhere, or a test of the failure). If none loads, every call
 * returns CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says which file failed and why,
 * so the backend's RG_CUBLAS_CHECK stops with that message. A function missing from the library
 * found (an older cuBLAS) is the same error, naming the function.
 *
 * These definitions have the library's hidden visibility: libringgrad.so does not export them. A
 * program that links libringgrad.a and cuBLAS itself gets its own definitions from cuBLAS; these
 * then call the same functions through their own handle on the same library. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RG_STR_(x) #x
#define RG_STR(x) RG_STR_(x)
#define SONAME "libcublas.so." RG_STR(CUBLAS_VER_MAJOR)

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*set_workspace_fn)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*set_math_mode_fn)(cublasHandle_t, cublasMath_t);
typedef const char *(*status_string_fn)(cublasStatus_t);
typedef cublasStatus_t (*sgemm64_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t,
                                     int64_t, int64_t, const float *, const float *, int64_t,
                                     const float *, int64_t, const float *, float *, int64_t);

static struct {
    pthread_once_t once;
    bool ok;         /* the library and every function below were found */
    char error[512]; /* why not */
    create_fn create;
    destroy_fn destroy;
    set_stream_fn set_stream;
    set_workspace_fn set_workspace;
    set_math_mode_fn set_math_mode;
    status_string_fn status_string;
    sgemm64_fn sgemm64;
} lib = {.once = PTHREAD_ONCE_INIT};

/* dlsym's void * to a function pointer, through memcpy (ISO C has no such cast). */
static bool find(void *h, const char *name, void *fn, size_t size) {
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(lib.error, sizeof lib.error,
                 "the cuBLAS library loaded has no %s (older than the headers of the build, "
                 "%s?)",
                 name, SONAME);
        return false;
    }
    memcpy(fn, &p, size);
    return true;
}
#define FIND(h, name, field) find(h, name, &lib.field, sizeof lib.field)

/* Every function, from the library h (which stays open for the life of the process, as a linked
 * library would). */
static void find_all(void *h) {
    lib.ok = FIND(h, "cublasCreate_v2", create) && FIND(h, "cublasDestroy_v2", destroy) &&
             FIND(h, "cublasSetStream_v2", set_stream) &&
             FIND(h, "cublasSetWorkspace_v2", set_workspace) &&
             FIND(h, "cublasSetMathMode", set_math_mode) &&
             FIND(h, "cublasGetStatusString", status_string) &&
             FIND(h, "cublasSgemm_v2_64", sgemm64);
}

static void load(void) {
    const char *forced = getenv("RG_CUBLAS_LIBRARY");
    if (forced && *forced) { /* that file and no other */
        void *h = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(lib.error, sizeof lib.error, "cannot load cuBLAS (RG_CUBLAS_LIBRARY=%s): %s",
                     forced, dlerror());
            return;
        }
        find_all(h);
        return;
    }
    void *h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        char first[256];
        snprintf(first, sizeof first, "%s", dlerror());
#ifdef RG_CUDA_LIBDIR
        h = dlopen(RG_CUDA_LIBDIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
        if (!h) {
            snprintf(lib.error, sizeof lib.error,
                     "cannot load cuBLAS (%s): %s; install the CUDA toolkit's libraries or add "
                     "their folder to LD_LIBRARY_PATH",
                     SONAME, first);
            return;
        }
    }
    find_all(h);
}

static bool loaded(void) {
    pthread_once(&lib.once, load);
    return lib.ok;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.create(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.destroy(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.set_stream(handle, stream);
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.set_workspace(handle, workspace, bytes);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.set_math_mode(handle, mode);
}

/* Works without the library: then it says why the library is missing, whatever the status. */
const char *cublasGetStatusString(cublasStatus_t status) {
    if (!loaded()) return lib.error;
    return lib.status_string(status);
}

cublasStatus_t cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                 cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                 const float *alpha, const float *a, int64_t lda, const float *b,
                                 int64_t ldb, const float *beta, float *c, int64_t ldc) {
    if (!loaded()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return lib.sgemm64(handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
