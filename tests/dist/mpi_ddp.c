/* The DDP reducer's core, on both host backends (mpi, ring): the bucket plan (reverse
 * registration order, the first bucket's and the others' caps, an oversized parameter alone,
 * every parameter exactly once), gradients as views into the buckets, the broadcast from rank 0,
 * the averaged gradients against an allgather-based reference, launches in index order when the
 * buckets fill in another order (and in a different order on each rank), and a bucket launched
 * while backward is still running. Modes (accumulation, fp16, no_overlap, unused parameters,
 * mismatches, rg_ddp_free) are in mpi_ddp_modes.c. */
#include "mpi_ddp.h"

static rg_dist *dist;
static rg_comm *comms[2]; /* mpi, ring */
static int rank, size;

/* ---- the bucket plan ---- */

/* The list indices of the trainable tensors in reverse registration order: DDP's entries. */
static int reverse_entries(const rg_param_list *l, int *rev) {
    int n = 0;
    for (int i = l->n - 1; i >= 0; i--)
        if (!l->items[i].is_buffer && rg_tensor_requires_grad(l->items[i].tensor)) rev[n++] = i;
    return n;
}

/* Reads the plan back through the public counts and the gradients' addresses, and checks it:
 * bucket b holds the next rg_ddp_bucket_params(b) entries in reverse registration order, their
 * gradients lie back to back in one buffer (views, not owned), the buffers are disjoint, each
 * bucket was under its cap before its last parameter (PyTorch's rule: a bucket closes once it
 * reaches its cap), every bucket but the last reached its cap, and every entry is in exactly one
 * bucket. bucket_of[list index] gets
 * the bucket (-1 for tensors DDP does not reduce). */
static void check_plan(rg_ddp *ddp, const rg_param_list *l, double first_mb, double mb,
                       int *bucket_of) {
    int rev[TOY_MAX * 8], n = reverse_entries(l, rev), k = 0;
    int nb = rg_ddp_num_buckets(ddp);
    const char *lo[TOY_MAX * 8], *hi[TOY_MAX * 8];
    for (int i = 0; i < l->n; i++) bucket_of[i] = -1;
    MT_CHECK(nb >= 1 && nb <= n, "%d buckets for %d parameters", nb, n);
    for (int b = 0; b < nb; b++) {
        int np = rg_ddp_bucket_params(ddp, b);
        size_t cap = (size_t)((b == 0 ? first_mb : mb) * 1048576.0), bytes = 0;
        MT_CHECK(np >= 1 && k + np <= n, "bucket %d: %d parameters (%d of %d placed)", b, np, k, n);
        lo[b] = l->items[rev[k]].tensor->grad ? l->items[rev[k]].tensor->grad->data : NULL;
        for (int q = 0; q < np; q++, k++) {
            const rg_tensor *t = l->items[rev[k]].tensor;
            MT_CHECK(t->grad && !(t->grad->flags & RG_TENSOR_OWNS_DATA),
                     "%s: the gradient is not a view", l->items[rev[k]].name);
            MT_CHECK((const char *)t->grad->data == lo[b] + bytes,
                     "%s: gradient at %p, want bucket %d's buffer + %zu bytes (reverse order)",
                     l->items[rev[k]].name, t->grad->data, b, bytes);
            bucket_of[rev[k]] = b;
            bytes += (size_t)t->numel * sizeof(float);
        }
        hi[b] = lo[b] + bytes;
        MT_CHECK(bytes == rg_ddp_bucket_bytes(ddp, b), "bucket %d: %zu bytes, reports %zu", b,
                 bytes, rg_ddp_bucket_bytes(ddp, b));
        size_t last = (size_t)l->items[rev[k - 1]].tensor->numel * sizeof(float);
        MT_CHECK(bytes - last < cap,
                 "bucket %d: already %zu of its cap %zu bytes before its last "
                 "parameter",
                 b, bytes - last, cap);
        if (b + 1 < nb)
            MT_CHECK(bytes >= cap, "bucket %d closed with %zu of its cap %zu bytes", b, bytes, cap);
    }
    MT_CHECK(k == n, "the buckets hold %d of %d parameters", k, n);
    for (int a = 0; a < nb; a++)
        for (int b = a + 1; b < nb; b++)
            MT_CHECK(hi[a] <= lo[b] || hi[b] <= lo[a], "buckets %d and %d overlap", a, b);
    for (int i = 0; i < l->n; i++)
        if (bucket_of[i] < 0)
            MT_CHECK(!l->items[i].tensor->grad, "%s has a gradient", l->items[i].name);
}

static void test_bucket_plan_reverse_order_caps_and_oversized_alone(void) {
    /* Caps of 256 and 1024 floats. In reverse order: [100 200] [10 600 500] [50 2000] [300 100]:
     * each bucket closes at the parameter that takes it to its cap. The second case starts with a
     * parameter over the first cap: [400] [1000 1 300] [300 300 1 7]. */
    const int64_t sizes[2][9] = {{100, 300, 2000, 50, 500, 600, 10, 200, 100},
                                 {7, 1, 300, 300, 300, 300, 1, 1000, 400}};
    const int want_buckets[2] = {4, 3};
    double first_mb = 1024.0 / 1048576, mb = 4096.0 / 1048576;
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 2; c++) {
            toy t;
            toy_init(&t, 9, sizes[c], 0);
            rg_ddp *ddp = rg_ddp_new(&t.list, comms[b],
                                     &(rg_ddp_opts){.first_bucket_mb = first_mb, .bucket_mb = mb});
            MT_CHECK(ddp, "rg_ddp_new on %s: %s", comm_name(comms[b]), rg_last_error());
            int bucket_of[9];
            check_plan(ddp, &t.list, first_mb, mb, bucket_of);
            MT_CHECK(rg_ddp_num_buckets(ddp) == want_buckets[c], "case %d: %d buckets, want %d", c,
                     rg_ddp_num_buckets(ddp), want_buckets[c]);
            MT_CHECK(bucket_of[8] == 0 && bucket_of[0] == rg_ddp_num_buckets(ddp) - 1,
                     "the last parameter opens bucket 0, the first closes the last bucket");
            rg_ddp_free(ddp);
            toy_deinit(&t);
        }
}

static void test_bucket_plan_skips_buffers_and_frozen_tensors(void) {
    const int64_t sizes[5] = {30, 40, 50, 60, 70};
    toy t;
    toy_init(&t, 5, sizes, 0);
    t.items[1].is_buffer = true;
    rg_tensor_set_requires_grad(t.items[1].tensor, false);
    rg_tensor_set_requires_grad(t.items[3].tensor, false);
    rg_ddp *ddp = rg_ddp_new(&t.list, comms[0], NULL);
    MT_CHECK(ddp, "%s", rg_last_error());
    int bucket_of[5];
    check_plan(ddp, &t.list, 1, 25, bucket_of);
    MT_CHECK(rg_ddp_num_buckets(ddp) == 1 && rg_ddp_bucket_params(ddp, 0) == 3,
             "%d buckets, the first with %d parameters; want 1 with 3", rg_ddp_num_buckets(ddp),
             rg_ddp_bucket_params(ddp, 0));
    rg_ddp_free(ddp);
    toy_deinit(&t);
}

static void test_default_plan_of_the_mlp(void) {
    /* 1 MiB first bucket, 25 MiB after: the MLP's 0.9 MiB fit in the first. With caps of 0.1 and
     * 0.5 MiB: fc3, fc2.bias and fc2.weight (which takes the bucket past 0.1 MiB); fc1.bias and
     * fc1.weight (0.77 MiB). */
    rg_model *m = mlp_new();
    const rg_param_list *l = rg_model_params(m);
    int bucket_of[32];
    rg_ddp *ddp = rg_ddp_new(l, comms[1], NULL);
    MT_CHECK(ddp, "%s", rg_last_error());
    check_plan(ddp, l, 1, 25, bucket_of);
    MT_CHECK(rg_ddp_num_buckets(ddp) == 1, "%d buckets", rg_ddp_num_buckets(ddp));
    rg_ddp_free(ddp);
    ddp = rg_ddp_new(l, comms[1], &(rg_ddp_opts){.first_bucket_mb = 0.1, .bucket_mb = 0.5});
    MT_CHECK(ddp, "%s", rg_last_error());
    check_plan(ddp, l, 0.1, 0.5, bucket_of);
    MT_CHECK(rg_ddp_num_buckets(ddp) == 2, "%d buckets", rg_ddp_num_buckets(ddp));
    rg_ddp_free(ddp);
    rg_model_free(m);
}

/* ---- broadcast and averaging ---- */

static void test_mlp_broadcast_and_average_match_the_reference(void) {
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new(), *ref = mlp_new();
        const rg_param_list *l = rg_model_params(net), *lr = rg_model_params(ref);
        for (int i = 0; i < l->n; i++) /* other ranks start elsewhere: DDP must overwrite them */
            if (rank != 0) rg_tensor_fill_(l->items[i].tensor, (float)rank);
        rg_ddp *ddp =
            rg_ddp_new(l, comms[b], &(rg_ddp_opts){.first_bucket_mb = 0.1, .bucket_mb = 0.5});
        MT_CHECK(ddp, "%s", rg_last_error());
        for (int i = 0; i < l->n; i++)
            MT_CHECK(memcmp(l->items[i].tensor->data, lr->items[i].tensor->data,
                            rg_tensor_nbytes(lr->items[i].tensor)) == 0,
                     "%s differs from rank 0's after rg_ddp_new", l->items[i].name);
        for (int step = 0; step < 3; step++) {
            zero_grads(l);
            zero_grads(lr);
            /* The reference in a scope of its own: a backward fires the hooks of every
             * parameter its scope used, the DDP model's too (see test_ddp.c). */
            rg_scope_begin();
            rg_backward(mlp_loss(net, rank, step));
            MT_OK(rg_ddp_wait(ddp));
            rg_scope_end();
            rg_scope_begin();
            rg_backward(mlp_loss(ref, rank, step));
            rg_scope_end();
            check_average("MLP gradients", l, lr, comms[b], 1e-5);
        }
        rg_ddp_free(ddp);
        rg_model_free(net);
        rg_model_free(ref);
    }
}

/* ---- launch order and overlap ---- */

/* What a test hook sees: after DDP's own hook on the same parameter ran. */
typedef struct {
    rg_ddp *ddp;
    const int *bucket_of;
    int pending[TOY_MAX], nb;
    bool saw_later_bucket_full_unlaunched;
} order_log;

typedef struct {
    order_log *log;
    int index;
} order_ctx;

static void on_ready_check_order(rg_tensor *p, void *ctx) {
    (void)p;
    order_ctx *o = ctx;
    order_log *g = o->log;
    g->pending[g->bucket_of[o->index]]--;
    int full_prefix = 0;
    while (full_prefix < g->nb && g->pending[full_prefix] == 0) full_prefix++;
    for (int b = full_prefix + 1; b < g->nb; b++)
        if (g->pending[b] == 0) g->saw_later_bucket_full_unlaunched = true;
    MT_CHECK(rg_ddp_num_launched(g->ddp) == full_prefix,
             "after p%d's gradient: %d buckets launched, want %d (the full ones before the first "
             "unfinished one)",
             o->index, rg_ddp_num_launched(g->ddp), full_prefix);
}

static void test_buckets_launch_in_index_order_whatever_order_they_fill(void) {
    /* Even ranks use the parameters in registration order (bucket 0 fills first), odd ranks in
     * reverse (the last bucket fills first). Launching as buckets fill would issue different
     * allreduces on different ranks, which the comm reports as a mismatch. */
    const int64_t sizes[6] = {300, 200, 250, 100, 300, 120};
    int order[6];
    for (int k = 0; k < 6; k++) order[k] = rank % 2 ? 5 - k : k;
    for (int b = 0; b < 2; b++) {
        toy t, ref;
        toy_init(&t, 6, sizes, 0);
        toy_init(&ref, 6, sizes, 0);
        double mb = 1600.0 / 1048576;
        rg_ddp *ddp =
            rg_ddp_new(&t.list, comms[b], &(rg_ddp_opts){.first_bucket_mb = mb, .bucket_mb = mb});
        MT_CHECK(ddp, "%s", rg_last_error());
        int bucket_of[6];
        check_plan(ddp, &t.list, mb, mb, bucket_of);
        order_log g = {.ddp = ddp, .bucket_of = bucket_of, .nb = rg_ddp_num_buckets(ddp)};
        MT_CHECK(g.nb >= 3, "%d buckets", g.nb);
        order_ctx ctx[6];
        int ids[6];
        for (int i = 0; i < 6; i++) {
            ctx[i] = (order_ctx){&g, i};
            ids[i] = rg_grad_hook_add(t.items[i].tensor, on_ready_check_order, &ctx[i]);
        }
        for (int step = 0; step < 2; step++) {
            for (int q = 0; q < g.nb; q++) g.pending[q] = rg_ddp_bucket_params(ddp, q);
            zero_grads(&t.list);
            zero_grads(&ref.list);
            rg_scope_begin();
            rg_backward(toy_loss(&t, order, 6, rank, step));
            MT_CHECK(rg_ddp_num_launched(ddp) == g.nb, "all buckets launched by the end");
            MT_OK(rg_ddp_wait(ddp));
            rg_scope_end();
            rg_scope_begin();
            rg_backward(toy_loss(&ref, order, 6, rank, step));
            rg_scope_end();
            check_average("toy gradients", &t.list, &ref.list, comms[b], 1e-6);
        }
        MT_CHECK(rank % 2 == 0 || g.saw_later_bucket_full_unlaunched,
                 "rank %d never saw a later bucket fill first: the test lost its point", rank);
        for (int i = 0; i < 6; i++) rg_grad_hook_remove(t.items[i].tensor, ids[i]);
        rg_ddp_free(ddp);
        toy_deinit(&t);
        toy_deinit(&ref);
    }
}

typedef struct {
    rg_ddp *ddp;
    int launched_at_fc1;
    int fired;
} overlap_probe;

static void on_fc1_weight_ready(rg_tensor *p, void *ctx) {
    (void)p;
    overlap_probe *o = ctx;
    o->launched_at_fc1 = rg_ddp_num_launched(o->ddp);
    o->fired++;
}

static void test_a_bucket_launches_before_backward_ends(void) {
    /* fc1 is the first layer: its gradients are final last (the weight, then the bias). This
     * hook, added before DDP's, runs just before DDP sees fc1.weight's gradient: by then every
     * bucket before the first that holds an fc1 tensor must have been handed to the comm thread,
     * while backward is still running. */
    for (int b = 0; b < 2; b++) {
        rg_model *net = mlp_new();
        const rg_param_list *l = rg_model_params(net);
        rg_tensor *fc1w = (rg_tensor *)rg_param_list_find(l, "fc1.weight")->tensor;
        overlap_probe probe = {0};
        int id = rg_grad_hook_add(fc1w, on_fc1_weight_ready, &probe);
        probe.ddp =
            rg_ddp_new(l, comms[b], &(rg_ddp_opts){.first_bucket_mb = 0.1, .bucket_mb = 0.5});
        MT_CHECK(probe.ddp, "%s", rg_last_error());
        int nb = rg_ddp_num_buckets(probe.ddp), bucket_of[8];
        check_plan(probe.ddp, l, 0.1, 0.5, bucket_of);
        int want = nb; /* buckets wholly of fc2 and fc3 tensors */
        for (int i = 0; i < l->n; i++)
            if (strncmp(l->items[i].name, "fc1.", 4) == 0 && bucket_of[i] < want)
                want = bucket_of[i];
        MT_CHECK(want > 0, "no bucket without fc1 tensors: the plan defeats the test");
        for (int step = 0; step < 2; step++) {
            rg_scope_begin();
            rg_backward(mlp_loss(net, rank, step));
            MT_CHECK(probe.fired == step + 1, "the probe fired %d times", probe.fired);
            MT_CHECK(probe.launched_at_fc1 == want,
                     "%d of %d buckets launched when fc1.weight's gradient was final, want %d",
                     probe.launched_at_fc1, nb, want);
            MT_OK(rg_ddp_wait(probe.ddp));
            rg_scope_end();
            MT_CHECK(rg_ddp_launched_during_backward(probe.ddp) == nb,
                     "%d of %d buckets launched during backward",
                     rg_ddp_launched_during_backward(probe.ddp), nb);
            MT_CHECK(rg_ddp_num_launched(probe.ddp) == 0, "the count restarts after the wait");
            zero_grads(l);
        }
        rg_grad_hook_remove(fc1w, id);
        rg_ddp_free(probe.ddp);
        rg_model_free(net);
    }
}

int main(int argc, char **argv) {
    dist = ddp_test_begin(&argc, &argv, comms, &rank, &size);

    MT_RUN(test_bucket_plan_reverse_order_caps_and_oversized_alone);
    MT_RUN(test_bucket_plan_skips_buffers_and_frozen_tensors);
    MT_RUN(test_default_plan_of_the_mlp);
    MT_RUN(test_mlp_broadcast_and_average_match_the_reference);
    MT_RUN(test_buckets_launch_in_index_order_whatever_order_they_fill);
    MT_RUN(test_a_bucket_launches_before_backward_ends);

    return ddp_test_end(dist, comms);
}
