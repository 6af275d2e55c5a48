/* gemm.cu — row-major matrix products through cuBLAS (pairs with tensor/cpu/gemm.c).
 *
 * cuBLAS is column-major. A row-major (m,n) matrix with row stride ldc is, read column-major, its
 * transpose: an (n,m) matrix with leading dimension ldc. So instead of C = op(A) op(B) we ask
 * cuBLAS for C^T = op(B)^T op(A)^T: swap the operands and m with n, keep each transpose flag. No
 * data moves. The _64 entry point takes 64-bit sizes, so no dimension is truncated to int.
 *
 * Precision: full float32 unless RG_CUDA_TF32=1 put the handle in TF32 tensor-op mode
 * (context.cu). Scalars are host pointers (the default pointer mode): read at the call. */
#include "tensor/cuda/cuda_impl.h"

/* c (m,n), row stride ldc:  c = beta * c, never reading c when beta == 0. */
__global__ void scale_matrix_kernel(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
    RG_CUDA_FOR(i, m * n) {
        float *ci = c + (i / n) * ldc + i % n;
        *ci = beta == 0.0f ? 0.0f : beta * *ci;
    }
}

void rg_cuda_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                  int64_t ldc) {
    if (m == 0 || n == 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    if (k == 0) { /* an empty sum: C = beta*C, which BLAS skips for beta == 1 only */
        scale_matrix_kernel<<<rg_cuda_grid(ctx, m * n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
            m, n, beta, c, ldc);
        RG_CUDA_CHECK_LAUNCH();
        return;
    }
    /* a: op(A) (m,k); b: op(B) (k,n); c: (m,n) — all row-major */
    RG_CUBLAS_CHECK(cublasSgemm_64(ctx->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                   lda, &beta, c, ldc));
}
