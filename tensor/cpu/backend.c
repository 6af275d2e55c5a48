/* backend.c — the CPU backend's table, plain memory operations and thread control. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

void rg_cpu_memset0(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
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
