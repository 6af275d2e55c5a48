/* util.c — the bench's clock, medians, random buffers and the plain sgemm call. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bench.h"
#include "ringgrad.h"
#include "tensor/cpu/cpu.h" /* rg_cpu_gemm_blas */

bool rgb_cpu_clock;

double rgb_now(void) {
    struct timespec t;
    clock_gettime(rgb_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double rgb_wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rgb_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

float *rgb_random(int64_t n, uint64_t seed) {
    size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    RG_CHECK(p, "ringgrad-bench: out of memory for %lld floats", (long long)n);
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1; /* a cheap LCG: timing needs no quality */
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    return p;
}

void rgb_free(void *p) {
    free(p);
}

/* The reference product on the library's threads: rg_cpu_gemm_blas, the library's own OpenBLAS
 * path (tensor/cpu/gemm.c), which keeps OpenBLAS at one thread and cuts C into one slice per
 * OpenMP thread. OpenBLAS's own pool would be a second set of threads in this process: after each
 * reference product its workers spin for a while (OpenBLAS's THREAD_TIMEOUT), and libgomp's after
 * each of ringgrad's regions, each pool stealing the other's cores. Interleaved with the conv
 * passes at two threads on two cores, the reference product of r18.l4.1x1s2 took 3.2-3.5 ms
 * against 0.86 at one thread; sliced, 0.42-0.59 (Zen 5, 2026-11-26, docs/PERFORMANCE.md). */
void rgb_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float *c) {
    rg_cpu_gemm_blas(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

void rgb_print_blas_core(void) {
    const char *core = openblas_get_corename(), *forced = getenv("OPENBLAS_CORETYPE");
    bool avx512 = !strcmp(rg_cpu_isa(), "avx512");
    bool conv_on_tile = avx512 && !rg_cpu_conv_products_on_blas(); /* tensor/cpu/conv2d_gemm.c */
    printf("ringgrad-bench: OpenBLAS %s kernels (%s)%s%s\n", core ? core : "?",
           !avx512        ? "the fully connected layers' products"
           : conv_on_tile ? "small products; 1x1 convolutions on ringgrad's tile"
                          : "1x1 convolutions, small products",
           forced ? ", chosen by OPENBLAS_CORETYPE=" : "", forced ? forced : "");
    /* A CPU with AVX-512 held to OpenBLAS's AVX2 kernels: on a Zen 5 whose environment set
     * OPENBLAS_CORETYPE=Haswell, unsetting it (OpenBLAS then picked Cooperlake) made the CNN
     * step 5% faster (docs/PERFORMANCE.md, 2026-11-25), before the fully connected layers moved
     * to ringgrad's own tile (tensor/cpu/gemm_tile.c); since the 1x1 convolutions moved there too
     * in that case, what is left is ResNet-50's step at 64 px 5% slower at one thread
     * (2026-11-29). */
    if (core && avx512 && (!strcasecmp(core, "haswell") || !strcasecmp(core, "zen")))
        printf(
            "ringgrad-bench: note: this CPU has AVX-512 but OpenBLAS runs its %s (AVX2) kernels; "
            "%s for its AVX-512 ones (a few per cent on 1x1 convolutions)\n",
            core,
            forced ? "unset OPENBLAS_CORETYPE (or set it to SkylakeX)"
                   : "set OPENBLAS_CORETYPE=SkylakeX");
}
