/* mpi_pipeline.c — the GPipe pipeline (dist/pipeline.c) under -np 2 (2 stages) and -np 3
 * (3 stages): after a few SGD steps with momentum, each stage's weights equal those of the same
 * model trained on one process on the whole batch; the loss and accuracy it reports equal the
 * reference's; the stages' weights and optimizer state gathered on rank 0 are the reference's,
 * and scatter back exactly; the automatic split balances the parameters; a bad split is an
 * error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "ringgrad.h"

static rg_dist *dist;
static int rank, size;

/* A batch of B random images (deterministic in step) and labels. x: (B,1,28,28), y: (B). */
static void make_batch(int64_t B, int step, rg_tensor **x, rg_tensor **y) {
    *x = rg_tensor_empty(RG_F32, 4, (int64_t[]){B, 1, 28, 28}, RG_CPU);
    *y = rg_tensor_empty(RG_I64, 1, (int64_t[]){B}, RG_CPU);
    float *xv = rg_tensor_f32(*x);
    int64_t *yv = (*y)->data;
    for (int64_t i = 0; i < (*x)->numel; i++) xv[i] = sinf(0.013f * (float)i + (float)step);
    for (int64_t i = 0; i < B; i++) yv[i] = (i * 7 + step) % 10;
}

static rg_model *model_new(const char *name) {
    rg_model *m = rg_model_new_by_name(name, 11);
    MT_CHECK(m, "%s", rg_last_error());
    rg_model_set_dropout(m, 0);
    return m;
}

static const rg_sgd_opts sgd = {.lr = 0.05f, .momentum = 0.9f};

static void check_close(const char *what, const rg_tensor *a, const rg_tensor *b, float tol) {
    MT_CHECK(a->numel == b->numel && a->dtype == b->dtype, "%s: shapes differ", what);
    for (int64_t j = 0; j < a->numel; j++) {
        double x = a->dtype == RG_F32 ? rg_tensor_f32(a)[j] : (double)((int64_t *)a->data)[j];
        double y = b->dtype == RG_F32 ? rg_tensor_f32(b)[j] : (double)((int64_t *)b->data)[j];
        MT_CHECK(fabs(x - y) <= tol * (1 + fabs(y)), "%s[%lld]: %.8f, want %.8f", what,
                 (long long)j, x, y);
    }
}

/* Checkpoints: rg_pipeline_gather and _gather_state put on rank 0 the model and optimizer state
 * that one process trained (weights and momentum within the tolerance, step counts exactly);
 * rg_pipeline_scatter_state hands every stage's fresh optimizer exactly the state it had. */
static void check_gathered_state(rg_pipeline *p, rg_model *net, rg_optim *opt, rg_model *ref,
                                 rg_optim *ref_opt) {
    rg_optim *full = rank == 0 ? rg_sgd_new(rg_model_params(net), &sgd) : NULL;
    MT_OK(rg_pipeline_gather(p));
    MT_OK(rg_pipeline_gather_state(p, opt, full));
    if (rank == 0) {
        const rg_param_list *w = rg_model_params(net), *st = rg_optim_state(full);
        for (int i = 0; i < w->n; i++)
            check_close(w->items[i].name, w->items[i].tensor,
                        rg_param_list_find(rg_model_params(ref), w->items[i].name)->tensor, 1e-4f);
        MT_CHECK(st->n == rg_optim_state(ref_opt)->n, "%d state entries, want %d", st->n,
                 rg_optim_state(ref_opt)->n);
        for (int i = 0; i < st->n; i++) {
            const rg_named_tensor *want =
                rg_param_list_find(rg_optim_state(ref_opt), st->items[i].name);
            MT_CHECK(want, "%s: not in one process's optimizer", st->items[i].name);
            check_close(st->items[i].name, st->items[i].tensor, want->tensor,
                        st->items[i].tensor->dtype == RG_F32 ? 1e-4f : 0.0f);
        }
    }
    rg_optim *fresh = rg_sgd_new(rg_pipeline_params(p), &sgd);
    rg_optim_set_lr(fresh, 1.0f); /* the scatter brings the full optimizer's rate */
    MT_OK(rg_pipeline_scatter_state(p, fresh, full));
    const rg_param_list *a = rg_optim_state(fresh), *b = rg_optim_state(opt);
    MT_CHECK(a->n == b->n && a->n > 1, "%d state entries after the scatter, want %d", a->n, b->n);
    for (int i = 0; i < a->n; i++)
        check_close(a->items[i].name, a->items[i].tensor, b->items[i].tensor, 0.0f);
    MT_CHECK(rg_optim_num_steps(fresh) == 3 && rg_optim_get_lr(fresh) == sgd.lr,
             "after the scatter: %lld steps at lr %g", (long long)rg_optim_num_steps(fresh),
             (double)rg_optim_get_lr(fresh));
    rg_optim_free(fresh);
    rg_optim_free(full);
}

/* Trains `name` for 3 steps of batch B in M micro-batches on the pipeline over `comm`, and the
 * same model on this process alone; compares this stage's weights and every step's loss. */
static void check_equal(rg_comm *comm, const char *name, int64_t B, int M, const int *split) {
    rg_model *net = model_new(name), *ref = model_new(name);
    rg_pipeline_opts o = {.micro_batches = M};
    for (int s = 0; split && s < size - 1; s++) o.split[s] = split[s];
    rg_pipeline *p = rg_pipeline_new(rg_model_root(net), comm, &o);
    MT_CHECK(p, "%s", rg_last_error());
    MT_CHECK(rg_pipeline_stage(p) == rank && rg_pipeline_stages(p) == size, "stage %d of %d",
             rg_pipeline_stage(p), rg_pipeline_stages(p));
    rg_optim *opt = rg_sgd_new(rg_pipeline_params(p), &sgd);
    rg_optim *ref_opt = rg_sgd_new(rg_model_params(ref), &sgd);
    for (int step = 0; step < 3; step++) {
        rg_scope_begin();
        rg_tensor *x, *y;
        make_batch(B, step, &x, &y);
        rg_pipeline_result r;
        MT_OK(rg_pipeline_step(p, x, y, RG_TRAIN, &r));
        rg_optim_step(opt);
        rg_optim_zero_grad(opt);
        rg_tensor *logits = rg_model_forward(ref, x, RG_TRAIN);
        rg_tensor *loss = rg_cross_entropy(logits, y);
        float want = rg_tensor_item(loss);
        rg_backward(loss);
        rg_optim_step(ref_opt);
        rg_optim_zero_grad(ref_opt);
        MT_CHECK(fabsf(r.loss - want) <= 1e-5f * (1 + fabsf(want)),
                 "%s M=%d step %d: pipeline loss %.7f, one process %.7f", name, M, step, r.loss,
                 want);
        rg_scope_end();
    }
    /* this stage's weights against the reference's of the same name */
    const rg_param_list *mine = rg_pipeline_params(p);
    MT_CHECK(mine->n > 0, "stage %d holds no parameters", rank);
    for (int i = 0; i < mine->n; i++) {
        const rg_named_tensor *want = rg_param_list_find(rg_model_params(ref), mine->items[i].name);
        MT_CHECK(want, "%s: not in the reference", mine->items[i].name);
        const float *a = rg_tensor_f32(mine->items[i].tensor), *b = rg_tensor_f32(want->tensor);
        for (int64_t j = 0; j < want->tensor->numel; j++)
            MT_CHECK(fabsf(a[j] - b[j]) <= 1e-5f + 1e-4f * fabsf(b[j]),
                     "%s M=%d: %s[%lld] = %.8f on stage %d, %.8f on one process", name, M,
                     mine->items[i].name, (long long)j, a[j], rank, b[j]);
    }
    check_gathered_state(p, net, opt, ref, ref_opt);
    /* evaluation through the pipeline: the reference's accuracy on a fresh batch */
    rg_scope_begin();
    rg_tensor *x, *y;
    make_batch(B, 9, &x, &y);
    rg_pipeline_result r;
    MT_OK(rg_pipeline_step(p, x, y, RG_EVAL, &r));
    rg_no_grad_begin();
    rg_tensor *pred = rg_argmax(rg_model_forward(ref, x, RG_EVAL));
    rg_no_grad_end();
    int64_t correct = 0;
    for (int64_t i = 0; i < B; i++)
        correct += ((int64_t *)pred->data)[i] == ((int64_t *)y->data)[i];
    MT_CHECK(r.correct == correct, "eval: %lld correct through the pipeline, %lld on one process",
             (long long)r.correct, (long long)correct);
    rg_scope_end();
    rg_optim_free(opt);
    rg_optim_free(ref_opt);
    rg_pipeline_free(p);
    rg_model_free(net);
    rg_model_free(ref);
}

static rg_comm *comm_of(rg_comm_backend b) {
    rg_comm *c;
    MT_OK(rg_comm_new(dist, b, &c));
    return c;
}

static void test_cnn_weights_equal_one_process_m1_m4(void) {
    rg_comm *c = comm_of(RG_COMM_MPI);
    check_equal(c, "cnn", 8, 1, NULL);
    check_equal(c, "cnn", 8, 4, NULL);
    rg_comm_free(c);
}

static void test_mlp_uneven_micro_batches_on_the_ring_comm(void) {
    rg_comm *c = comm_of(RG_COMM_RING); /* its send/recv are MPI's */
    check_equal(c, "mlp", 10, 3, NULL); /* micro-batches of 4, 3, 3 */
    int split[2] = {2, 5};              /* explicit: flatten fc1 | relu1.. (| relu2 fc3) */
    check_equal(c, "mlp", 10, 2, split);
    rg_comm_free(c);
}

/* An epoch's last batch may hold fewer images than --micro-batches: it runs as one-image
 * micro-batches (it stopped the job with "batch of 3 images, 3 labels, 4 micro-batches"). */
static void test_a_batch_smaller_than_the_micro_batches_runs_one_image_each(void) {
    rg_comm *c = comm_of(RG_COMM_MPI);
    check_equal(c, "mlp", 3, 4, NULL);
    check_equal(c, "mlp", 1, 4, NULL);
    rg_comm_free(c);
}

static void test_the_split_balances_parameters(void) {
    rg_comm *c = comm_of(RG_COMM_MPI);
    rg_model *net = model_new("cnn");
    rg_pipeline *p = rg_pipeline_new(rg_model_root(net), c, NULL);
    MT_CHECK(p, "%s", rg_last_error());
    char d[512];
    rg_pipeline_describe(p, d, sizeof d);
    if (size == 2) /* the latest of the equally balanced cuts: after flatten */
        MT_CHECK(strcmp(d, "stage 0: conv1..flatten (18816 parameters) | stage 1: fc1..fc2 "
                           "(1181066 parameters)") == 0,
                 "split: %s", d);
    /* fc1 (98% of the parameters) is alone with at most its activation and dropout */
    int s_fc1 = -1;
    for (int s = 0; s < size; s++)
        for (int k = rg_pipeline_first_child(p, s); k < rg_pipeline_first_child(p, s + 1); k++)
            if (strcmp(rg_model_root(net)->children[k]->name, "fc1") == 0) s_fc1 = s;
    MT_CHECK(s_fc1 >= 1, "fc1 on stage %d: %s", s_fc1, d);
    rg_pipeline_free(p);
    rg_pipeline_opts bad = {.split = {0, 0}};
    bad.split[0] = 99;
    MT_CHECK(!rg_pipeline_new(rg_model_root(net), c, &bad), "split 99 accepted");
    MT_CHECK(strstr(rg_last_error(), "split 99"), "message: %s", rg_last_error());
    rg_model_free(net);
    rg_comm_free(c);
}

/* rg_comm_split (data parallelism across pipelines groups the ranks of one stage): ranks of one
 * color form a comm ranked by key, and an allreduce sums over that group only. */
static void test_comm_split_groups_ranks_by_color_and_key(void) {
    for (int b = 0; b < 2; b++) {
        rg_comm *world = comm_of(b ? RG_COMM_RING : RG_COMM_MPI), *g;
        MT_OK(rg_comm_split(world, rank % 2, -rank, &g)); /* reversed order inside a group */
        int n = (size - rank % 2 + 1) / 2;                /* ranks of my parity */
        MT_CHECK(rg_comm_size(g) == n, "group of %d, want %d", rg_comm_size(g), n);
        int below = 0; /* ranks of my parity above me come first */
        for (int r = rank + 2; r < size; r += 2) below++;
        MT_CHECK(rg_comm_rank(g) == below, "rank %d in its group, want %d", rg_comm_rank(g), below);
        int64_t v = rank + 1, want = 0;
        for (int r = rank % 2; r < size; r += 2) want += r + 1;
        MT_OK(rg_comm_allreduce(g, &v, 1, RG_COMM_I64, RG_REDUCE_SUM));
        MT_CHECK(v == want, "group sum %lld, want %lld", (long long)v, (long long)want);
        rg_comm_free(g);
        rg_comm_free(world);
    }
}

int main(int argc, char **argv) {
    dist = rg_dist_init(&argc, &argv);
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    MT_RUN(test_comm_split_groups_ranks_by_color_and_key);
    MT_RUN(test_the_split_balances_parameters);
    MT_RUN(test_cnn_weights_equal_one_process_m1_m4);
    MT_RUN(test_mlp_uneven_micro_batches_on_the_ring_comm);
    MT_RUN(test_a_batch_smaller_than_the_micro_batches_runs_one_image_each);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
