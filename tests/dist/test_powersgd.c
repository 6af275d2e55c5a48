/* PowerSGD (dist/powersgd.c) against a reference of its math written here in plain C, in double:
 * classical Gram-Schmidt, P = M Q, Q = M^T P, the approximation P Q^T and error feedback, over
 * several steps with warm start; in a world of one, where the allreduces change nothing (the
 * reduction over ranks: tests/dist/mpi_powersgd.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/powersgd_impl.h"
#include "rgtest.h"

enum { N = 12, M = 9, R = 3, STEPS = 4 };

static double frand(uint64_t *s) { /* xorshift in [-1, 1) */
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}

/* Classical Gram-Schmidt on the columns of a (rows, cols) row-major matrix, in double. */
static void ref_orthonormal(double *a, int rows, int cols) {
    for (int j = 0; j < cols; j++) {
        double *v = calloc((size_t)rows, sizeof *v);
        for (int k = 0; k < rows; k++) v[k] = a[k * cols + j];
        for (int i = 0; i < j; i++) {
            double dot = 0;
            for (int k = 0; k < rows; k++) dot += a[k * cols + i] * a[k * cols + j];
            for (int k = 0; k < rows; k++) v[k] -= dot * a[k * cols + i];
        }
        double norm = 0;
        for (int k = 0; k < rows; k++) norm += v[k] * v[k];
        norm = sqrt(norm);
        for (int k = 0; k < rows; k++) a[k * cols + j] = norm > 0 ? v[k] / norm : 0;
        free(v);
    }
}

Test(dist_powersgd, orthogonalize_matches_classical_gram_schmidt) {
    uint64_t seed = 7;
    float a[N * R];
    double ref[N * R];
    for (int i = 0; i < N * R; i++) ref[i] = a[i] = (float)frand(&seed);
    rg_psgd_orthogonalize(a, N, R);
    ref_orthonormal(ref, N, R);
    for (int i = 0; i < N * R; i++)
        cr_assert(fabs(a[i] - ref[i]) < 1e-5, "element %d: %g, reference %g", i, a[i], ref[i]);
    for (int i = 0; i < R; i++) /* and the columns are orthonormal */
        for (int j = 0; j < R; j++) {
            double dot = 0;
            for (int k = 0; k < N; k++) dot += (double)a[k * R + i] * a[k * R + j];
            cr_assert(fabs(dot - (i == j)) < 1e-5, "column %d . column %d = %g", i, j, dot);
        }
}

Test(dist_powersgd, zero_column_stays_zero) {
    float a[4 * 2] = {1, 0, 2, 0, 0, 0, 0, 0}; /* second column zero */
    rg_psgd_orthogonalize(a, 4, 2);
    for (int k = 0; k < 4; k++) cr_assert(isfinite(a[k * 2]) && a[k * 2 + 1] == 0.0f);
}

/* STEPS rounds of PowerSGD on random gradients; the reference repeats the formulas in double from
 * the same starting Q. Also checks error feedback's bookkeeping: the approximations sent plus the
 * error left equal the sum of the gradients (nothing is lost, only delayed). */
Test(dist_powersgd, rounds_match_the_reference_with_error_feedback_and_warm_start) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    rg_comm *c = rg_dist_comm(d);
    rg_psgd_matrix s;
    cr_assert(rg_psgd_init(&s, N, M, R, 1));
    uint64_t seed = 3;
    double q[M * R], e[N * M] = {0}, sum_g[N * M] = {0}, sum_sent[N * M] = {0};
    for (int i = 0; i < M * R; i++) q[i] = s.q[i] = (float)frand(&seed); /* the same start */
    s.q_ready = true;
    int64_t floats = 0;
    for (int t = 0; t < STEPS; t++) {
        float g[N * M];
        double mm[N * M], p[N * R], approx[N * M];
        for (int i = 0; i < N * M; i++) g[i] = (float)frand(&seed), sum_g[i] += g[i];
        for (int i = 0; i < N * M; i++) mm[i] = g[i] + e[i];
        for (int i = 0; i < N; i++) /* P = M Q */
            for (int j = 0; j < R; j++) {
                p[i * R + j] = 0;
                for (int k = 0; k < M; k++) p[i * R + j] += mm[i * M + k] * q[k * R + j];
            }
        ref_orthonormal(p, N, R);
        for (int k = 0; k < M; k++) /* Q = M^T P */
            for (int j = 0; j < R; j++) {
                q[k * R + j] = 0;
                for (int i = 0; i < N; i++) q[k * R + j] += mm[i * M + k] * p[i * R + j];
            }
        for (int i = 0; i < N; i++) /* approx = P Q^T; e = M - approx */
            for (int k = 0; k < M; k++) {
                approx[i * M + k] = 0;
                for (int j = 0; j < R; j++) approx[i * M + k] += p[i * R + j] * q[k * R + j];
                e[i * M + k] = mm[i * M + k] - approx[i * M + k];
            }
        cr_assert_eq(rg_psgd_reduce(&s, g, c, &floats), RG_OK);
        for (int i = 0; i < N * M; i++) {
            cr_assert(fabs(g[i] - approx[i]) < 1e-4, "step %d element %d: %g, reference %g", t, i,
                      g[i], approx[i]);
            cr_assert(fabs(s.error[i] - e[i]) < 1e-4, "step %d error %d: %g, reference %g", t, i,
                      s.error[i], e[i]);
            sum_sent[i] += g[i];
        }
    }
    cr_assert_eq(floats, (int64_t)STEPS * (N + M) * R, "(n + m) r floats per round");
    for (int i = 0; i < N * M; i++)
        cr_assert(fabs(sum_sent[i] + s.error[i] - sum_g[i]) < 1e-4, "element %d: %g + %g != %g", i,
                  sum_sent[i], s.error[i], sum_g[i]);
    /* rank 3 of a 12 x 9 matrix is an approximation: some error must be left (the test can fail) */
    double left = 0;
    for (int i = 0; i < N * M; i++) left += fabs(s.error[i]);
    cr_assert(left > 1e-2, "no error left: %g", left);
    rg_psgd_free(&s);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_powersgd, full_rank_is_exact) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    rg_psgd_matrix s;
    cr_assert(rg_psgd_init(&s, 6, 4, 8, 5)); /* rank clipped to 4 = min(n, m) */
    cr_assert_eq(s.r, 4);
    uint64_t seed = 11;
    float g[24], want[24];
    for (int i = 0; i < 24; i++) want[i] = g[i] = (float)frand(&seed);
    int64_t floats = 0;
    cr_assert_eq(rg_psgd_reduce(&s, g, rg_dist_comm(d), &floats), RG_OK);
    for (int i = 0; i < 24; i++) cr_assert(fabs(g[i] - want[i]) < 1e-5, "element %d", i);
    rg_psgd_free(&s);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_powersgd, only_large_matrices_are_worth_it) {
    cr_assert(rg_psgd_worth(2, (int64_t[]){256, 4608}, 4), "the CNN's fc1.weight");
    cr_assert(!rg_psgd_worth(2, (int64_t[]){10, 256}, 4), "fc2.weight: too small");
    cr_assert(!rg_psgd_worth(4, (int64_t[]){64, 32, 3, 3}, 4), "conv2.weight: too small");
    cr_assert(!rg_psgd_worth(1, (int64_t[]){100000}, 4), "a bias");
    cr_assert(!rg_psgd_worth(2, (int64_t[]){256, 256}, 65), "rank too high to pay");
}
