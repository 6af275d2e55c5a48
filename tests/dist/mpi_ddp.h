/* mpi_ddp.h — helpers shared by the DDP reducer's MPI tests (mpi_ddp.c, mpi_ddp_modes.c).
 *
 * Every check of a reduced gradient compares it with an independent reference: a second copy of
 * the model, trained without DDP, gives this rank's local gradient; an allgather of those local
 * gradients, averaged in double on every rank, is what DDP must have produced. Two models serve:
 *   - a toy: 1-D parameters of chosen sizes (to steer the bucket plan), loss
 *     sum_k sum(p_k * p_k * x_k) over the parameters in a chosen order of use, with x_k depending
 *     on the rank, so d loss / d p_k = 2 p_k x_k differs between ranks;
 *   - the bundled MLP with cross-entropy on rank-dependent random images (dropout off). */
#ifndef RG_MPI_DDP_H
#define RG_MPI_DDP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "ringgrad.h"

#define TOY_MAX 16

typedef struct {
    rg_param_list list;
    rg_named_tensor items[TOY_MAX];
    char names[TOY_MAX][24];
} toy;

/* n trainable 1-D parameters "p<i>.weight" of numel[i] elements, value sin(0.1 j + i) + salt. */
static inline void toy_init(toy *t, int n, const int64_t *numel, float salt) {
    MT_CHECK(n <= TOY_MAX, "toy of %d parameters", n);
    memset(t, 0, sizeof *t);
    t->list = (rg_param_list){.items = t->items, .n = n};
    for (int i = 0; i < n; i++) {
        snprintf(t->names[i], sizeof t->names[i], "p%d.weight", i);
        rg_tensor *p = rg_tensor_new(RG_F32, 1, &numel[i], RG_CPU);
        MT_CHECK(p, "%s", rg_last_error());
        float *v = rg_tensor_f32(p);
        for (int64_t j = 0; j < numel[i]; j++) v[j] = sinf(0.1f * (float)j + (float)i) + salt;
        rg_tensor_set_requires_grad(p, true);
        t->items[i] = (rg_named_tensor){.name = t->names[i], .tensor = p};
    }
}

static inline void toy_deinit(toy *t) {
    for (int i = 0; i < t->list.n; i++) rg_tensor_free(t->items[i].tensor);
}

/* This rank's loss over the parameters order[0..n_used) in that order of use (in the current
 * scope). Gradient-ready hooks fire in reverse order of use. */
static inline rg_tensor *toy_loss(toy *t, const int *order, int n_used, int rank, int step) {
    rg_tensor *loss = NULL;
    for (int k = 0; k < n_used; k++) {
        rg_tensor *p = t->items[order[k]].tensor;
        rg_tensor *x = rg_tensor_empty(RG_F32, p->ndim, p->shape, RG_CPU);
        float *xv = rg_tensor_f32(x);
        for (int64_t j = 0; j < p->numel; j++)
            xv[j] = cosf(0.37f * (float)j + 1.3f * (float)order[k] + 2.1f * (float)rank +
                         0.7f * (float)step);
        rg_tensor *term = rg_sum(rg_mul(rg_mul(p, p), x));
        loss = loss ? rg_add(loss, term) : term;
    }
    return loss;
}

/* The bundled MLP with dropout off, so that two copies with one seed compute the same thing. */
static inline rg_model *mlp_new(void) {
    rg_model *m = rg_model_mlp(7);
    MT_CHECK(m, "%s", rg_last_error());
    rg_model_set_dropout(m, 0);
    return m;
}

/* Cross-entropy of the MLP on 4 images and labels that depend on (rank, step). */
static inline rg_tensor *mlp_loss(rg_model *m, int rank, int step) {
    rg_tensor *x = rg_tensor_empty(RG_F32, RG_SHAPE(4, 1, 28, 28), RG_CPU);
    uint64_t off = 0;
    rg_tensor_uniform_(x, 0, 1, 1000 + 100 * (uint64_t)rank + (uint64_t)step, &off);
    rg_tensor *y = rg_tensor_empty(RG_I64, RG_SHAPE(4), RG_CPU);
    int64_t *yv = y->data;
    for (int i = 0; i < 4; i++) yv[i] = (3 * rank + 7 * step + i) % 10;
    return rg_cross_entropy(rg_model_forward(m, x, RG_TRAIN), y);
}

/* Total elements of the trainable tensors of a list. */
static inline int64_t trainable_numel(const rg_param_list *l) {
    int64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (!l->items[i].is_buffer && rg_tensor_requires_grad(l->items[i].tensor))
            n += l->items[i].tensor->numel;
    return n;
}

/* The trainable tensors' gradients concatenated in registration order (zeros for none).
 * Returns a malloc'ed array of trainable_numel(l) floats. */
static inline float *flat_grads(const rg_param_list *l) {
    float *out = calloc((size_t)trainable_numel(l) + 1, sizeof *out), *o = out;
    for (int i = 0; i < l->n; i++) {
        const rg_tensor *t = l->items[i].tensor;
        if (l->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        if (t->grad) rg_tensor_copy_to_host(t->grad, o);
        o += t->numel;
    }
    return out;
}

/* The mean over the ranks of each rank's local[0..n), through an allgather; also the mean of
 * the absolute values (for error bounds) when mean_abs is not NULL. Collective. */
static inline double *mean_over_ranks(rg_comm *c, const float *local, int64_t n,
                                      double **mean_abs) {
    int size = rg_comm_size(c);
    float *all = malloc(((size_t)n * size + 1) * sizeof *all);
    double *mean = calloc((size_t)n + 1, sizeof *mean),
           *abs_mean = calloc((size_t)n + 1, sizeof *abs_mean);
    MT_OK(rg_comm_allgather(c, local, all, n, RG_COMM_F32));
    for (int r = 0; r < size; r++)
        for (int64_t i = 0; i < n; i++) {
            mean[i] += (double)all[(size_t)r * n + i] / size;
            abs_mean[i] += fabs((double)all[(size_t)r * n + i]) / size;
        }
    free(all);
    if (mean_abs)
        *mean_abs = abs_mean;
    else
        free(abs_mean);
    return mean;
}

/* Checks got[i] against want[i] within atol + rtol |want[i]|; names the first bad element. */
static inline void check_close(const char *what, const float *got, const double *want, int64_t n,
                               double rtol, double atol) {
    for (int64_t i = 0; i < n; i++)
        MT_CHECK(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]),
                 "%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
}

/* Zeroes every gradient of a list (as rg_optim_zero_grad). */
static inline void zero_grads(const rg_param_list *l) {
    for (int i = 0; i < l->n; i++) rg_zero_grad(l->items[i].tensor);
}

/* "mpi" or "ring". */
static inline const char *comm_name(rg_comm *c) {
    return rg_comm_backend_name(rg_comm_kind(c));
}

/* Checks every trainable gradient of `net` against the mean over the ranks of `ref`'s (each
 * rank's local gradients), within rtol (and 1e-7 absolute). Collective. */
static inline void check_average(const char *what, const rg_param_list *net,
                                 const rg_param_list *ref, rg_comm *c, double rtol) {
    int64_t n = trainable_numel(net);
    float *got = flat_grads(net), *local = flat_grads(ref);
    double *want = mean_over_ranks(c, local, n, NULL);
    char msg[160];
    snprintf(msg, sizeof msg, "%s on %s with %d ranks", what, comm_name(c), rg_comm_size(c));
    check_close(msg, got, want, n, rtol, 1e-7);
    free(got);
    free(local);
    free(want);
}

/* A test program's start: the world (at least 2 ranks) and a communicator on each host backend,
 * comms[0] mpi and comms[1] ring. */
static inline rg_dist *ddp_test_begin(int *argc, char ***argv, rg_comm **comms, int *rank,
                                      int *size) {
    rg_dist *d = rg_dist_init(argc, argv);
    MT_CHECK(d, "rg_dist_init: %s", rg_last_error());
    *rank = rg_dist_rank(d), *size = rg_dist_size(d);
    MT_CHECK(*size >= 2, "run me under mpirun -np 2 or more");
    MT_OK(rg_comm_new(d, RG_COMM_MPI, &comms[0]));
    MT_OK(rg_comm_new(d, RG_COMM_RING, &comms[1]));
    return d;
}

/* Its end: frees what ddp_test_begin made; returns main's exit code. */
static inline int ddp_test_end(rg_dist *d, rg_comm **comms) {
    rg_comm_free(comms[0]);
    rg_comm_free(comms[1]);
    MT_OK(rg_dist_finalize(d));
    return mt_report();
}

#endif
