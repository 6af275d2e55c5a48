/* PowerSGD over several ranks (dist/powersgd.c), on both host backends, against a reference made
 * from every rank's matrix (allgathered) in double: P = sum_k M_k Q, orthonormalised,
 * Q = (sum_k M_k^T P) / N, approximation P Q^T of the average gradient, error_k = M_k - P Q^T;
 * and the DDP reducer with compress_powersgd: the large matrix compressed, the rest exact. */
#include "dist/powersgd_impl.h"
#include "mpi_ddp.h"

static rg_dist *dist;
static rg_comm *comms[2];
static int rank, size;

enum { N = 40, M = 30, R = 2, STEPS = 3 };

static double frand(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}

static void ref_orthonormal(double *a, int rows, int cols) { /* modified Gram-Schmidt */
    for (int j = 0; j < cols; j++) {
        double norm = 0;
        for (int k = 0; k < rows; k++) norm += a[k * cols + j] * a[k * cols + j];
        norm = sqrt(norm);
        for (int k = 0; k < rows; k++) a[k * cols + j] = norm > 0 ? a[k * cols + j] / norm : 0;
        for (int i = j + 1; i < cols; i++) {
            double dot = 0;
            for (int k = 0; k < rows; k++) dot += a[k * cols + j] * a[k * cols + i];
            for (int k = 0; k < rows; k++) a[k * cols + i] -= dot * a[k * cols + j];
        }
    }
}

static void test_rounds_match_the_reference_over_ranks(void) {
    for (int b = 0; b < 2; b++) {
        rg_psgd_matrix s;
        MT_CHECK(rg_psgd_init(&s, N, M, R, 9), "init");
        double q[M * R], e[N * M] = {0};
        uint64_t qs = 5; /* the same Q on every rank */
        for (int i = 0; i < M * R; i++) q[i] = s.q[i] = (float)frand(&qs);
        s.q_ready = true;
        uint64_t seed = 100 + (uint64_t)rank;
        float *all = malloc(sizeof(float) * N * M * (size_t)size);
        for (int t = 0; t < STEPS; t++) {
            float g[N * M], mine[N * M];
            for (int i = 0; i < N * M; i++) g[i] = (float)frand(&seed);
            for (int i = 0; i < N * M; i++) mine[i] = (float)(g[i] + e[i]); /* M_rank */
            MT_OK(rg_comm_allgather(comms[b], mine, all, N * M, RG_COMM_F32));
            double p[N * R] = {0}, q2[M * R] = {0};
            for (int k = 0; k < size; k++)
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < R; j++)
                        for (int c = 0; c < M; c++)
                            p[i * R + j] += all[(size_t)k * N * M + i * M + c] * q[c * R + j];
            ref_orthonormal(p, N, R);
            for (int k = 0; k < size; k++)
                for (int c = 0; c < M; c++)
                    for (int j = 0; j < R; j++)
                        for (int i = 0; i < N; i++)
                            q2[c * R + j] +=
                                all[(size_t)k * N * M + i * M + c] * p[i * R + j] / size;
            memcpy(q, q2, sizeof q);
            int64_t floats = 0;
            MT_OK(rg_psgd_reduce(&s, g, comms[b], &floats));
            for (int i = 0; i < N; i++)
                for (int c = 0; c < M; c++) {
                    double approx = 0;
                    for (int j = 0; j < R; j++) approx += p[i * R + j] * q[c * R + j];
                    e[i * M + c] = mine[i * M + c] - approx;
                    MT_CHECK(fabs(g[i * M + c] - approx) < 1e-4 &&
                                 fabs(s.error[i * M + c] - e[i * M + c]) < 1e-4,
                             "%s step %d element (%d, %d): %g (error %g), reference %g (error %g)",
                             comm_name(comms[b]), t, i, c, g[i * M + c], s.error[i * M + c], approx,
                             e[i * M + c]);
                }
            MT_CHECK(floats == (N + M) * R, "floats %lld", (long long)floats);
        }
        free(all);
        rg_psgd_free(&s);
    }
}

static void test_ddp_compresses_the_large_matrix_and_reduces_the_rest_exactly(void) {
    rg_model *net = mlp_new(), *ref = mlp_new(); /* fc1.weight (256, 784) is compressed */
    const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
    rg_ddp *ddp = rg_ddp_new(l, comms[0], &(rg_ddp_opts){.compress_powersgd = true});
    MT_CHECK(ddp, "%s", rg_last_error());
    MT_CHECK(rg_ddp_num_compressed(ddp) == 1, "%d matrices compressed", rg_ddp_num_compressed(ddp));
    rg_scope_begin();
    rg_backward(mlp_loss(net, rank, 0));
    MT_OK(rg_ddp_wait(ddp));
    rg_scope_end();
    rg_scope_begin();
    rg_backward(mlp_loss(ref, rank, 0));
    rg_scope_end();
    int64_t full = 0, sent_floats = 0;
    for (int i = 0; i < l->n; i++) {
        const rg_tensor *g = l->items[i].tensor->grad, *gr = lr->items[i].tensor->grad;
        if (!g) continue;
        full += g->numel;
        bool big = g->numel >= RG_PSGD_MIN_NUMEL;
        double *want = mean_over_ranks(comms[0], gr->data, gr->numel, NULL);
        double err = 0, norm = 0;
        for (int64_t k = 0; k < g->numel; k++) {
            err += fabs(((float *)g->data)[k] - want[k]);
            norm += fabs(want[k]);
        }
        if (big) { /* an approximation: close to the average, but not equal */
            MT_CHECK(err > 1e-6 * norm && err < norm, "%s: |error| %g of %g", l->items[i].name, err,
                     norm);
            sent_floats += (g->shape[0] + g->numel / g->shape[0]) * 4;
        } else {
            MT_CHECK(err <= 1e-5 * (norm + 1e-6), "%s: exact part off by %g", l->items[i].name,
                     err);
            sent_floats += g->numel;
        }
        free(want);
    }
    MT_CHECK(rg_ddp_bytes_per_step(ddp) == 4 * sent_floats, "bytes %lld, want %lld",
             (long long)rg_ddp_bytes_per_step(ddp), (long long)(4 * sent_floats));
    MT_CHECK(rg_ddp_bytes_per_step(ddp) * 4 < 4 * full, "PowerSGD did not cut the bytes 4-fold");
    rg_ddp_free(ddp);
    rg_model_free(net);
    rg_model_free(ref);
}

int main(int argc, char **argv) {
    dist = ddp_test_begin(&argc, &argv, comms, &rank, &size);
    MT_RUN(test_rounds_match_the_reference_over_ranks);
    MT_RUN(test_ddp_compresses_the_large_matrix_and_reduces_the_rest_exactly);
    return ddp_test_end(dist, comms);
}
