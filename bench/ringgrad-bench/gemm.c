/* gemm.c — cblas_sgemm alone on a few shapes (is the BLAS healthy on this machine today?), then
 * the library's product (the backend's gemm: the register tile of tensor/cpu/gemm_tile.c in the
 * AVX-512 copy) on the CNN's fc1 products against the same call with RG_GEMM_TILE=0 (its
 * OpenBLAS path: single-threaded cblas_sgemm calls, one slice of C per OpenMP thread), the two
 * interleaved run by run. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ringgrad.h"
#include "tensor/backend_impl.h" /* the product is timed through the backend table */

/* fc1 at batch 128: forward x (128 x 9216) w^T, data gradient dy (128 x 128) w, filter gradient
 * dy^T x; as (transpose a, transpose b, m, n, k) */
typedef struct {
    const char *what;
    bool ta, tb;
    int64_t m, n, k;
} fc_product;
static const fc_product FC1[] = {{"fc1 forward", false, true, 128, 128, 9216},
                                 {"fc1 data grad", false, false, 128, 9216, 128},
                                 {"fc1 filter grad", true, false, 128, 9216, 128}};

static void run_fc1(const rgb_opts *o, double *t_lib, double *t_blas) {
    /* the user's own RG_GEMM_TILE, copied: setenv may free the string getenv returned */
    char tile_env[32] = "";
    bool had_env = getenv("RG_GEMM_TILE") != NULL;
    if (had_env) snprintf(tile_env, sizeof tile_env, "%s", getenv("RG_GEMM_TILE"));
    printf("\nfc1's products: the library's gemm against its OpenBLAS path (RG_GEMM_TILE=0), "
           "median of %d interleaved runs\n",
           o->iters);
    printf("%-8s %-16s %10s %10s %10s %10s %10s\n", "threads", "product", "lib ms", "GFLOP/s",
           "blas ms", "GFLOP/s", "blas/lib");
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = rg_set_num_threads(o->threads[ti]);
        for (size_t s = 0; s < sizeof FC1 / sizeof FC1[0]; s++) {
            const fc_product *p = &FC1[s];
            int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
            float *a = rgb_random(p->m * p->k, 1), *b = rgb_random(p->k * p->n, 2),
                  *c = rgb_random(p->m * p->n, 3);
            for (int it = -1; it < o->iters; it++) { /* -1: warm-up */
                double t0 = rgb_now();
                rg_cpu_backend.gemm(p->ta, p->tb, p->m, p->n, p->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                                    p->n);
                setenv("RG_GEMM_TILE", "0", 1);
                double t1 = rgb_now();
                rg_cpu_backend.gemm(p->ta, p->tb, p->m, p->n, p->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                                    p->n);
                double t2 = rgb_now();
                if (had_env)
                    setenv("RG_GEMM_TILE", tile_env, 1);
                else
                    unsetenv("RG_GEMM_TILE");
                if (it >= 0) t_lib[it] = t1 - t0, t_blas[it] = t2 - t1;
            }
            double ml = rgb_median(t_lib, o->iters), mb = rgb_median(t_blas, o->iters);
            double flop = 2.0 * (double)p->m * (double)p->n * (double)p->k;
            printf("%-8d %-16s %10.3f %10.1f %10.3f %10.1f %10.2f\n", nt, p->what, ml * 1e3,
                   flop / ml * 1e-9, mb * 1e3, flop / mb * 1e-9, mb / ml);
            if (o->raw)
                printf("raw fc1 threads=%d product=\"%s\" lib_ms=%.4f blas_ms=%.4f\n", nt, p->what,
                       ml * 1e3, mb * 1e3);
            rgb_free(a), rgb_free(b), rgb_free(c);
        }
    }
}

void rgb_run_gemm(const rgb_opts *o) {
    static const int64_t shapes[][3] = {
        {1024, 1024, 1024}, {64, 73728, 288}, {288, 9216, 64}, {128, 128, 9216}, {512, 784, 4608}};
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    double *t = calloc((size_t)o->iters, sizeof *t), *t2 = calloc((size_t)o->iters, sizeof *t2);
    RG_CHECK(t && t2, "gemm bench: out of memory");
    printf("\ncblas_sgemm (row-major, no transposes), median of %d runs\n", o->iters);
    printf("%-8s %-20s %10s %10s\n", "threads", "M x N x K", "ms", "GFLOP/s");
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = rg_set_num_threads(o->threads[ti]);
        for (int s = 0; s < ns; s++) {
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            float *a = rgb_random(m * k, 1), *b = rgb_random(k * n, 2), *c = rgb_random(m * n, 3);
            rgb_sgemm(false, false, m, n, k, a, b, c);
            for (int it = 0; it < o->iters; it++) {
                double t0 = rgb_now();
                rgb_sgemm(false, false, m, n, k, a, b, c);
                t[it] = rgb_now() - t0;
            }
            double med = rgb_median(t, o->iters), gf = 2.0 * (double)(m * n * k) / med * 1e-9;
            char dims[64];
            snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
            printf("%-8d %-20s %10.2f %10.1f\n", nt, dims, med * 1e3, gf);
            if (o->raw) printf("raw gemm threads=%d shape=%s ms=%.4f\n", nt, dims, med * 1e3);
            rgb_free(a), rgb_free(b), rgb_free(c);
        }
    }
    run_fc1(o, t, t2);
    free(t), free(t2);
}
