/* End to end: the MLP learns a synthetic 10-class problem (loss falls, accuracy far above
 * chance), and memory stays flat across 100 training steps (no system allocations after the
 * warm-up, the same bytes in use after every step). */
#include <math.h>
#include <stdlib.h>

#include "rgtest.h"

enum { CLASSES = 10, PIXELS = 28 * 28 };

/* Class c is a fixed random 28x28 pattern; a sample is 0.35 times the pattern plus U(0,1) noise. */
typedef struct {
    float proto[CLASSES][PIXELS];
} synthetic;

static void synthetic_init(synthetic *d) {
    for (int c = 0; c < CLASSES; c++) {
        rg_tensor *t = rgt_uniform(RG_SHAPE(PIXELS), 0, 1, 500 + (uint64_t)c);
        memcpy(d->proto[c], t->data, sizeof d->proto[c]);
        rg_tensor_free(t);
    }
}

/* Batch `k` of n samples (scoped tensors): x (n,1,28,28), labels (n). */
static void synthetic_batch(const synthetic *d, uint64_t k, int64_t n, rg_tensor **x,
                            rg_tensor **y) {
    *x = rg_tensor_empty(RG_F32, RG_SHAPE(n, 1, 28, 28), RG_CPU);
    uint64_t off = 0;
    rg_tensor_uniform_(*x, 0, 1, 9000 + k, &off);
    *y = rg_tensor_empty(RG_I64, RG_SHAPE(n), RG_CPU);
    float *xp = rg_tensor_f32(*x);
    int64_t *yp = (*y)->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (int64_t)((k * 7919 + (uint64_t)i * 104729) % CLASSES);
        yp[i] = c;
        for (int p = 0; p < PIXELS; p++) xp[i * PIXELS + p] += 0.35f * d->proto[c][p];
    }
}

/* One training step; returns the loss. */
static float train_step(rg_model *net, rg_optim *opt, const synthetic *d, uint64_t k, int64_t n) {
    rg_scope_begin();
    rg_tensor *x, *y;
    synthetic_batch(d, k, n, &x, &y);
    rg_tensor *loss = rg_cross_entropy(rg_model_forward(net, x, RG_TRAIN), y);
    rg_backward(loss);
    rg_optim_step(opt);
    rg_optim_zero_grad(opt);
    float v = rg_tensor_item(loss);
    rg_scope_end();
    return v;
}

static double accuracy(rg_model *net, const synthetic *d, uint64_t k, int64_t n) {
    rg_scope_begin();
    rg_tensor *x, *y;
    synthetic_batch(d, k, n, &x, &y);
    rg_tensor *pred = rg_argmax(rg_model_forward(net, x, RG_EVAL));
    int64_t right = 0;
    for (int64_t i = 0; i < n; i++) right += ((int64_t *)pred->data)[i] == ((int64_t *)y->data)[i];
    rg_scope_end();
    return (double)right / (double)n;
}

Test(models_training, mlp_learns_a_synthetic_problem) {
    synthetic *d = malloc(sizeof *d);
    synthetic_init(d);
    rg_model *net = rg_model_mlp(1);
    rg_optim *opt = rg_adam_new(rg_model_params(net), &(rg_adam_opts){.lr = 1e-3f});
    double before = accuracy(net, d, 1u << 20, 500);
    float first = 0, last = 0;
    for (uint64_t k = 0; k < 60; k++) {
        float l = train_step(net, opt, d, k, 32);
        cr_assert(isfinite(l), "step %llu: loss %g", (unsigned long long)k, l);
        if (k < 5) first += l / 5;
        if (k >= 55) last += l / 5;
    }
    double after = accuracy(net, d, 1u << 20, 500); /* held-out samples */
    cr_log_info("loss %.3f -> %.3f, held-out accuracy %.3f -> %.3f", first, last, before, after);
    cr_assert_gt(first, 1.8f, "the untrained loss is near log(10) = 2.30: %g", first);
    cr_assert_lt(last, 0.5f * first, "loss falls: first steps %g, last steps %g", first, last);
    cr_assert_gt(after, 0.9, "held-out accuracy %.3f (was %.3f; chance is 0.1)", after, before);
    rg_optim_free(opt);
    rg_model_free(net);
    free(d);
}

Test(models_training, memory_is_flat_across_100_steps) {
    synthetic *d = malloc(sizeof *d);
    synthetic_init(d);
    rg_model *net = rg_model_mlp(2);
    rg_optim *opt = rg_sgd_new(rg_model_params(net), &(rg_sgd_opts){.lr = 0.01f, .momentum = 0.9f});
    for (uint64_t k = 0; k < 5; k++) train_step(net, opt, d, k, 16); /* warm-up: grads, cache */
    rg_mem_stats warm = rg_mem_stats_get(RG_CPU);
    for (uint64_t k = 5; k < 105; k++) {
        train_step(net, opt, d, k, 16);
        rg_mem_stats now = rg_mem_stats_get(RG_CPU);
        cr_assert_eq(now.in_use, warm.in_use, "step %llu: %zu bytes in use, %zu after warm-up",
                     (unsigned long long)k, now.in_use, warm.in_use);
        const char *cache = getenv("RG_ALLOC_CACHE"); /* off under ASan: every block is malloc'ed */
        if (!(cache && strcmp(cache, "0") == 0))
            cr_assert_eq(now.sys_allocs, warm.sys_allocs,
                         "step %llu: %llu system allocations, "
                         "%llu after warm-up",
                         (unsigned long long)k, (unsigned long long)now.sys_allocs,
                         (unsigned long long)warm.sys_allocs);
    }
    rg_optim_free(opt);
    rg_model_free(net);
    free(d);
}
