/* gemm_tile.c — the backend's matrix product (rg_cpu_gemm), one copy per instruction set: in the
 * AVX-512 copy, products on the convolution's register tile (rg_conv_tile, conv2d_kernels.c);
 * everything else, and every product in the other copies, through OpenBLAS (gemm.c).
 *
 * Why: the fully connected layers' products (the CNN's fc1: 128 x 128 x 9216 and its two
 * gradients, a tenth of the CNN step) ran in OpenBLAS at 200-233 GFLOP/s with its AVX-512 kernels
 * and 121-123 with the AVX2 kernels that OPENBLAS_CORETYPE=Haswell selects, against the tile's
 * 228-236 (Zen 5, one thread; `ringgrad-bench --only gemm`). The AVX2 copy keeps OpenBLAS, whose
 * AVX2 kernels are as good as our 6 x 2 tile.
 *
 * C = A B (beta 0) or C += A B (beta 1), alpha 1, in panels of NR columns of C: the panel's
 * (K x NR) block of B is packed contiguous first (rows of B copied, or NR rows of the stored B^T
 * transposed; zero past N). Reading B in place, a row per reduction step, was 8-13% slower on
 * fc1's gradients: its rows lie 9216 floats apart, a multiple of 4 KiB, so every one of them
 * falls in the same set of the L1 cache. A's rows are read through the tile's indirection: row i
 * starts at a + i*lda (a + i when A is transposed) and reduction step t is at off[t] = t (t*lda).
 * The reduction runs in blocks of RG_CONV_KC steps, so that a block of the panel stays in cache
 * while every row of C passes. Tiles that would write past C's last row or column compute into a
 * buffer instead and are copied out at the end of the panel. Threads (OpenMP, outside a parallel
 * region) take whole panels. RG_GEMM_TILE=0 sends every product to OpenBLAS (to compare). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/conv2d_impl.h"

#if defined(__AVX512F__)

#define NR RG_CONV_NR
#define MR RG_CONV_MR
#define VL RG_CONV_VL

/* Products below this many multiply-adds stay with OpenBLAS (the off table and the edge buffers
 * cost a few microseconds), as do short reductions (PowerSGD's rank-r products): each tile would
 * store its accumulators after a handful of steps. */
#define TILE_MIN_MACS (1 << 18)
#define MIN_K 32

typedef struct {
    bool tb, acc;
    int64_t m, n, k;
    const float *a, *b;
    int64_t astride, ldb, ldc; /* astride: between A's rows (1 when A is transposed, else lda) */
    float *c;
    const int32_t *off;
} product;

static bool tile_takes(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, int64_t lda,
                       float beta) {
    if (alpha != 1.0f || (beta != 0.0f && beta != 1.0f)) return false;
    if ((double)m * (double)n * (double)k < TILE_MIN_MACS || m < MR || n < VL || k < MIN_K)
        return false;
    if (trans_a && (double)k * (double)lda >= INT32_MAX) return false; /* off[] is int32 */
    if (!trans_a && k >= INT32_MAX) return false;
    return rg_conv_switch_on("RG_GEMM_TILE");
}

/* Panel n0 of C: pack is (K x NR) floats, edge round_up(M, MR) x NR, both per thread. */
static void panel(const product *p, int64_t n0, float *pack, float *edge) {
    int64_t nn = p->n - n0 < NR ? p->n - n0 : NR;
    int nv = (int)((nn + VL - 1) / VL);
    /* the panel packed: row t at pack + t*NR, zero past nn */
    if (nn < NR)
        for (int64_t t = 0; t < p->k; t++)
            memset(pack + t * NR + nn, 0, (size_t)(NR - nn) * sizeof(float));
    if (p->tb)
        rg_conv_transpose(nn, p->k, p->b + n0 * p->ldb, p->ldb, pack, NR, NULL, 0.0f);
    else
        for (int64_t t = 0; t < p->k; t++)
            memcpy(pack + t * NR, p->b + t * p->ldb + n0, (size_t)nn * sizeof(float));
    /* rows [0, mfull) in whole tiles straight into C; the rest (a part of a tile, or every row
     * when the panel ends inside a vector) through edge, then copied out */
    int64_t mfull = nn % VL ? 0 : p->m / MR * MR, rest = p->m - mfull;
    if (mfull)
        rg_conv_panel_product(nv, mfull, p->a, NULL, p->astride, p->off, p->k, pack, p->c + n0,
                              p->ldc, p->acc);
    if (!rest) return;
    const float *a = p->a + mfull * p->astride;
    float *c = p->c + mfull * p->ldc + n0;
    if (p->acc)
        for (int64_t i = 0; i < rest; i++)
            memcpy(edge + i * NR, c + i * p->ldc, (size_t)nn * sizeof(float));
    rg_conv_panel_product(nv, rest, a, NULL, p->astride, p->off, p->k, pack, edge, NR, p->acc);
    for (int64_t i = 0; i < rest; i++)
        memcpy(c + i * p->ldc, edge + i * NR, (size_t)nn * sizeof(float));
}

static void tile_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int32_t *off = (int32_t *)rg_conv_scratch(k);
    for (int64_t t = 0; t < k; t++) off[t] = (int32_t)(trans_a ? t * lda : t);
    product p = {.tb = trans_b,
                 .acc = beta != 0.0f,
                 .m = m,
                 .n = n,
                 .k = k,
                 .a = a,
                 .b = b,
                 .astride = trans_a ? 1 : lda,
                 .ldb = ldb,
                 .ldc = ldc,
                 .c = c,
                 .off = off};
    int64_t npanel = (n + NR - 1) / NR, epad = rg_conv_round_up(m, MR) * NR;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt > npanel) nt = (int)npanel;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *pack = rg_conv_scratch(k * NR), *edge = rg_conv_scratch(epad);
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < npanel; jp++) panel(&p, jp * NR, pack, edge);
        rg_conv_scratch_free(edge, epad);
        rg_conv_scratch_free(pack, k * NR);
    }
    rg_conv_scratch_free((float *)off, k);
}
#endif

void rg_cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc) {
#if defined(__AVX512F__)
    if (tile_takes(trans_a, m, n, k, alpha, lda, beta)) {
        tile_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    rg_cpu_gemm_blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
