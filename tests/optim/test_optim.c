/* Optimizers against torch.optim 1.13: six steps of SGD (plain, momentum, dampening, Nesterov,
 * weight decay), Adam and AdamW on two parameters, one of which has no gradient on the first step,
 * with the learning rate halved after three steps. References: tests/data/nn/optim_ref.safetensors
 * from scripts/make_reference_nn.py (OPTIM_CONFIGS there mirrors the table below). */
#include <stdio.h>

#include "../models/nn_ref.h"

enum { STEPS = 6, HALVE_LR_AFTER = 3, NA = 12, NB = 5 };

typedef struct {
    const char *name;
    rg_optim *(*make)(const rg_param_list *params);
} config;

static rg_optim *sgd_plain(const rg_param_list *p) {
    return rg_sgd_new(p, &(rg_sgd_opts){.lr = 0.1f});
}
static rg_optim *sgd_momentum(const rg_param_list *p) {
    return rg_sgd_new(p, &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
}
static rg_optim *sgd_dampening(const rg_param_list *p) {
    return rg_sgd_new(p, &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f});
}
static rg_optim *sgd_nesterov(const rg_param_list *p) {
    return rg_sgd_new(p, &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f, .nesterov = true});
}
static rg_optim *sgd_weight_decay(const rg_param_list *p) {
    return rg_sgd_new(p, &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
}
static rg_optim *adam(const rg_param_list *p) {
    return rg_adam_new(p, &(rg_adam_opts){.lr = 0.01f});
}
static rg_optim *adam_weight_decay(const rg_param_list *p) {
    return rg_adam_new(
        p, &(rg_adam_opts){
               .lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.1f});
}
static rg_optim *adamw(const rg_param_list *p) {
    return rg_adamw_new(p, &(rg_adam_opts){.lr = 0.01f, .weight_decay = 0.1f});
}

static const config configs[] = {
    {"sgd_plain", sgd_plain},
    {"sgd_momentum", sgd_momentum},
    {"sgd_dampening", sgd_dampening},
    {"sgd_nesterov", sgd_nesterov},
    {"sgd_weight_decay", sgd_weight_decay},
    {"adam", adam},
    {"adam_weight_decay", adam_weight_decay},
    {"adamw", adamw},
};

/* Two parameters "a" (3,4) and "b" (5) with the reference's initial values. */
typedef struct {
    rg_tensor *a, *b;
    rg_named_tensor items[2];
    rg_param_list list;
} two_params;

static void two_params_init(two_params *tp, const float *a0, const float *b0) {
    tp->a = rg_tensor_new(RG_F32, RG_SHAPE(3, 4), RG_CPU);
    tp->b = rg_tensor_new(RG_F32, RG_SHAPE(5), RG_CPU);
    rg_tensor_copy_from_host(tp->a, a0);
    rg_tensor_copy_from_host(tp->b, b0);
    rg_tensor_set_requires_grad(tp->a, true);
    rg_tensor_set_requires_grad(tp->b, true);
    tp->items[0] = (rg_named_tensor){.name = "a", .tensor = tp->a};
    tp->items[1] = (rg_named_tensor){.name = "b", .tensor = tp->b};
    tp->list = (rg_param_list){.items = tp->items, .n = 2};
}

static void set_grad(rg_tensor *p, const float *g) {
    if (!p->grad) p->grad = rg_tensor_new(RG_F32, p->ndim, p->shape, RG_CPU);
    rg_tensor_copy_from_host(p->grad, g);
}

/* The same rules built by name through the registry (optim/registry.c). */
static rg_optim *by_name_sgd_nesterov(const rg_param_list *p) {
    return rg_optim_new("sgd", p, "lr=0.1,momentum=0.9,nesterov=1");
}
static rg_optim *by_name_sgd_weight_decay(const rg_param_list *p) {
    return rg_optim_new("sgd", p, "lr=0.1,momentum=0.9,weight_decay=0.01");
}
static rg_optim *by_name_adam(const rg_param_list *p) {
    return rg_optim_new("adam", p, "lr=0.01");
}
static rg_optim *by_name_adam_weight_decay(const rg_param_list *p) {
    return rg_optim_new("adam", p, "lr=0.01,beta1=0.8,beta2=0.99,eps=1e-6,weight_decay=0.1");
}
static rg_optim *by_name_adamw(const rg_param_list *p) {
    return rg_optim_new("adamw", p, "weight_decay=0.1,lr=0.01");
}

static const config by_name[] = {
    {"sgd_nesterov", by_name_sgd_nesterov},   {"sgd_weight_decay", by_name_sgd_weight_decay},
    {"adam", by_name_adam},                   {"adam_weight_decay", by_name_adam_weight_decay},
    {"adamw", by_name_adamw},
};

/* Steps the rule through the reference's gradients multiplied by `grad_mult`, with the optimizer's
 * grad scale at 1/grad_mult (as DDP's summed buckets with the 1/N folded into the step). */
static void run_config_scaled(rg_safetensors *f, const config *c, float grad_mult);

static void run_config(rg_safetensors *f, const config *c) {
    run_config_scaled(f, c, 1.0f);
}

static void scale_by(float *g, int64_t n, float k) {
    for (int64_t i = 0; i < n; i++) g[i] *= k;
}

static void run_config_scaled(rg_safetensors *f, const config *c, float grad_mult) {
    float *a0 = nn_ref_read(f, "init.a", "F32", NA), *b0 = nn_ref_read(f, "init.b", "F32", NB);
    float *ga = nn_ref_read(f, "grad.a", "F32", STEPS * NA),
          *gb = nn_ref_read(f, "grad.b", "F32", STEPS * NB);
    char name[64];
    snprintf(name, sizeof name, "%s.a", c->name);
    float *wa = nn_ref_read(f, name, "F32", STEPS * NA);
    snprintf(name, sizeof name, "%s.b", c->name);
    float *wb = nn_ref_read(f, name, "F32", STEPS * NB);
    two_params tp;
    two_params_init(&tp, a0, b0);
    rg_optim *opt = c->make(&tp.list);
    cr_assert_not_null(opt, "%s: %s", c->name, rg_last_error());
    scale_by(ga, STEPS * NA, grad_mult), scale_by(gb, STEPS * NB, grad_mult);
    rg_optim_set_grad_scale(opt, 1.0f / grad_mult);
    for (int k = 0; k < STEPS; k++) {
        if (k == HALVE_LR_AFTER) rg_optim_set_lr(opt, rg_optim_get_lr(opt) * 0.5f);
        set_grad(tp.a, ga + k * NA);
        if (k > 0) set_grad(tp.b, gb + k * NB); /* b has no gradient on the first step */
        rg_optim_step(opt);
        char what[96];
        snprintf(what, sizeof what, "%s: a after step %d", c->name, k + 1);
        rgt_assert_close(rg_tensor_f32(tp.a), wa + k * NA, NA, 1e-6, 1e-5, what);
        snprintf(what, sizeof what, "%s: b after step %d", c->name, k + 1);
        rgt_assert_close(rg_tensor_f32(tp.b), wb + k * NB, NB, 1e-6, 1e-5, what);
    }
    cr_assert_eq(rg_optim_num_steps(opt), STEPS);
    rg_optim_free(opt);
    rg_tensor_free(tp.a), rg_tensor_free(tp.b);
    free(a0), free(b0), free(ga), free(gb), free(wa), free(wb);
}

Test(optim_torch, every_rule_matches_torch_optim_step_by_step) {
    rg_safetensors *f = nn_ref_open("optim_ref.safetensors");
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) run_config(f, &configs[i]);
    rg_safetensors_close(f);
}

Test(optim_registry, rules_built_by_name_match_torch_optim) {
    rg_safetensors *f = nn_ref_open("optim_ref.safetensors");
    for (size_t i = 0; i < sizeof by_name / sizeof by_name[0]; i++) run_config(f, &by_name[i]);
    rg_safetensors_close(f);
}

Test(optim_grad_scale, summed_gradients_times_the_scale_match_torch_on_the_mean) {
    /* 3 ranks' sum is 3x the mean; a scale of 1/3 in the kernel must give torch's update on the
     * mean, for every rule (momentum, weight decay and Adam's moments all see the scaled g). */
    rg_safetensors *f = nn_ref_open("optim_ref.safetensors");
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        run_config_scaled(f, &configs[i], 3.0f);
    rg_safetensors_close(f);
}

Test(optim_grad_scale, a_wrong_scale_is_seen) {
    /* the test above can fail: without the scale, summed gradients move SGD 3x as far */
    float a0[NA] = {0}, b0[NB] = {0}, g[NA];
    for (int i = 0; i < NA; i++) g[i] = 3.0f;
    two_params tp;
    two_params_init(&tp, a0, b0);
    rg_optim *opt = rg_optim_new("sgd", &tp.list, "lr=0.5");
    cr_assert_float_eq(rg_optim_get_grad_scale(opt), 1.0f, 0, "default: no scale");
    set_grad(tp.a, g);
    rg_optim_step(opt);
    cr_assert_float_eq(rg_tensor_f32(tp.a)[0], -1.5f, 1e-7);
    rg_optim_set_grad_scale(opt, 1.0f / 3.0f);
    rg_optim_step(opt);
    cr_assert_float_eq(rg_tensor_f32(tp.a)[0], -2.0f, 1e-6, "then 0.5 * 3 * 1/3");
    rg_optim_free(opt);
    rg_tensor_free(tp.a), rg_tensor_free(tp.b);
}

Test(optim_registry, unknown_names_keys_and_values_are_errors_that_list_the_known_ones) {
    rg_param_list empty = {0};
    cr_assert_str_eq(rg_optim_names(), "sgd, adam, adamw");
    cr_assert_null(rg_optim_new("lamb", &empty, NULL));
    cr_assert(strstr(rg_last_error(), "'lamb'") && strstr(rg_last_error(), "sgd, adam, adamw"),
              "%s", rg_last_error());
    cr_assert_null(rg_optim_new("adam", &empty, "lr=0.1,momentum=0.9"));
    cr_assert(strstr(rg_last_error(), "adam has no option 'momentum'") &&
                  strstr(rg_last_error(), "lr, beta1, beta2, eps, weight_decay"),
              "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr=fast"));
    cr_assert(strstr(rg_last_error(), "lr=fast: not a number"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr=0.1,nesterov=maybe"));
    cr_assert(strstr(rg_last_error(), "not a boolean"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr=0.1,nesterov=1"), "Nesterov needs momentum");
    cr_assert(strstr(rg_last_error(), "Nesterov"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("adam", &empty, "beta2=1"));
    cr_assert(strstr(rg_last_error(), "betas"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr"));
    cr_assert(strstr(rg_last_error(), "not key=value"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr=0.1,lr=0.2")); /* the last won, silently */
    cr_assert(strstr(rg_last_error(), "sgd: option 'lr' given twice"), "%s", rg_last_error());
    cr_assert_null(rg_optim_new("sgd", &empty, "lr=0.1,,momentum=0.9"));
    cr_assert(strstr(rg_last_error(), "an empty option in 'lr=0.1,,momentum=0.9'"), "%s",
              rg_last_error());
    rg_optim *trailing = rg_optim_new("sgd", &empty, "lr=0.1,momentum=0.9,"); /* a comma ends */
    cr_assert_not_null(trailing, "%s", rg_last_error());
    rg_optim_free(trailing);
    rg_optim *o = rg_optim_new("sgd", &empty, "");
    cr_assert_not_null(o, "%s", rg_last_error());
    cr_assert_float_eq(rg_optim_get_lr(o), 0.01f, 0, "sgd's registry default");
    cr_assert_str_eq(rg_optim_kind(o), "sgd");
    rg_optim_free(o);
    o = rg_optim_new("adamw", &empty, NULL);
    cr_assert_str_eq(rg_optim_kind(o), "adamw");
    cr_assert_float_eq(rg_optim_get_lr(o), 1e-3f, 0);
    rg_optim_free(o);
}

Test(optim_registry, a_tensor_listed_twice_is_refused_naming_both) {
    rg_tensor *w = rg_tensor_new(RG_F32, RG_SHAPE(3), RG_CPU),
              *b = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU);
    rg_named_tensor items[] = {
        {"a.weight", w, false}, {"a.bias", b, false}, {"tied.weight", w, false}};
    rg_param_list twice = {items, 3}, once = {items, 2};
    const char *names[] = {"sgd", "adam", "adamw"};
    for (int k = 0; k < 3; k++) {
        cr_assert_null(rg_optim_new(names[k], &twice, "lr=0.1"), "%s", names[k]);
        cr_assert(rg_last_status() == RG_EINVAL &&
                      strstr(rg_last_error(), "a.weight and tied.weight"),
                  "%s: %s", names[k], rg_last_error());
        rg_optim *o = rg_optim_new(names[k], &once, "lr=0.1");
        cr_assert_not_null(o, "%s: %s", names[k], rg_last_error());
        rg_optim_free(o);
    }
    rg_tensor_free(w), rg_tensor_free(b);
}

Test(optim_state, names_kinds_and_per_parameter_step_counts) {
    float a0[NA] = {0}, b0[NB] = {0}, g[NA] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    two_params tp;
    two_params_init(&tp, a0, b0);
    rg_optim *opt = rg_adam_new(&tp.list, NULL);
    cr_assert_str_eq(rg_optim_kind(opt), "adam");
    cr_assert_float_eq(rg_optim_get_lr(opt), 1e-3f, 0, "torch's default lr");
    const rg_param_list *st = rg_optim_state(opt);
    const char *names[] = {"optim.step",
                           "optim.state.a.step",
                           "optim.state.a.exp_avg",
                           "optim.state.a.exp_avg_sq",
                           "optim.state.b.step",
                           "optim.state.b.exp_avg",
                           "optim.state.b.exp_avg_sq"};
    cr_assert_eq(st->n, 7);
    for (int i = 0; i < 7; i++) cr_assert_str_eq(st->items[i].name, names[i]);
    set_grad(tp.a, g);
    rg_optim_step(opt);
    rg_optim_step(opt);
    cr_assert_eq(*(int64_t *)rg_param_list_find(st, "optim.step")->tensor->data, 2);
    cr_assert_eq(*(int64_t *)rg_param_list_find(st, "optim.state.a.step")->tensor->data, 2);
    cr_assert_eq(*(int64_t *)rg_param_list_find(st, "optim.state.b.step")->tensor->data, 0,
                 "a parameter without a gradient is skipped");
    for (int i = 0; i < NB; i++) cr_assert_float_eq(rg_tensor_f32(tp.b)[i], 0.0f, 0, "b unchanged");
    rg_optim_free(opt);
    rg_optim *sgd = rg_sgd_new(&tp.list, &(rg_sgd_opts){.lr = 0.1f});
    cr_assert_eq(rg_optim_state(sgd)->n, 3, "plain SGD keeps no momentum buffer");
    rg_optim_free(sgd);
    rg_optim *w = rg_adamw_new(&tp.list, NULL);
    cr_assert_str_eq(rg_optim_kind(w), "adamw");
    rg_optim_free(w);
    rg_tensor_free(tp.a), rg_tensor_free(tp.b);
}

Test(optim_zero_grad, zeroes_in_place_without_reallocating) {
    float a0[NA] = {0}, b0[NB] = {0}, g[NA];
    for (int i = 0; i < NA; i++) g[i] = (float)i + 1;
    two_params tp;
    two_params_init(&tp, a0, b0);
    set_grad(tp.a, g);
    rg_tensor *grad = tp.a->grad;
    void *data = grad->data;
    rg_optim *opt = rg_sgd_new(&tp.list, &(rg_sgd_opts){.lr = 0.1f});
    rg_optim_zero_grad(opt);
    cr_assert_eq(tp.a->grad, grad, "same gradient tensor");
    cr_assert_eq(tp.a->grad->data, data, "same storage (it may be a DDP bucket view)");
    for (int i = 0; i < NA; i++) cr_assert_float_eq(rg_tensor_f32(grad)[i], 0.0f, 0);
    cr_assert_null(tp.b->grad, "a missing gradient stays missing");
    rg_optim_free(opt);
    rg_tensor_free(tp.a), rg_tensor_free(tp.b);
}

/* More parameters than one zero_f32_many call takes (128), every other one without a gradient,
 * and one gradient of no elements: each existing gradient is zeroed, the rest stay missing. */
Test(optim_zero_grad, zeroes_gradients_in_batches) {
    enum { N = 301 };
    rg_named_tensor items[N];
    char names[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        int64_t len = i == 7 ? 0 : 1 + i % 5;
        rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(len), RG_CPU);
        rg_tensor_set_requires_grad(t, true);
        if (i % 2 == 0) {
            t->grad = rg_tensor_new(RG_F32, RG_SHAPE(len), RG_CPU);
            rg_tensor_fill_(t->grad, 3.0f);
        }
        items[i] = (rg_named_tensor){names[i], t, false};
    }
    rg_param_list list = {items, N};
    rg_optim *opt = rg_sgd_new(&list, &(rg_sgd_opts){.lr = 0.1f});
    rg_optim_zero_grad(opt);
    for (int i = 0; i < N; i++) {
        const rg_tensor *g = items[i].tensor->grad;
        cr_assert_eq(g != NULL, i % 2 == 0, "parameter %d", i);
        for (int64_t k = 0; g && k < g->numel; k++)
            cr_assert_eq(rg_tensor_f32(g)[k], 0.0f, "parameter %d element %lld", i, (long long)k);
    }
    rg_optim_free(opt);
    for (int i = 0; i < N; i++) rg_tensor_free(items[i].tensor);
}

Test(optim_buffers, buffers_are_not_optimized) {
    rg_tensor *w = rgt_param(RG_SHAPE(3), -1, 1, 1), *running = rgt_uniform(RG_SHAPE(3), -1, 1, 2);
    rg_named_tensor items[] = {{"w", w, false}, {"running_mean", running, true}};
    rg_param_list list = {items, 2};
    rg_optim *opt = rg_adam_new(&list, NULL);
    cr_assert_eq(rg_optim_state(opt)->n, 4, "optim.step + w's step, exp_avg, exp_avg_sq");
    rg_optim_free(opt);
    rgt_free_all(2, (rg_tensor *[]){w, running});
}

Test(optim_misuse, nesterov_without_momentum_aborts, .signal = SIGABRT) {
    rg_param_list empty = {0};
    rg_sgd_new(&empty, &(rg_sgd_opts){.lr = 0.1f, .nesterov = true});
}

Test(optim_misuse, sgd_without_learning_rate_aborts, .signal = SIGABRT) {
    rg_param_list empty = {0};
    rg_sgd_new(&empty, &(rg_sgd_opts){.momentum = 0.9f});
}

Test(optim_misuse, adam_beta_of_one_aborts, .signal = SIGABRT) {
    rg_param_list empty = {0};
    rg_adam_new(&empty, &(rg_adam_opts){.beta2 = 1.0f});
}

Test(optim_misuse, negative_learning_rate_aborts, .signal = SIGABRT) {
    rg_param_list empty = {0};
    rg_optim *opt = rg_adam_new(&empty, NULL);
    rg_optim_set_lr(opt, -1.0f);
}
