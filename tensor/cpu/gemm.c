/* gemm.c — matrix products through OpenBLAS's cblas_sgemm (row-major): rg_cpu_gemm_blas, which
 * every copy of rg_cpu_gemm (gemm_tile.c) calls for the products it does not run itself.
 *
 * OpenBLAS runs single-threaded (rg_set_num_threads sets it to 1): a product large enough to
 * share is cut here into one slice of C per OpenMP thread, each a single-threaded cblas_sgemm.
 * OpenBLAS's own thread pool would otherwise be a second set of threads beside OpenMP's, each
 * spinning while the other runs: at two threads on two cores, the CNN step lost about a fifth of
 * its CPU time to the two pools' waiting (sched_yield, libgomp spinning; docs/PERFORMANCE.md). */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "tensor/cpu/cpu.h"

/* FLOP below which a product runs on the calling thread (about 20 us at one thread). */
#define GEMM_PAR_MIN_FLOP (1 << 21)
/* Slices of C are whole multiples of this many rows or columns (OpenBLAS's register tiles). */
#define GEMM_SLICE_ALIGN 16

static void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                  int64_t ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, alpha, a,
                (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

void rg_cpu_gemm_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) { /* C = beta*C; BLAS leaves C alone for k == 0 only when beta == 1 */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    (void)rg_num_threads(); /* the first call sets OpenBLAS to one thread (backend.c) */
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    bool by_cols = n >= m; /* cut the longer side of C */
    int64_t len = by_cols ? n : m;
    if (nt > 1 && 2.0 * (double)m * (double)n * (double)k >= GEMM_PAR_MIN_FLOP &&
        len >= 2 * GEMM_SLICE_ALIGN) {
        int64_t step = (len + nt - 1) / nt;
        step = (step + GEMM_SLICE_ALIGN - 1) / GEMM_SLICE_ALIGN * GEMM_SLICE_ALIGN;
        int64_t slices = (len + step - 1) / step;
#pragma omp parallel for num_threads(slices) schedule(static, 1)
        for (int64_t si = 0; si < slices; si++) {
            int64_t s0 = si * step, sl = len - s0 < step ? len - s0 : step;
            if (by_cols) /* columns s0.. of C: of b's columns (rows of the stored b^T) */
                sgemm(trans_a, trans_b, m, sl, k, alpha, a, lda, b + (trans_b ? s0 * ldb : s0),
                      ldb, beta, c + s0, ldc);
            else /* rows s0.. of C: of a's rows (columns of the stored a^T) */
                sgemm(trans_a, trans_b, sl, n, k, alpha, a + (trans_a ? s0 : s0 * lda), lda, b,
                      ldb, beta, c + s0 * ldc, ldc);
        }
        return;
    }
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* OpenBLAS's cores with AVX-512 kernels are the names driver/others/dynamic.c gives them; any
 * other name, or one this list does not know yet, counts as without, which at worst costs the few
 * per cent by which OpenBLAS's AVX-512 kernels beat the tile (conv2d_gemm.c). */
bool rg_cpu_conv_products_on_blas(void) {
    static const char *const off_on[] = {"0", "1"};
    int forced = rg_env_choice("RG_CONV_BLAS", off_on, 2, -1);
    if (forced >= 0) return forced == 1;
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(core, avx512[i])) return true;
    return false;
}
