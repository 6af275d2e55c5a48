/* powersgd.c — PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019) for one gradient matrix.
 *
 * What it teaches: a gradient matrix M (n x m) is sent as two thin matrices P (n x r) and Q
 * (m x r) with M ~ P Q^T, (n + m) r floats instead of n m: fc1.weight's 256 x 784 at r = 4 is 4,160
 * floats instead of 200,704, 48x fewer. One step of power iteration per training step finds the
 * r directions that matter most; Q is kept from the step before (warm start), so the iteration
 * continues across steps. Error feedback adds what the approximation left out to the next
 * step's gradient, so nothing is lost for good, only delayed; without it PowerSGD does not reach
 * full accuracy. Both P and Q are sums over ranks, so the approximation is of the *average*
 * gradient, computed by allreduce (which a low-rank method can use, unlike top-k sparsification).
 * The three products (P = M Q, Q = M^T P, P Q^T) go through the CPU backend's GEMM: as plain
 * loops (double accumulation) they took 7 ms a step for the CNN's fc1 (128 x 9216, r = 4), all of
 * it after backward, where it added to every step's wait (docs/PERFORMANCE.md).
 * This follows PyTorch's torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py. */
#include "dist/powersgd_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "tensor/backend_impl.h"

bool rg_psgd_worth(int ndim, const int64_t *shape, int r) {
    if (ndim < 2) return false;
    int64_t n = shape[0], m = 1;
    for (int d = 1; d < ndim; d++) m *= shape[d];
    /* each compressed matrix costs two collectives of its own after backward: only the large
     * ones repay that (in the CNN, fc1.weight alone) */
    return n * m >= RG_PSGD_MIN_NUMEL && (n + m) * (int64_t)r * 2 <= n * m;
}

bool rg_psgd_init(rg_psgd_matrix *s, int64_t n, int64_t m, int r, uint64_t seed) {
    if (r > n) r = (int)n;
    if (r > m) r = (int)m;
    *s = (rg_psgd_matrix){.n = n, .m = m, .r = r, .seed = seed};
    s->error = calloc((size_t)(n * m), sizeof(float));
    s->p = calloc((size_t)(n * r), sizeof(float));
    s->q = calloc((size_t)(m * r), sizeof(float));
    return s->error && s->p && s->q;
}

void rg_psgd_free(rg_psgd_matrix *s) {
    free(s->error), free(s->p), free(s->q);
    *s = (rg_psgd_matrix){0};
}

void rg_psgd_orthogonalize(float *a, int64_t rows, int cols) {
    for (int i = 0; i < cols; i++) {
        double norm = 0;
        for (int64_t k = 0; k < rows; k++) norm += (double)a[k * cols + i] * a[k * cols + i];
        norm = sqrt(norm);
        float inv = norm > 0 ? (float)(1.0 / norm) : 0.0f;
        for (int64_t k = 0; k < rows; k++) a[k * cols + i] *= inv;
        for (int j = i + 1; j < cols; j++) { /* rest -= (col . rest_j) col */
            double dot = 0;
            for (int64_t k = 0; k < rows; k++) dot += (double)a[k * cols + i] * a[k * cols + j];
            for (int64_t k = 0; k < rows; k++) a[k * cols + j] -= (float)dot * a[k * cols + i];
        }
    }
}

/* Standard normal values for Q's start (Box-Muller over Philox), then orthogonalised. */
static void init_q(rg_psgd_matrix *s) {
    for (int64_t i = 0; i < s->m * s->r; i++) {
        float u1 = rg_philox_uniform(s->seed, 2 * (uint64_t)i),
              u2 = rg_philox_uniform(s->seed, 2 * (uint64_t)i + 1);
        s->q[i] = sqrtf(-2.0f * logf(u1 > 1e-12f ? u1 : 1e-12f)) * cosf(6.2831853f * u2);
    }
    rg_psgd_orthogonalize(s->q, s->m, s->r);
    s->q_ready = true;
}

rg_status rg_psgd_reduce(rg_psgd_matrix *s, float *grad, rg_comm *c, int64_t *floats_sent) {
    const int64_t n = s->n, m = s->m;
    const int r = s->r;
    if (!s->q_ready) init_q(s);
    const rg_backend *be = &rg_cpu_backend; /* host gradients only (rg_ddp_new checks) */
    /* M = grad + error, formed in the error buffer itself (the backend's vector loop: dist/ is
     * built for baseline x86-64), which error = M - grad turns back into the error at the end */
    be->axpby(n * m, 1.0f, grad, 1.0f, s->error);
    const float *M = s->error;
    be->gemm(false, false, n, r, m, 1.0f, M, m, s->q, r, 0.0f, s->p, r); /* P = M Q */
    RG_TRY(rg_comm_allreduce(c, s->p, n * r, RG_COMM_F32, RG_REDUCE_SUM));
    rg_psgd_orthogonalize(s->p, n, r);
    be->gemm(true, false, m, r, n, 1.0f, M, m, s->p, r, 0.0f, s->q, r); /* Q = M^T P */
    RG_TRY(rg_comm_allreduce(c, s->q, m * r, RG_COMM_F32, RG_REDUCE_AVG));
    be->gemm(false, true, n, m, r, 1.0f, s->p, r, s->q, r, 0.0f, grad, m); /* grad = P Q^T */
    be->axpby(n * m, -1.0f, grad, 1.0f, s->error);                         /* error = M - grad */
    *floats_sent += (n + m) * r;
    return RG_OK;
}
