/* The DDP reducer's modes and failure cases, on both host backends (mpi, ring), each against an
 * allgather-based reference (mpi_ddp.h): gradient accumulation (no communication until the K-th
 * backward, which reduces the sum), float16 compression within its error bound, the no_overlap
 * baseline, the deferred average (sums, with 1/N folded into the optimizer), parameters unused on some or all ranks (zeros, no hang), a model or set-up that
 * differs on one rank (RG_EMISMATCH naming the difference on every rank, no hang, the
 * communicator still usable), and rg_ddp_free giving back ordinary gradients. */
#include "mpi_ddp.h"

static rg_dist *dist;
static rg_comm *comms[2]; /* mpi, ring */
static int rank, size;

/* One step of the MLP: net under DDP (backward and wait), then ref alone, each in its own scope
 * (a backward fires the hooks of every parameter its scope used). */
RG_NODISCARD static rg_status mlp_step(rg_model *net, rg_ddp *ddp, rg_model *ref, int step) {
    rg_scope_begin();
    rg_backward(mlp_loss(net, rank, step));
    rg_status st = rg_ddp_wait(ddp);
    rg_scope_end();
    rg_scope_begin();
    rg_backward(mlp_loss(ref, rank, step));
    rg_scope_end();
    return st;
}

/* ---- accumulation ---- */

static void test_accumulation_reduces_the_sum_on_the_kth_backward_only(void) {
    const int k = 3;
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        rg_ddp *ddp =
            rg_ddp_new(l, comms[b],
                       &(rg_ddp_opts){.accum_steps = k, .first_bucket_mb = 0.1, .bucket_mb = 0.5});
        MT_CHECK(ddp, "%s", rg_last_error());
        int64_t n = trainable_numel(l);
        for (int step = 0; step < 2 * k; step++) {
            bool sync = step % k == k - 1;
            MT_CHECK(rg_ddp_will_sync(ddp) == sync, "step %d: will_sync %d", step, !sync);
            rg_scope_begin();
            rg_backward(mlp_loss(net, rank, step));
            MT_CHECK(rg_ddp_num_launched(ddp) == (sync ? rg_ddp_num_buckets(ddp) : 0),
                     "step %d: %d buckets launched during backward", step,
                     rg_ddp_num_launched(ddp));
            MT_OK(rg_ddp_wait(ddp));
            rg_scope_end();
            rg_scope_begin();
            rg_backward(mlp_loss(ref, rank, step));
            rg_scope_end();
            if (sync) {
                check_average("the accumulated gradients", l, lr, comms[b], 1e-5);
                zero_grads(l);
                zero_grads(lr);
                continue;
            }
            /* nothing sent: this rank's own running sum, bit for bit */
            float *got = flat_grads(l), *local = flat_grads(lr);
            MT_CHECK(memcmp(got, local, (size_t)n * sizeof *got) == 0,
                     "step %d: an accumulating step changed the local gradients", step);
            free(got);
            free(local);
        }
        rg_ddp_free(ddp);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

/* ---- float16 compression ---- */

static void test_fp16_compression_stays_within_its_error_bound(void) {
    /* Each float16 rounding is within u = 2^-11 relative (plus 2^-25 absolute among the
     * subnormals). The inputs, up to size - 1 partial sums (each at most the sum of |g_r|) and
     * the final 1/size scale are rounded: |error of the mean| <= (size + 1) u mean_r |g_r| +
     * (2 size + 1) 2^-25. */
    const double u = 1.0 / 2048, sub = 1.0 / 33554432;
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        rg_ddp *ddp = rg_ddp_new(
            l, comms[b],
            &(rg_ddp_opts){.compress_fp16 = true, .first_bucket_mb = 0.1, .bucket_mb = 0.5});
        MT_CHECK(ddp, "%s", rg_last_error());
        for (int step = 0; step < 2; step++) {
            MT_OK(mlp_step(net, ddp, ref, step));
            int64_t n = trainable_numel(l), inexact = 0;
            float *got = flat_grads(l), *local = flat_grads(lr);
            double *mean_abs, *want = mean_over_ranks(comms[b], local, n, &mean_abs);
            for (int64_t i = 0; i < n; i++) {
                double err = fabs(got[i] - want[i]);
                MT_CHECK(err <= (size + 1) * u * mean_abs[i] + (2 * size + 1) * sub,
                         "fp16 on %s: element %lld is %.9g, want %.9g (mean |g| %.3g)",
                         comm_name(comms[b]), (long long)i, got[i], want[i], mean_abs[i]);
                inexact += err > 1e-6 * fabs(want[i]);
            }
            MT_CHECK(inexact > n / 4, "only %lld of %lld elements were rounded: not compressed?",
                     (long long)inexact, (long long)n);
            free(got), free(local), free(want), free(mean_abs);
            zero_grads(l);
            zero_grads(lr);
        }
        rg_ddp_free(ddp);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

/* ---- no overlap ---- */

static void test_no_overlap_sends_one_bucket_after_backward_with_the_same_result(void) {
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        rg_ddp *ddp = rg_ddp_new(l, comms[b], &(rg_ddp_opts){.no_overlap = true, .bucket_mb = 0.1});
        MT_CHECK(ddp, "%s", rg_last_error());
        MT_CHECK(rg_ddp_num_buckets(ddp) == 1 &&
                     rg_ddp_bucket_bytes(ddp, 0) == (size_t)trainable_numel(l) * sizeof(float),
                 "one bucket of every gradient");
        for (int step = 0; step < 2; step++) {
            rg_scope_begin();
            rg_backward(mlp_loss(net, rank, step));
            MT_CHECK(rg_ddp_num_launched(ddp) == 0, "no_overlap launched during backward");
            MT_OK(rg_ddp_wait(ddp));
            rg_scope_end();
            rg_scope_begin();
            rg_backward(mlp_loss(ref, rank, step));
            rg_scope_end();
            MT_CHECK(rg_ddp_launched_during_backward(ddp) == 0, "overlap reported");
            check_average("no_overlap gradients", l, lr, comms[b], 1e-5);
            zero_grads(l);
            zero_grads(lr);
        }
        rg_ddp_free(ddp);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

/* ---- deferred average: the buckets hold the sum, the optimizer applies 1/N ---- */

static void test_defer_average_leaves_the_sum_and_a_scale_of_one_over_n(void) {
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        rg_ddp *ddp = rg_ddp_new(l, comms[b], &(rg_ddp_opts){.first_bucket_mb = 0.1,
                                                              .bucket_mb = 0.5,
                                                              .defer_average = true});
        MT_CHECK(ddp, "%s", rg_last_error());
        MT_CHECK(rg_ddp_grad_scale(ddp) == 1.0f / (float)size, "scale %g, want 1/%d",
                 (double)rg_ddp_grad_scale(ddp), size);
        MT_OK(mlp_step(net, ddp, ref, 0));
        int64_t n = trainable_numel(l);
        float *got = flat_grads(l), *local = flat_grads(lr);
        double *mean = mean_over_ranks(comms[b], local, n, NULL);
        for (int64_t i = 0; i < n; i++) mean[i] *= size; /* the sum */
        check_close("defer_average: the sum", got, mean, n, 1e-5, 1e-7);
        free(got), free(local), free(mean);
        /* an SGD step with the scale folded in lands where one on the average lands */
        rg_optim *opt = rg_sgd_new(l, &(rg_sgd_opts){.lr = 0.5f});
        rg_optim_set_grad_scale(opt, rg_ddp_grad_scale(ddp));
        rg_optim *opt_ref = rg_sgd_new(lr, &(rg_sgd_opts){.lr = 0.5f});
        for (int i = 0; i < lr->n; i++) { /* ref: the mean gradient, by allgather */
            rg_tensor *g = lr->items[i].tensor->grad;
            if (!g) continue;
            double *m = mean_over_ranks(comms[b], g->data, g->numel, NULL);
            for (int64_t j = 0; j < g->numel; j++) ((float *)g->data)[j] = (float)m[j];
            free(m);
        }
        rg_optim_step(opt);
        rg_optim_step(opt_ref);
        float *w = calloc((size_t)n, sizeof *w);
        double *w_ref = calloc((size_t)n, sizeof *w_ref);
        for (int i = 0, k = 0; i < l->n; i++) {
            const rg_tensor *t = l->items[i].tensor, *tr = lr->items[i].tensor;
            if (l->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
            for (int64_t j = 0; j < t->numel; j++, k++)
                w[k] = ((float *)t->data)[j], w_ref[k] = ((float *)tr->data)[j];
        }
        check_close("defer_average: SGD step with the folded 1/N", w, w_ref, n, 1e-5, 1e-6);
        free(w), free(w_ref);
        rg_optim_free(opt), rg_optim_free(opt_ref);
        rg_ddp_free(ddp);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

/* ---- unused parameters ---- */

static void test_unused_parameters_contribute_zeros_without_a_hang(void) {
    /* Buckets of 200 floats, in reverse order [p4 p3] [p2 p1] [p0]. p1 is used by no rank, p3 by
     * every rank but rank 1: bucket 1 never fills during backward, nor bucket 0 on rank 1. */
    const int64_t sizes[5] = {100, 100, 100, 100, 100};
    int order[5], n_used = 0;
    for (int i = 0; i < 5; i++)
        if (i != 1 && !(i == 3 && rank == 1)) order[n_used++] = i;
    double mb = 800.0 / 1048576;
    for (int b = 0; b < 2; b++) {
        toy t, ref;
        toy_init(&t, 5, sizes, 0.5f);
        toy_init(&ref, 5, sizes, 0.5f);
        rg_ddp *ddp =
            rg_ddp_new(&t.list, comms[b], &(rg_ddp_opts){.first_bucket_mb = mb, .bucket_mb = mb});
        MT_CHECK(ddp && rg_ddp_num_buckets(ddp) == 3, "%s", rg_last_error());
        for (int step = 0; step < 3; step++) {
            rg_scope_begin();
            rg_backward(toy_loss(&t, order, n_used, rank, step));
            MT_OK(rg_ddp_wait(ddp));
            rg_scope_end();
            rg_scope_begin();
            rg_backward(toy_loss(&ref, order, n_used, rank, step));
            rg_scope_end();
            MT_CHECK(rg_ddp_launched_during_backward(ddp) == (rank == 1 ? 0 : 1),
                     "%d buckets launched during backward", rg_ddp_launched_during_backward(ddp));
            check_average("gradients with unused parameters", &t.list, &ref.list, comms[b], 1e-6);
            const float *g1 = rg_tensor_f32(t.items[1].tensor->grad);
            for (int j = 0; j < 100; j++) MT_CHECK(g1[j] == 0, "p1 (unused): %g", g1[j]);
            zero_grads(&t.list);
            zero_grads(&ref.list);
        }
        rg_ddp_free(ddp);
        toy_deinit(&t);
        toy_deinit(&ref);
    }
}

/* ---- mismatches ---- */

typedef enum {
    MM_SHAPE,
    MM_NAME,
    MM_EXTRA,
    MM_FROZEN,
    MM_BUFFER,
    MM_BUCKETS,
    MM_ACCUM,
    MM_FP16,
    MM_COUNT
} mismatch;

/* What every rank's message must say for each case. */
#define MM_MODEL "the model on rank 1 differs from rank 0's at tensor "
#define MM_SETUP "rank 1 sets up DDP differently from rank 0"
static const char *const mm_expect[][2] = {
    {MM_MODEL "2",
     "rank 0 has p2.weight float32 (300) parameter, rank 1 has p2.weight float32 (301) parameter"},
    {MM_MODEL "2",
     "rank 0 has p2.weight float32 (300) parameter, rank 1 has q2.weight float32 (300) parameter"},
    {MM_MODEL "4",
     "rank 0 has nothing (4 tensors in all), rank 1 has p4.weight float32 (10) parameter"},
    {MM_MODEL "2",
     "rank 0 has p2.weight float32 (300) parameter, rank 1 has p2.weight float32 (300) frozen"},
    {MM_MODEL "2",
     "rank 0 has p2.weight float32 (300) parameter, rank 1 has p2.weight float32 (300) buffer"},
    {MM_SETUP, "rank 1 has 2 bucket(s)"}, /* caps of 262 floats: [200 300] [50 100] */
    {MM_SETUP, "rank 1 has 1 bucket(s), accum_steps 2, fp16 off, overlap on"},
    {MM_SETUP, "rank 1 has 1 bucket(s), accum_steps 1, fp16 on, overlap on"},
};
_Static_assert(sizeof mm_expect / sizeof *mm_expect == MM_COUNT, "a message per case");

static void test_a_mismatch_on_one_rank_is_an_error_on_every_rank(void) {
    const int64_t sizes[5] = {100, 50, 300, 200, 10};
    for (int b = 0; b < 2; b++)
        for (int m = 0; m < MM_COUNT; m++) {
            toy t;
            int64_t mine[5];
            memcpy(mine, sizes, sizeof mine);
            if (rank == 1 && m == MM_SHAPE) mine[2] = 301;
            toy_init(&t, m == MM_EXTRA && rank != 1 ? 4 : 5, mine, (float)rank);
            rg_ddp_opts o = {0};
            if (rank == 1) {
                if (m == MM_NAME) memcpy(t.names[2], "q2", 2);
                if (m == MM_FROZEN || m == MM_BUFFER)
                    rg_tensor_set_requires_grad(t.items[2].tensor, false);
                t.items[2].is_buffer = m == MM_BUFFER;
                o = (rg_ddp_opts){.bucket_mb = m == MM_BUCKETS ? 1e-3 : 0,
                                  .accum_steps = m == MM_ACCUM ? 2 : 1,
                                  .compress_fp16 = m == MM_FP16};
            }
            if (m >= MM_BUCKETS) t.list.n = 4; /* the same model everywhere */
            float before = rg_tensor_f32(t.items[0].tensor)[0];
            rg_ddp *ddp = rg_ddp_new(&t.list, comms[b], &o);
            MT_CHECK(!ddp, "case %d on %s: rg_ddp_new succeeded", m, comm_name(comms[b]));
            MT_CHECK(rg_last_status() == RG_EMISMATCH, "case %d: rg_last_status() is %s", m,
                     rg_status_name(rg_last_status()));
            const char *e = rg_last_error();
            for (int q = 0; q < 2; q++)
                MT_CHECK(strstr(e, mm_expect[m][q]),
                         "case %d on %s: the message \"%s\" lacks \"%s\"", m, comm_name(comms[b]),
                         e, mm_expect[m][q]);
            for (int i = 0; i < t.list.n; i++)
                MT_CHECK(!t.items[i].tensor->grad, "case %d: a gradient was made", m);
            MT_CHECK(rg_tensor_f32(t.items[0].tensor)[0] == before, "case %d: parameters changed",
                     m);
            float x = 1; /* the communicator still works */
            MT_OK(rg_comm_allreduce(comms[b], &x, 1, RG_COMM_F32, RG_REDUCE_SUM));
            MT_CHECK(x == size, "allreduce after the mismatch: %g", x);
            t.list.n = m == MM_EXTRA && rank != 1 ? 4 : 5;
            toy_deinit(&t);
        }
}

/* ---- rg_ddp_free ---- */

static void test_free_restores_ordinary_gradients(void) {
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        rg_ddp *ddp =
            rg_ddp_new(l, comms[b], &(rg_ddp_opts){.first_bucket_mb = 0.1, .bucket_mb = 0.5});
        MT_CHECK(ddp, "%s", rg_last_error());
        MT_OK(mlp_step(net, ddp, ref, 0));
        int64_t n = trainable_numel(l);
        float *reduced = flat_grads(l);
        rg_ddp_free(ddp);
        for (int i = 0; i < l->n; i++)
            MT_CHECK(l->items[i].tensor->grad->flags & RG_TENSOR_OWNS_DATA,
                     "%s: still a view after rg_ddp_free", l->items[i].name);
        float *kept = flat_grads(l);
        MT_CHECK(memcmp(kept, reduced, (size_t)n * sizeof *kept) == 0, "the values changed");
        /* No hooks left: a backward now only adds this rank's own gradient. */
        zero_grads(lr);
        rg_scope_begin();
        rg_backward(mlp_loss(net, rank, 1));
        rg_backward(mlp_loss(ref, rank, 1));
        rg_scope_end();
        float *after = flat_grads(l), *local = flat_grads(lr);
        for (int64_t i = 0; i < n; i++)
            MT_CHECK(fabsf(after[i] - (reduced[i] + local[i])) <= 1e-6f * (1 + fabsf(local[i])),
                     "element %lld: %g, want %g + %g", (long long)i, after[i], reduced[i],
                     local[i]);
        free(reduced), free(kept), free(after), free(local);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

int main(int argc, char **argv) {
    dist = ddp_test_begin(&argc, &argv, comms, &rank, &size);

    MT_RUN(test_accumulation_reduces_the_sum_on_the_kth_backward_only);
    MT_RUN(test_fp16_compression_stays_within_its_error_bound);
    MT_RUN(test_no_overlap_sends_one_bucket_after_backward_with_the_same_result);
    MT_RUN(test_defer_average_leaves_the_sum_and_a_scale_of_one_over_n);
    MT_RUN(test_unused_parameters_contribute_zeros_without_a_hang);
    MT_RUN(test_a_mismatch_on_one_rank_is_an_error_on_every_rank);
    MT_RUN(test_free_restores_ordinary_gradients);

    return ddp_test_end(dist, comms);
}
