/* The compute-only baseline of the DDP reducer (rg_ddp_opts.no_allreduce, ringgrad-train
 * --no-allreduce, bench/overlap_bench.c): rg_ddp_wait sends no gradient but keeps the ranks in
 * step, so each rank keeps its own gradients; and with the same model the reducer without the
 * flag averages them, so the test can tell the two apart. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

#include "mpitest.h"

static rg_dist *dist;
static rg_comm *comm;
static int rank, size;

/* One step of a one-parameter "model": loss = sum(w * x) with x = rank + 1, so that w.grad is
 * rank + 1 everywhere on this rank. */
static void backward_on(rg_tensor *w) {
    rg_scope_begin();
    rg_tensor *x = rg_tensor_zeros(RG_F32, RG_SHAPE(4), RG_CPU);
    rg_tensor_fill_(x, (float)(rank + 1));
    rg_backward(rg_sum(rg_mul(w, x)));
    rg_scope_end();
}

static rg_tensor *make_param(rg_param_list *list, rg_named_tensor *item) {
    rg_tensor *w = rg_tensor_new(RG_F32, RG_SHAPE(4), RG_CPU);
    rg_tensor_set_requires_grad(w, true);
    *item = (rg_named_tensor){.name = "w", .tensor = w};
    *list = (rg_param_list){item, 1};
    return w;
}

static void expect_grad(const rg_tensor *w, float want, const char *what) {
    const float *g = rg_tensor_f32(w->grad);
    for (int i = 0; i < 4; i++)
        MT_CHECK(g[i] == want, "%s: grad[%d] = %g on rank %d, want %g", what, i, g[i], rank, want);
}

static void test_no_allreduce_keeps_each_ranks_gradient(void) {
    rg_named_tensor item;
    rg_param_list list;
    rg_tensor *w = make_param(&list, &item);
    rg_ddp *ddp = rg_ddp_new(&list, comm, &(rg_ddp_opts){.no_allreduce = true});
    MT_CHECK(ddp, "rg_ddp_new: %s", rg_last_error());
    for (int step = 0; step < 2; step++) {
        backward_on(w);
        MT_CHECK(rg_ddp_num_launched(ddp) == 0, "a bucket was launched during backward");
        MT_OK(rg_ddp_wait(ddp));
        expect_grad(w, (float)(rank + 1), "no_allreduce");
        rg_tensor_zero_(w->grad);
    }
    rg_ddp_free(ddp);
    rg_tensor_free(w);
}

static void test_without_the_flag_gradients_are_averaged(void) {
    rg_named_tensor item;
    rg_param_list list;
    rg_tensor *w = make_param(&list, &item);
    rg_ddp *ddp = rg_ddp_new(&list, comm, NULL);
    MT_CHECK(ddp, "rg_ddp_new: %s", rg_last_error());
    backward_on(w);
    MT_OK(rg_ddp_wait(ddp));
    expect_grad(w, (float)(size + 1) / 2, "default"); /* mean of 1 .. size */
    rg_ddp_free(ddp);
    rg_tensor_free(w);
}

/* rg_ddp_wait is still a barrier: a rank that comes late holds the others back. */
static void test_no_allreduce_wait_keeps_ranks_in_step(void) {
    rg_named_tensor item;
    rg_param_list list;
    rg_tensor *w = make_param(&list, &item);
    rg_ddp *ddp = rg_ddp_new(&list, comm, &(rg_ddp_opts){.no_allreduce = true});
    MT_CHECK(ddp, "rg_ddp_new: %s", rg_last_error());
    backward_on(w);
    if (rank == size - 1) usleep(300 * 1000);
    double t0 = MPI_Wtime();
    MT_OK(rg_ddp_wait(ddp));
    double waited = MPI_Wtime() - t0;
    if (rank == 0) MT_CHECK(waited > 0.2, "rank 0 waited %.3f s for a rank 0.3 s late", waited);
    rg_ddp_free(ddp);
    rg_tensor_free(w);
}

int main(int argc, char **argv) {
    dist = rg_dist_init(&argc, &argv);
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    comm = rg_dist_comm(dist);
    rank = rg_comm_rank(comm), size = rg_comm_size(comm);
    MT_RUN(test_no_allreduce_keeps_each_ranks_gradient);
    MT_RUN(test_without_the_flag_gradients_are_averaged);
    MT_RUN(test_no_allreduce_wait_keeps_ranks_in_step);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
