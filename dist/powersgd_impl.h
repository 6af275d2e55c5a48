/* powersgd_impl.h — PowerSGD gradient compression for one matrix (dist/powersgd.c), used by the
 * DDP reducer with rg_ddp_opts.compress_powersgd. Private to dist/ (tests see it). */
#ifndef RG_POWERSGD_IMPL_H
#define RG_POWERSGD_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/comm.h"

/* The state of one compressed gradient, viewed as an n x m row-major matrix (a weight [out, in],
 * or a conv weight [out, in*kh*kw]), on the host. */
typedef struct {
    int64_t n, m;
    int r;        /* rank of the approximation */
    float *error; /* (n, m) what compression left out so far (error feedback); during a round,
                   * M = grad + error */
    float *p;     /* (n, r) */
    float *q;     /* (m, r) kept between steps (warm start) */
    bool q_ready;
    uint64_t seed; /* for Q's first values: the same on every rank */
} rg_psgd_matrix;

/* Whether a tensor of this shape is worth compressing at rank r: a matrix of at least
 * RG_PSGD_MIN_NUMEL elements whose (n + m) r floats are at most half of its n m (PyTorch's
 * min_compression_rate 2). */
#define RG_PSGD_MIN_NUMEL 65536
bool rg_psgd_worth(int ndim, const int64_t *shape, int r);

/* Allocates the state for an n x m matrix (rank r clipped to min(n, m)); false on out of memory. */
bool rg_psgd_init(rg_psgd_matrix *s, int64_t n, int64_t m, int r, uint64_t seed);
void rg_psgd_free(rg_psgd_matrix *s);

/* Gram-Schmidt on the columns of a (rows, cols) row-major matrix, in place: each column is divided
 * by its norm (a zero column stays zero) and removed from the columns after it (PyTorch's
 * _orthogonalize_gram_schmidt with epsilon 0). */
void rg_psgd_orthogonalize(float *a, int64_t rows, int cols);

/* One PowerSGD round over `grad` (n*m floats, this rank's gradient), as PyTorch's powerSGD_hook
 * with error feedback and warm start:
 *   M = grad + error;  P = M Q;  allreduce(P, sum);  orthogonalize(P);  Q = M^T P;
 *   allreduce(Q, sum);  Q /= N;  grad = P Q^T (the average's approximation);  error = M - grad
 * Collective (two allreduces, in the same order on every rank). Adds the floats given to the
 * allreduces to *floats_sent. When an allreduce fails, error holds M, not the error: a failed
 * collective ends the job (rg_ddp_wait's caller stops), so nothing reads it. */
rg_status rg_psgd_reduce(rg_psgd_matrix *s, float *grad, rg_comm *c, int64_t *floats_sent);

#endif
