/* ZeRO-1 (dist/zero1.c) through its C API, on both host backends (mpi, ring): the buckets'
 * reduce-scatters start from the gradient-ready hooks during backward (all of them when every
 * parameter is used, none with no_overlap, the ones before an unused parameter's bucket
 * otherwise), and after each step every rank holds the weights that SGD with momentum gives on
 * the mean of the ranks' gradients (a reference computed here in double from an allgather of
 * each rank's local gradients); the ranks' pieces partition the weights and the optimizer state;
 * ranks that cut their buckets differently fail alike at set-up. The trainer's equivalence,
 * accumulation and resume tests (tests/train) cover the rest. */
#include "mpi_ddp.h"

static rg_dist *dist;
static rg_comm *comms[2]; /* mpi, ring */
static int rank, size;

#define LR 0.1
#define MOMENTUM 0.9
/* Caps of 256 floats for the first bucket and 1024 for the others: in reverse registration order
 * the toy's sizes make 4 buckets, [100 200] [10 600 500] [50 2000] [300 100] (mpi_ddp.c's plan). */
static const int64_t sizes[] = {100, 300, 2000, 50, 500, 600, 10, 200, 100};
#define NP ((int)(sizeof sizes / sizeof *sizes))
#define FIRST_MB (1024.0 / 1048576)
#define CAP_MB (4096.0 / 1048576)

/* Trains a zero1 over a toy and, beside it, a reference in double; `used[i]` says whether
 * parameter i enters the loss. Checks the weights after each of 3 steps and returns how many
 * buckets the last step launched during backward. */
static int train_and_check(rg_comm *c, const rg_zero1_opts *opts, const bool *used) {
    toy t, ref;
    toy_init(&t, NP, sizes, 0.25f);
    toy_init(&ref, NP, sizes, 0.25f);
    int order[NP], n_used = 0;
    for (int i = 0; i < NP; i++)
        if (used[i]) order[n_used++] = i;
    rg_zero1 *z = rg_zero1_new(&t.list, c, "sgd", "lr=0.1,momentum=0.9", opts);
    MT_CHECK(z, "rg_zero1_new: %s", rg_last_error());
    int64_t n = trainable_numel(&t.list);
    double *w = calloc((size_t)n, sizeof *w), *v = calloc((size_t)n, sizeof *v);
    float *got = malloc((size_t)n * sizeof *got);
    for (int i = 0, at = 0; i < NP; at += (int)sizes[i], i++)
        for (int64_t j = 0; j < sizes[i]; j++) w[at + j] = rg_tensor_f32(t.items[i].tensor)[j];
    int launched = -1;
    for (int step = 0; step < 3; step++) {
        rg_scope_begin();
        rg_backward(toy_loss(&t, order, n_used, rank, step));
        MT_OK(rg_zero1_step(z));
        launched = rg_zero1_launched_during_backward(z);
        rg_scope_end();
        /* the reference: this rank's local gradient at the reference weights, then the mean */
        for (int i = 0, at = 0; i < NP; at += (int)sizes[i], i++)
            for (int64_t j = 0; j < sizes[i]; j++)
                rg_tensor_f32(ref.items[i].tensor)[j] = (float)w[at + j];
        zero_grads(&ref.list);
        rg_scope_begin();
        rg_backward(toy_loss(&ref, order, n_used, rank, step));
        rg_scope_end();
        float *local = flat_grads(&ref.list);
        double *g = mean_over_ranks(c, local, n, NULL);
        for (int64_t k = 0; k < n; k++) {
            v[k] = step == 0 ? g[k] : MOMENTUM * v[k] + g[k];
            w[k] -= LR * v[k];
        }
        free(local);
        free(g);
        for (int i = 0, at = 0; i < NP; at += (int)sizes[i], i++)
            for (int64_t j = 0; j < sizes[i]; j++)
                got[at + j] = rg_tensor_f32(t.items[i].tensor)[j];
        char what[96];
        snprintf(what, sizeof what, "weights after step %d on %s with %d ranks", step, comm_name(c),
                 size);
        check_close(what, got, w, n, 1e-5, 1e-6);
        for (int i = 0; i < NP; i++) {
            const float *gv = rg_tensor_f32(t.items[i].tensor->grad);
            for (int64_t j = 0; j < sizes[i]; j++)
                MT_CHECK(gv[j] == 0, "p%d.weight: gradient %g after the step, want 0", i, gv[j]);
        }
    }
    /* the ranks' pieces partition the weights, and so does the momentum */
    int64_t mine = rg_zero1_shard_numel(z), all = mine;
    MT_OK(rg_comm_allreduce(c, &all, 1, RG_COMM_I64, RG_REDUCE_SUM));
    MT_CHECK(all == n, "the ranks' pieces hold %lld of %lld weights", (long long)all, (long long)n);
    MT_CHECK(mine <= n / size + rg_zero1_num_buckets(z),
             "rank %d updates %lld of %lld weights over %d ranks", rank, (long long)mine,
             (long long)n, size);
    MT_CHECK(rg_zero1_state_bytes(z) == (size_t)mine * sizeof(float),
             "momentum of %zu bytes for %lld weights", rg_zero1_state_bytes(z), (long long)mine);
    rg_zero1_free(z);
    for (int i = 0; i < NP; i++)
        MT_CHECK(t.items[i].tensor->grad && (t.items[i].tensor->grad->flags & RG_TENSOR_OWNS_DATA),
                 "p%d.weight: after rg_zero1_free its gradient is not its own", i);
    free(w), free(v), free(got);
    toy_deinit(&t);
    toy_deinit(&ref);
    return launched;
}

static void test_every_bucket_launches_during_backward(void) {
    bool used[NP];
    for (int i = 0; i < NP; i++) used[i] = true;
    for (int b = 0; b < 2; b++) {
        rg_zero1_opts o = {.bucket_mb = CAP_MB, .first_bucket_mb = FIRST_MB};
        int launched = train_and_check(comms[b], &o, used);
        MT_CHECK(launched == 4, "%s: %d of 4 buckets launched during backward", comm_name(comms[b]),
                 launched);
    }
}

static void test_no_overlap_reduces_after_backward(void) {
    bool used[NP];
    for (int i = 0; i < NP; i++) used[i] = true;
    for (int b = 0; b < 2; b++) {
        rg_zero1_opts o = {.bucket_mb = CAP_MB, .first_bucket_mb = FIRST_MB, .no_overlap = true};
        int launched = train_and_check(comms[b], &o, used);
        MT_CHECK(launched == 0, "%s: %d buckets launched during backward with no_overlap",
                 comm_name(comms[b]), launched);
    }
}

/* p3 (50 floats, in bucket 2 of [100 200] [10 600 500] [50 2000] [300 100]) unused: buckets 0 and 1
 * go during backward, 2 never fills, and 3 must wait for it (launches go in index order). */
static void test_an_unused_parameter_holds_back_its_bucket_and_the_later_ones(void) {
    bool used[NP];
    for (int i = 0; i < NP; i++) used[i] = i != 3;
    for (int b = 0; b < 2; b++) {
        rg_zero1_opts o = {.bucket_mb = CAP_MB, .first_bucket_mb = FIRST_MB};
        int launched = train_and_check(comms[b], &o, used);
        MT_CHECK(launched == 2, "%s: %d buckets launched during backward, want 2",
                 comm_name(comms[b]), launched);
    }
}

/* Rank 1 asks for other buckets: rg_zero1_new fails on every rank, naming the cause. */
static void test_other_buckets_on_one_rank_fail_on_every_rank(void) {
    toy t;
    toy_init(&t, NP, sizes, 0.25f);
    rg_zero1_opts o = {.bucket_mb = rank == 1 ? 2 * CAP_MB : CAP_MB, .first_bucket_mb = FIRST_MB};
    rg_zero1 *z = rg_zero1_new(&t.list, comms[0], "sgd", "lr=0.1", &o);
    MT_CHECK(!z, "rank %d: rg_zero1_new succeeded with other buckets on rank 1", rank);
    MT_CHECK(strstr(rg_last_error(), "rank 1 cuts the gradients into other buckets than rank 0"),
             "rank %d: %s", rank, rg_last_error());
    for (int i = 0; i < NP; i++)
        MT_CHECK(!t.items[i].tensor->grad || (t.items[i].tensor->grad->flags & RG_TENSOR_OWNS_DATA),
                 "p%d.weight: its gradient is still a view after a failed set-up", i);
    toy_deinit(&t);
}

int main(int argc, char **argv) {
    dist = ddp_test_begin(&argc, &argv, comms, &rank, &size);
    MT_RUN(test_every_bucket_launches_during_backward);
    MT_RUN(test_no_overlap_reduces_after_backward);
    MT_RUN(test_an_unused_parameter_holds_back_its_bucket_and_the_later_ones);
    MT_RUN(test_other_buckets_on_one_rank_fail_on_every_rank);
    return ddp_test_end(dist, comms);
}
