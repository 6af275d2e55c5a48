/* Learning-rate schedules against torch 1.13's StepLR, CosineAnnealingLR and LinearLR warmup in
 * SequentialLR (tests/data/nn/lr_ref.safetensors, from scripts/make_reference_nn.py), and the
 * optimizer applying a schedule by itself. */
#include "../models/nn_ref.h"

static void check_against_torch(const char *name, const rg_lr_schedule *s, int64_t n) {
    rg_safetensors *f = nn_ref_open("lr_ref.safetensors");
    double *want = nn_ref_read(f, name, "F64", n);
    for (int64_t t = 0; t < n; t++) {
        double got = rg_lr_schedule_at(s, t);
        cr_assert(fabs(got - want[t]) <= 1e-9 + 1e-6 * fabs(want[t]),
                  "%s at step %lld: %.9g, torch %.9g", name, (long long)t, got, want[t]);
    }
    free(want);
    rg_safetensors_close(f);
}

Test(optim_schedule, step_matches_torch_steplr) {
    check_against_torch(
        "step", &(rg_lr_schedule){.kind = RG_LR_STEP, .base_lr = 0.1, .step_size = 3, .gamma = 0.5},
        12);
}

Test(optim_schedule, cosine_matches_torch_cosineannealinglr_beyond_t_max) {
    check_against_torch(
        "cosine",
        &(rg_lr_schedule){.kind = RG_LR_COSINE, .base_lr = 0.1, .t_max = 10, .eta_min = 0.001}, 25);
}

Test(optim_schedule, warmup_then_cosine_matches_torch_sequentiallr) {
    rg_lr_schedule s = {
        .kind = RG_LR_COSINE, .base_lr = 0.1, .t_max = 10, .warmup_steps = 5, .warmup_start = 0.1};
    check_against_torch("warmup_cosine", &s, 20);
}

Test(optim_schedule, warmup_then_step_matches_torch_sequentiallr) {
    rg_lr_schedule s = {.kind = RG_LR_STEP,
                        .base_lr = 0.1,
                        .step_size = 3,
                        .gamma = 0.1,
                        .warmup_steps = 4,
                        .warmup_start = 0.25};
    check_against_torch("warmup_step", &s, 14);
}

Test(optim_schedule, constant_with_warmup_from_zero) {
    rg_lr_schedule s = {.kind = RG_LR_CONSTANT, .base_lr = 0.4, .warmup_steps = 4};
    float want[] = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.4f};
    for (int t = 0; t < 6; t++)
        cr_assert_float_eq(rg_lr_schedule_at(&s, t), want[t], 1e-7, "step %d", t);
}

Test(optim_schedule, goyal_warmup_ramps_from_the_base_rate_to_k_times_it) {
    /* ringgrad-train --scale-lr on k = 4 ranks with lr 0.1: base_lr 0.4, warmup_start 1/k.
     * Goyal et al. 2017: start at the single-worker rate, reach k times it after the warmup. */
    rg_lr_schedule s = {
        .kind = RG_LR_CONSTANT, .base_lr = 0.4, .warmup_steps = 4, .warmup_start = 0.25};
    float want[] = {0.1f, 0.175f, 0.25f, 0.325f, 0.4f, 0.4f};
    for (int t = 0; t < 6; t++)
        cr_assert_float_eq(rg_lr_schedule_at(&s, t), want[t], 1e-7, "step %d", t);
}

Test(optim_schedule, optimizer_applies_its_schedule_each_step) {
    rg_tensor *w = rgt_param(RG_SHAPE(2), -1, 1, 1);
    rg_named_tensor items[] = {{"w", w, false}};
    rg_param_list list = {items, 1};
    rg_optim *opt = rg_sgd_new(&list, &(rg_sgd_opts){.lr = 1.0f});
    rg_lr_schedule s = {.kind = RG_LR_STEP, .base_lr = 0.1, .step_size = 2, .gamma = 0.5};
    rg_optim_set_schedule(opt, &s);
    cr_assert_float_eq(rg_optim_get_lr(opt), 0.1f, 0, "the schedule's value at step 0 at once");
    w->grad = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU);
    rg_tensor_fill_(w->grad, 1.0f);
    float before = rg_tensor_f32(w)[0];
    float lrs[5];
    for (int k = 0; k < 5; k++) {
        lrs[k] = rg_optim_get_lr(opt);
        rg_optim_step(opt);
    }
    float want[] = {0.1f, 0.1f, 0.05f, 0.05f, 0.025f};
    for (int k = 0; k < 5; k++) cr_assert_float_eq(lrs[k], want[k], 1e-9, "lr used by step %d", k);
    cr_assert_float_eq(rg_tensor_f32(w)[0], before - 0.325f, 1e-6, "p -= sum of the rates");
    rg_optim_set_schedule(opt, NULL);
    rg_optim_set_lr(opt, 0.5f);
    rg_optim_step(opt);
    cr_assert_float_eq(rg_optim_get_lr(opt), 0.5f, 0, "without a schedule the rate stays");
    rg_optim_free(opt);
    rg_tensor_free(w);
}

Test(optim_schedule, zero_step_size_aborts, .signal = SIGABRT) {
    rg_lr_schedule_at(&(rg_lr_schedule){.kind = RG_LR_STEP, .base_lr = 0.1}, 0);
}

Test(optim_schedule, cosine_without_t_max_aborts, .signal = SIGABRT) {
    rg_lr_schedule_at(&(rg_lr_schedule){.kind = RG_LR_COSINE, .base_lr = 0.1}, 3);
}
