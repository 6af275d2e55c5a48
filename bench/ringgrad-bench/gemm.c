/* gemm.c — cblas_sgemm alone on a few shapes: is the BLAS healthy on this machine today? */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ringgrad.h"

void rgb_run_gemm(const rgb_opts *o) {
    static const int64_t shapes[][3] = {
        {1024, 1024, 1024}, {64, 73728, 288}, {288, 9216, 64}, {128, 128, 9216}, {512, 784, 4608}};
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    double *t = calloc((size_t)o->iters, sizeof *t);
    RG_CHECK(t, "gemm bench: out of memory");
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
    free(t);
}
