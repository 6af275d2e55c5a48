/* backend.c — the CPU backend's table, plain memory operations and thread control. */
#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

/* Bytes from which a zeroing is shared out among the threads, in pieces of MEMSET_PIECE: zeroing
 * ResNet-50's 100 MB of gradients each step was a serial stretch of the 2-thread step. */
#define MEMSET_PAR_MIN (1 << 20)
#define MEMSET_PIECE (256 << 10)

void rg_cpu_zero_f32_many(int count, float *const *p, const int64_t *n) {
    for (int i = 0; i < count; i++) rg_cpu_memset0(p[i], (size_t)n[i] * sizeof(float));
}

void rg_cpu_memset0(void *p, size_t bytes) {
    if (bytes < MEMSET_PAR_MIN) {
        if (bytes) memset(p, 0, bytes);
        return;
    }
    int64_t pieces = (int64_t)((bytes + MEMSET_PIECE - 1) / MEMSET_PIECE);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < pieces; i++) {
        size_t off = (size_t)i * MEMSET_PIECE;
        memset((char *)p + off, 0, bytes - off < MEMSET_PIECE ? bytes - off : MEMSET_PIECE);
    }
}

void rg_cpu_copy(void *dst, const void *src, size_t bytes, rg_copy_kind kind) {
    RG_CHECK(kind == RG_COPY_H2H, "cpu backend: device copy without a device backend");
    if (bytes && dst != src) memmove(dst, src, bytes);
}

void rg_cpu_synchronize(void) {}

/* Staging memory on the CPU is ordinary cached memory. */
void *rg_cpu_host_alloc(size_t bytes) { return rg_cpu_alloc(bytes); }
void rg_cpu_host_free(void *p, size_t bytes) { rg_cpu_free(p, bytes); }

/* The table itself is built once per instruction set (isa_table.c) and chosen in isa.c. */

/* The thread count: set by rg_set_num_threads, or once, lazily, from RG_NUM_THREADS or the core
 * count by the first rg_num_threads (pthread_once, so two threads asking first agree). Atomic,
 * because the loader and comm threads read it while the main thread may set it. */
static _Atomic int num_threads; /* 0 until set */
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

rg_status rg_env_num_threads(int *out) {
    *out = 0;
    const char *env = getenv("RG_NUM_THREADS");
    if (!env) return RG_OK;
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    while (end != env && isspace((unsigned char)*end)) end++;
    if (end == env || *end || errno || n < 1 || n > RG_MAX_THREADS)
        return rg_error(RG_EINVAL, "RG_NUM_THREADS='%.40s': expected a whole number of threads "
                        "from 1 to %d (unset it for one per core)", env, RG_MAX_THREADS);
    *out = (int)n;
    return RG_OK;
}

static int default_threads(void) {
    int n = 0;
    if (rg_env_num_threads(&n) != RG_OK) {
        n = omp_get_num_procs();
        fprintf(stderr, "ringgrad: warning: %s; using %d\n", rg_last_error(), n);
    }
    return n > 0 ? n : omp_get_num_procs();
}

int rg_set_num_threads(int n) {
    RG_CHECK(n <= RG_MAX_THREADS, "rg_set_num_threads: %d threads; at most %d", n, RG_MAX_THREADS);
    if (n <= 0) n = default_threads();
    omp_set_num_threads(n);
    openblas_set_num_threads(1); /* rg_cpu_gemm shares products out over OpenMP's threads */
    atomic_store(&num_threads, n);
    return n;
}

static void set_default(void) {
    if (atomic_load(&num_threads) == 0) rg_set_num_threads(0);
}

int rg_num_threads(void) {
    int n = atomic_load(&num_threads);
    if (n) return n;
    pthread_once(&default_once, set_default);
    return atomic_load(&num_threads);
}
