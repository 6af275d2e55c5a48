/* Tests for the ResNets of models/resnet.c and the data-shaped model API (rg_model_new_for):
 * state_dict names, dtypes and shapes equal torchvision's (tests/data/resnet/<model>.names, made by
 * scripts/make_resnet_names.py); forward shapes with and without --small-input; torchvision's
 * initialisation and zero_init_residual; a CNN that cannot take the data's images is an error
 * naming the shape; the MLP and the CNN take the data's channels and classes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rgtest.h"

static rg_model *make(const char *name, int64_t c, int64_t h, int64_t w, int classes, bool small,
                      bool zero) {
    rg_model *m = NULL;
    rg_model_spec s = {.channels = c, .height = h, .width = w, .num_classes = classes,
                       .small_input = small, .zero_init_residual = zero};
    cr_assert_eq(rg_model_new_for(name, 1, &s, &m), RG_OK, "%s", rg_last_error());
    return m;
}

static void check_names(const char *name) {
    rg_model *m = make(name, 3, 32, 32, 10, false, false);
    const rg_param_list *p = rg_model_params(m);
    char path[64], line[256];
    snprintf(path, sizeof path, "resnet/%s.names", name);
    FILE *f = fopen(rgt_data_path(path), "r");
    cr_assert_not_null(f, "%s", rgt_data_path(path));
    int i = 0;
    while (fgets(line, sizeof line, f)) {
        cr_assert_lt(i, p->n, "%s: torchvision has more than our %d entries", name, p->n);
        const rg_tensor *t = p->items[i].tensor;
        char shape[96] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "",
                     (long long)t->shape[d]);
        char mine[256];
        snprintf(mine, sizeof mine, "%s %s %s\n", p->items[i].name,
                 t->dtype == RG_I64 ? "I64" : "F32", t->ndim ? shape : "()");
        cr_assert_str_eq(mine, line, "%s entry %d: ours %s torchvision %s", name, i, mine, line);
        cr_assert_eq(p->items[i].is_buffer, strstr(line, "running_") || strstr(line, "num_batches"));
        i++;
    }
    fclose(f);
    cr_assert_eq(i, p->n, "%s: %d torchvision entries, we have %d", name, i, p->n);
    rg_model_free(m);
}

Test(models_resnet, state_dicts_match_torchvision) {
    check_names("resnet18");
    check_names("resnet34");
    check_names("resnet50");
    check_names("resnet20");
}

static void check_forward(rg_model *m, int64_t n, int64_t c, int64_t h, int64_t w, int classes) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(n, c, h, w), -1, 1, 3);
    for (int mode = 0; mode < 2; mode++) {
        rg_scope_begin();
        rg_tensor *y = rg_model_forward(m, x, mode ? RG_TRAIN : RG_EVAL);
        cr_assert(y->ndim == 2 && y->shape[0] == n && y->shape[1] == classes, "%s: %s",
                  rg_model_name(m), rg_shape_str(y->ndim, y->shape, (char[64]){0}, 64));
        for (int64_t i = 0; i < y->numel; i++) cr_assert(isfinite(rg_tensor_f32(y)[i]));
        rg_scope_end();
    }
    rg_tensor_free(x);
}

Test(models_resnet, forward_shapes_for_the_datas_images) {
    rg_model *m = make("resnet20", 1, 28, 28, 7, false, false);
    check_forward(m, 2, 1, 28, 28, 7);
    rg_model_free(m);
    m = make("resnet18", 3, 20, 24, 5, true, false); /* small input: no max-pool */
    check_forward(m, 2, 3, 20, 24, 5);
    cr_assert_eq(rg_model_params(m)->items[0].tensor->shape[3], 3, "3x3 stem");
    rg_model_free(m);
    m = make("resnet50", 3, 33, 33, 4, false, false);
    check_forward(m, 2, 3, 33, 33, 4);
    cr_assert_eq(rg_model_params(m)->items[0].tensor->shape[3], 7, "7x7 stem");
    rg_model_free(m);
}

/* rg_model_bn_plane against the planes a forward pass makes: what reaches avgpool (the last
 * stage's output, the smallest planes any BatchNorm2d sees) at odd and tiny image sizes. */
Test(models_resnet, the_smallest_batchnorm_plane_is_the_last_stages) {
    static const struct {
        const char *name;
        int64_t h, w;
        bool small;
    } cases[] = {
        {"resnet18", 1, 1, false},   {"resnet18", 17, 28, false}, {"resnet18", 28, 28, false},
        {"resnet18", 33, 64, false}, {"resnet18", 7, 9, true},    {"resnet18", 28, 28, true},
        {"resnet50", 33, 30, false}, {"resnet50", 5, 3, true},    {"resnet20", 1, 1, false},
        {"resnet20", 7, 9, false},   {"resnet20", 28, 28, false}, {"resnet20", 33, 64, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t h = cases[k].h, w = cases[k].w;
        rg_model *m = make(cases[k].name, 1, h, w, 3, cases[k].small, false);
        rg_layer *root = rg_model_root(m);
        rg_tensor *x = rgt_uniform(RG_SHAPE(1, 1, h, w), -1, 1, 5);
        rg_scope_begin();
        rg_no_grad_begin();
        rg_tensor *f = rg_sequential_forward_range(root, 0, root->n_children - 3, x,
                                                   RG_EVAL); /* up to avgpool */
        rg_no_grad_end();
        cr_assert_eq(f->ndim, 4);
        cr_assert_eq(rg_model_bn_plane(m), f->shape[2] * f->shape[3],
                     "%s%s on %lldx%lld: rg_model_bn_plane %lld, the last stage %lldx%lld",
                     cases[k].name, cases[k].small ? " (small input)" : "", (long long)h,
                     (long long)w, (long long)rg_model_bn_plane(m), (long long)f->shape[2],
                     (long long)f->shape[3]);
        rg_scope_end();
        rg_tensor_free(x);
        rg_model_free(m);
    }
    rg_model *m = make("cnn", 1, 28, 28, 10, false, false);
    cr_assert_eq(rg_model_bn_plane(m), 0, "the CNN has no BatchNorm2d");
    rg_model_free(m);
}

Test(models_resnet, torchvision_initialisation_and_zero_init_residual) {
    rg_model *m = make("resnet18", 3, 32, 32, 10, false, true);
    const rg_param_list *p = rg_model_params(m);
    const rg_named_tensor *w = rg_param_list_find(p, "layer3.0.conv1.weight"); /* (256,128,3,3) */
    double ss = 0;
    for (int64_t i = 0; i < w->tensor->numel; i++) ss += pow(rg_tensor_f32(w->tensor)[i], 2);
    double std = sqrt(ss / (double)w->tensor->numel), want = sqrt(2.0 / (256 * 9));
    cr_assert(fabs(std - want) < 0.03 * want, "conv std %g, kaiming fan_out %g", std, want);
    cr_assert_eq(rg_tensor_f32(rg_param_list_find(p, "layer2.1.bn2.weight")->tensor)[5], 0.0f);
    cr_assert_eq(rg_tensor_f32(rg_param_list_find(p, "layer2.1.bn1.weight")->tensor)[5], 1.0f);
    cr_assert_eq(rg_tensor_f32(rg_param_list_find(p, "layer2.0.downsample.1.weight")->tensor)[0],
                 1.0f);
    rg_model_free(m);
}

Test(models_resnet, a_model_that_cannot_take_the_images_names_the_shape) {
    rg_model *m = (rg_model *)1;
    rg_model_spec s = {.channels = 3, .height = 32, .width = 32, .num_classes = 10};
    cr_assert_eq(rg_model_new_for("cnn", 1, &s, &m), RG_EINVAL);
    cr_assert_null(m);
    cr_assert(strstr(rg_last_error(), "3x32x32"), "%s", rg_last_error());
    cr_assert_eq(rg_model_new_for("resnet99", 1, &s, &m), RG_EINVAL);
    cr_assert(strstr(rg_last_error(), "resnet56"), "lists the known names: %s", rg_last_error());
    /* the MLP and the CNN take the data's channels and classes */
    rg_model *mlp = make("mlp", 3, 32, 32, 4, false, false);
    check_forward(mlp, 2, 3, 32, 32, 4);
    rg_model *cnn = make("cnn", 3, 28, 28, 5, false, false);
    check_forward(cnn, 2, 3, 28, 28, 5);
    rg_model_free(mlp), rg_model_free(cnn);
}
