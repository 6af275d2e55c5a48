/* DDP on GPUs, one per rank: N ranks at batch B/N reach the weights that one process reaches at
 * batch B on the CPU. Through nccl (buckets reduced on the comm stream, ordered by events, no
 * host wait in backward), through nccl with float16 compression, and through mpi with the
 * buckets copied through the host. The bundled MLP without dropout, SGD with momentum, several
 * buckets. Skips (exit 77) without a GPU for every rank. */
#include <math.h>

#include "gpu_test.h"

#define BATCH 12 /* the global batch: divides among 2 and 3 ranks */
#define PIXELS 784
#define STEPS 3

static rg_dist *dist;
static rg_device dev;
static int rank, size;

static const rg_sgd_opts sgd = {.lr = 0.1f, .momentum = 0.9f};

static rg_model *model_on(rg_device d) {
    rg_model *m = rg_model_mlp(5);
    MT_CHECK(m, "%s", rg_last_error());
    rg_model_set_dropout(m, 0);
    MT_OK(rg_model_to_device(m, d));
    return m;
}

/* One step of SGD on rows [first, first + rows) of step s's global batch. */
static void train_step(rg_model *m, rg_optim *opt, rg_ddp *ddp, rg_device d, int s, int first,
                       int rows) {
    static float x[BATCH * PIXELS];
    int64_t y[BATCH];
    rg_cpu_backend.uniform(BATCH * PIXELS, 0, 1, 77 + (uint64_t)s, 0, x);
    for (int i = 0; i < BATCH; i++) y[i] = (i * 7 + s) % 10;
    rg_scope_begin();
    rg_tensor *xt = rg_tensor_from_f32(RG_SHAPE(rows, 1, 28, 28), x + first * PIXELS, d);
    rg_tensor *yt = rg_tensor_empty(RG_I64, RG_SHAPE(rows), d);
    rg_tensor_copy_from_host(yt, y + first);
    rg_backward(rg_cross_entropy(rg_model_forward(m, xt, RG_TRAIN), yt));
    if (ddp) MT_OK(rg_ddp_wait(ddp));
    rg_optim_step(opt);
    rg_optim_zero_grad(opt);
    rg_scope_end();
}

/* One process, the whole batch, on the CPU. */
static rg_model *reference(void) {
    rg_model *m = model_on(RG_CPU);
    rg_optim *opt = rg_sgd_new(rg_model_params(m), &sgd);
    MT_CHECK(opt, "%s", rg_last_error());
    for (int s = 0; s < STEPS; s++) train_step(m, opt, NULL, RG_CPU, s, 0, BATCH);
    rg_optim_free(opt);
    return m;
}

static void check_weights(const rg_model *got, const rg_model *want, double rtol, double atol,
                          const char *what) {
    const rg_param_list *g = rg_model_params(got), *w = rg_model_params(want);
    MT_CHECK(g->n == w->n, "%s: %d tensors, want %d", what, g->n, w->n);
    for (int i = 0; i < g->n; i++) {
        const rg_tensor *t = g->items[i].tensor;
        if (t->dtype != RG_F32) continue;
        float *host = malloc((size_t)t->numel * sizeof *host);
        MT_CHECK(host, "out of memory");
        rg_tensor_copy_to_host(t, host);
        const float *ref = rg_tensor_f32(w->items[i].tensor);
        for (int64_t j = 0; j < t->numel; j++)
            MT_CHECK(fabs(host[j] - ref[j]) <= atol + rtol * fabs(ref[j]),
                     "%s: %s[%lld] is %.9g after %d steps, want %.9g", what, g->items[i].name,
                     (long long)j, host[j], STEPS, ref[j]);
        free(host);
    }
}

static void ddp_matches_one_process(rg_comm *c, bool fp16, const rg_model *ref) {
    char what[64];
    snprintf(what, sizeof what, "ddp over %s%s, %d ranks", rg_comm_backend_name(rg_comm_kind(c)),
             fp16 ? " (fp16)" : "", size);
    rg_model *m = model_on(dev);
    const rg_param_list *params = rg_model_params(m);
    rg_optim *opt = rg_sgd_new(params, &sgd);
    MT_CHECK(opt, "%s", rg_last_error());
    rg_ddp *ddp = rg_ddp_new(
        params, c,
        &(rg_ddp_opts){.bucket_mb = 0.1, .first_bucket_mb = 0.004, .compress_fp16 = fp16});
    /* the MLP's parameters in reverse: fc3 (5.2 KB) | fc2 (129 KB) | fc1 (785 KB) */
    MT_CHECK(ddp, "%s: %s", what, rg_last_error());
    MT_CHECK(rg_ddp_num_buckets(ddp) >= 3, "%s: %d buckets", what, rg_ddp_num_buckets(ddp));
    int rows = BATCH / size;
    for (int s = 0; s < STEPS; s++) train_step(m, opt, ddp, dev, s, rank * rows, rows);
    /* GPU and CPU sum in different orders; float16 gradients carry ~3 significant digits */
    check_weights(m, ref, fp16 ? 1e-2 : 1e-4, fp16 ? 1e-3 : 1e-5, what);
    rg_ddp_free(ddp);
    rg_optim_free(opt);
    rg_model_free(m);
}

static rg_comm *comm_nccl, *comm_mpi;
static rg_model *ref;

static void test_ddp_over_nccl_matches_one_process(void) {
    ddp_matches_one_process(comm_nccl, false, ref);
}

static void test_ddp_over_nccl_with_fp16_matches_one_process(void) {
    ddp_matches_one_process(comm_nccl, true, ref);
}

static void test_ddp_over_mpi_through_the_host_matches_one_process(void) {
    ddp_matches_one_process(comm_mpi, false, ref);
}

int main(int argc, char **argv) {
    dist = gt_start(&argc, &argv, "mpi_nccl_ddp", &dev);
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    MT_CHECK(BATCH % size == 0, "run me with 2 or 3 ranks");
    MT_OK(rg_comm_new(dist, RG_COMM_NCCL, &comm_nccl));
    comm_mpi = rg_dist_comm(dist);
    ref = reference();

    MT_RUN(test_ddp_over_nccl_matches_one_process);
    MT_RUN(test_ddp_over_nccl_with_fp16_matches_one_process);
    MT_RUN(test_ddp_over_mpi_through_the_host_matches_one_process);

    rg_model_free(ref);
    rg_comm_free(comm_nccl);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
