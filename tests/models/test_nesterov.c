/* SGD with Nesterov momentum and no weight decay on the 1-D parameters (ringgrad-train
 * --nesterov --no-wd-bn-bias, the ResNet recipe):
 *  - which parameters of ResNet-20 keep weight decay (conv and dense weights) and which lose it
 *    (biases, BatchNorm weights and biases), also when the optimizer holds 1-D pieces named after
 *    the parameters, as ZeRO-1's shards and the parameter servers' do;
 *  - four training steps of ResNet-20 against torch.optim.SGD(nesterov=True) with two parameter
 *    groups (tests/data/nn/nesterov_ref.safetensors, scripts/make_reference_nesterov.py, whose
 *    formulas for the starting weights and the data are mirrored here), and Nesterov's result
 *    differs from plain momentum's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_ref.h"

enum { N = 8, STEPS = 4, CLASSES = 10 };
#define LR 0.02f
#define MOMENTUM 0.9f
#define WD 0.05f

static rg_model *resnet20(void) {
    rg_model *m = NULL;
    rg_model_spec s = {.channels = 3, .height = 8, .width = 8, .num_classes = CLASSES};
    cr_assert_eq(rg_model_new_for("resnet20", 1, &s, &m), RG_OK, "%s", rg_last_error());
    return m;
}

static bool is_1d(const char *name, const rg_param_list *p) {
    return rg_param_list_find(p, name)->tensor->ndim == 1;
}

Test(optim_decay, resnet20_decays_conv_and_dense_weights_only) {
    rg_model *m = resnet20();
    const rg_param_list *p = rg_model_params(m);
    rg_optim *o = rg_optim_new("sgd", p, "lr=0.1,momentum=0.9,weight_decay=5e-4");
    cr_assert_not_null(o, "%s", rg_last_error());
    int trainable = 0, one_d = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->items[i].is_buffer) continue;
        trainable++, one_d += p->items[i].tensor->ndim == 1;
        cr_assert(rg_optim_decays(o, p->items[i].name), "%s decays by default", p->items[i].name);
    }
    cr_assert_eq(rg_optim_exclude_decay_1d(o, p), one_d);
    cr_assert_eq(one_d, 2 * 19 + 2 * 2 + 1,
                 "19 BNs in the blocks and stem, 2 downsample BNs, fc.bias");
    static const char *const decayed[] = {"conv1.weight", "layer1.0.conv1.weight",
                                          "layer2.0.downsample.0.weight", "fc.weight"};
    static const char *const not_decayed[] = {"bn1.weight",
                                              "bn1.bias",
                                              "layer3.2.bn2.weight",
                                              "layer2.0.downsample.1.weight",
                                              "layer2.0.downsample.1.bias",
                                              "fc.bias"};
    for (size_t i = 0; i < sizeof decayed / sizeof *decayed; i++)
        cr_assert(rg_optim_decays(o, decayed[i]), "%s keeps weight decay", decayed[i]);
    for (size_t i = 0; i < sizeof not_decayed / sizeof *not_decayed; i++)
        cr_assert(!rg_optim_decays(o, not_decayed[i]), "%s has none", not_decayed[i]);
    int kept = 0;
    for (int i = 0; i < p->n; i++)
        if (!p->items[i].is_buffer) kept += rg_optim_decays(o, p->items[i].name);
    cr_assert_eq(kept, trainable - one_d);
    cr_assert(!rg_param_takes_decay(rg_param_list_find(p, "bn1.bias")->tensor));
    cr_assert(rg_param_takes_decay(rg_param_list_find(p, "fc.weight")->tensor));
    rg_optim_free(o);

    /* Pieces as ZeRO-1 shards them: 1-D views named after their parameters. The shapes that
     * decide are the model's, not the pieces'. */
    rg_tensor *piece[3];
    rg_named_tensor items[3];
    const char *names[3] = {"conv1.weight", "bn1.weight", "conv1.weight"};
    for (int i = 0; i < 3; i++) {
        piece[i] = rg_tensor_new(RG_F32, RG_SHAPE(5), RG_CPU);
        rg_tensor_set_requires_grad(piece[i], true);
        items[i] = (rg_named_tensor){.name = names[i], .tensor = piece[i]};
    }
    rg_param_list pieces = {.items = items, .n = 3};
    o = rg_optim_new("sgd", &pieces, "lr=0.1,weight_decay=5e-4");
    cr_assert_eq(rg_optim_exclude_decay_1d(o, p), 1, "bn1.weight: the only 1-D one held");
    cr_assert(rg_optim_decays(o, "conv1.weight") && !rg_optim_decays(o, "bn1.weight"));
    cr_assert_eq(rg_optim_exclude_decay(o, "conv1.weight"), 2, "both pieces of conv1.weight");
    cr_assert_eq(rg_optim_exclude_decay(o, "fc.weight"), 0, "not held here");
    rg_optim_free(o);
    for (int i = 0; i < 3; i++) rg_tensor_free(piece[i]);
    rg_model_free(m);
}

/* make_reference_nesterov.py's hash: frac(43758.5453 sin(a)) in [0, 1). */
static double u(double a) {
    double v = 43758.5453 * sin(a);
    return v - floor(v);
}

/* make_reference_nesterov.py's starting weights. */
static void init_weights(rg_model *m) {
    const rg_param_list *p = rg_model_params(m);
    int t = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->items[i].is_buffer) continue;
        rg_tensor *w = p->items[i].tensor;
        float *d = rg_tensor_f32(w);
        size_t len = strlen(p->items[i].name);
        bool weight = len >= 6 && strcmp(p->items[i].name + len - 6, "weight") == 0;
        for (int64_t j = 0; j < w->numel; j++) {
            double s = 2 * u(12.9898 * (double)j + 78.233 * t + 0.5) - 1;
            d[j] = (float)(w->ndim >= 2 ? s * sqrt(6.0 / (double)(w->numel / w->shape[0]))
                           : weight     ? 1 + 0.2 * s
                                        : 0.1 * s);
        }
        t++;
    }
}

/* Its batch k (scoped tensors). */
static void make_batch(int k, rg_tensor **x, rg_tensor **y) {
    *x = rg_tensor_empty(RG_F32, RG_SHAPE(N, 3, 8, 8), RG_CPU);
    *y = rg_tensor_empty(RG_I64, RG_SHAPE(N), RG_CPU);
    float *xp = rg_tensor_f32(*x);
    for (int64_t i = 0; i < (*x)->numel; i++)
        xp[i] = (float)(2 * u(12.9898 * (double)i + 78.233 * k + 1) - 1 + 0.2 * k);
    for (int n = 0; n < N; n++) ((int64_t *)(*y)->data)[n] = (3 * n + k) % CLASSES;
}

/* Trains four steps as the reference configuration `cfg` and compares; returns bn1.weight[0]. */
static float train_and_compare(rg_safetensors *f, const char *cfg, bool nesterov, bool no_wd_1d) {
    rg_model *m = resnet20();
    init_weights(m);
    const rg_param_list *p = rg_model_params(m);
    char opts[128], key[128];
    snprintf(opts, sizeof opts, "lr=%g,momentum=%g,weight_decay=%g,nesterov=%d", (double)LR,
             (double)MOMENTUM, (double)WD, nesterov);
    rg_optim *o = rg_optim_new("sgd", p, opts);
    cr_assert_not_null(o, "%s", rg_last_error());
    if (no_wd_1d) rg_optim_exclude_decay_1d(o, p);
    snprintf(key, sizeof key, "%s.loss", cfg);
    float *want_loss = nn_ref_read(f, key, "F32", STEPS);
    for (int k = 0; k < STEPS; k++) {
        rg_scope_begin();
        rg_tensor *x, *y;
        make_batch(k, &x, &y);
        rg_tensor *loss = rg_cross_entropy(rg_model_forward(m, x, RG_TRAIN), y);
        rg_backward(loss);
        rg_optim_step(o);
        rg_optim_zero_grad(o);
        float got = rg_tensor_item(loss);
        cr_assert(fabsf(got - want_loss[k]) <= 1e-4f + 1e-4f * fabsf(want_loss[k]),
                  "%s: loss of step %d is %.7g, PyTorch's %.7g", cfg, k + 1, (double)got,
                  (double)want_loss[k]);
        rg_scope_end();
    }
    for (int i = 0; i < p->n; i++) {
        const rg_named_tensor *e = &p->items[i];
        if (e->is_buffer || !(is_1d(e->name, p) || strcmp(e->name, "conv1.weight") == 0 ||
                              strcmp(e->name, "fc.weight") == 0))
            continue;
        snprintf(key, sizeof key, "%s.%s", cfg, e->name);
        float *want = nn_ref_read(f, key, "F32", e->tensor->numel);
        rgt_assert_close(rg_tensor_f32(e->tensor), want, e->tensor->numel, 1e-4, 1e-3, key);
        free(want);
    }
    float bn = rg_tensor_f32(rg_param_list_find(p, "bn1.weight")->tensor)[0];
    free(want_loss);
    rg_optim_free(o);
    rg_model_free(m);
    return bn;
}

Test(optim_decay, resnet20_sgd_nesterov_matches_pytorch) {
    rg_safetensors *f = nn_ref_open("nesterov_ref.safetensors");
    float nesterov = train_and_compare(f, "nesterov", true, true);
    float momentum = train_and_compare(f, "momentum", false, true);
    float all_decay = train_and_compare(f, "nesterov_all_decay", true, false);
    cr_assert(fabsf(nesterov - momentum) > 1e-4f, "Nesterov %g vs momentum %g", (double)nesterov,
              (double)momentum);
    cr_assert(fabsf(nesterov - all_decay) > 1e-6f, "decay on bn1.weight changes it");
    rg_safetensors_close(f);
}
