/* The bundled models: PyTorch's parameter names, shapes and counts, the lookup by name, logits
 * shapes, train/eval behaviour of dropout, and overriding the dropout rate. */
#include "rgtest.h"

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[4];
} want_param;

static void check_params(const rg_model *m, const want_param *want, int n, int64_t numel) {
    const rg_param_list *p = rg_model_params(m);
    cr_assert_eq(p->n, n, "%s: %d tensors, want %d", rg_model_name(m), p->n, n);
    for (int i = 0; i < n; i++) {
        const rg_tensor *t = p->items[i].tensor;
        cr_assert_str_eq(p->items[i].name, want[i].name);
        cr_assert_eq(t->ndim, want[i].ndim, "%s", want[i].name);
        for (int d = 0; d < t->ndim; d++)
            cr_assert_eq(t->shape[d], want[i].shape[d], "%s dim %d", want[i].name, d);
    }
    cr_assert_eq(rg_param_list_numel(p), numel);
}

Test(models_cnn, names_and_shapes_are_pytorchs) {
    rg_model *m = rg_model_cnn(1);
    want_param want[] = {
        {"conv1.weight", 4, {32, 1, 3, 3}},  {"conv1.bias", 1, {32}},
        {"conv2.weight", 4, {64, 32, 3, 3}}, {"conv2.bias", 1, {64}},
        {"fc1.weight", 2, {128, 9216}},      {"fc1.bias", 1, {128}},
        {"fc2.weight", 2, {10, 128}},        {"fc2.bias", 1, {10}},
    };
    check_params(m, want, 8, 1199882); /* PyTorch's MNIST example has 1,199,882 parameters */
    cr_assert_str_eq(rg_model_name(m), "cnn");
    cr_assert_eq(rg_model_seed(m), 1);
    int ns;
    const rg_named_stream *st = rg_model_streams(m, &ns);
    cr_assert_eq(ns, 2);
    cr_assert_str_eq(st[0].name, "dropout1");
    cr_assert_str_eq(st[1].name, "dropout2");
    cr_assert_neq(st[0].stream->seed, st[1].stream->seed, "independent masks per layer");
    rg_model_free(m);
}

Test(models_mlp, names_and_shapes) {
    rg_model *m = rg_model_mlp(1);
    want_param want[] = {
        {"fc1.weight", 2, {256, 784}}, {"fc1.bias", 1, {256}},       {"fc2.weight", 2, {128, 256}},
        {"fc2.bias", 1, {128}},        {"fc3.weight", 2, {10, 128}}, {"fc3.bias", 1, {10}},
    };
    check_params(m, want, 6, 235146);
    rg_model_free(m);
}

Test(models_registry, lookup_by_name_and_clear_error_for_unknown) {
    for (int i = 0; rg_model_known_name(i); i++) {
        rg_model *m = rg_model_new_by_name(rg_model_known_name(i), 3);
        cr_assert_not_null(m, "%s", rg_model_known_name(i));
        cr_assert_str_eq(rg_model_name(m), rg_model_known_name(i));
        rg_model_free(m);
    }
    cr_assert_str_eq(rg_model_known_name(0), "cnn");
    cr_assert_null(rg_model_known_name(-1));
    cr_assert_null(rg_model_new_by_name("resnet9000", 3));
    cr_assert(strstr(rg_last_error(), "resnet9000") && strstr(rg_last_error(), "cnn, mlp"), "%s",
              rg_last_error());
}

Test(models_cnn, same_seed_same_weights_other_seed_other_weights) {
    rg_model *a = rg_model_cnn(5), *b = rg_model_cnn(5), *c = rg_model_cnn(6);
    const rg_tensor *wa = rg_model_params(a)->items[4].tensor;
    cr_assert(memcmp(wa->data, rg_model_params(b)->items[4].tensor->data, rg_tensor_nbytes(wa)) ==
              0);
    cr_assert(memcmp(wa->data, rg_model_params(c)->items[4].tensor->data, rg_tensor_nbytes(wa)) !=
              0);
    rg_model_free(a), rg_model_free(b), rg_model_free(c);
}

/* Forward twice in the given mode; returns whether the two logits differ. */
static bool forward_twice_differs(rg_model *m, rg_tensor *x, rg_mode mode) {
    rg_scope_begin();
    rg_tensor *y1 = rg_model_forward(m, x, mode), *y2 = rg_model_forward(m, x, mode);
    cr_assert_eq(y1->ndim, 2);
    cr_assert_eq(y1->shape[0], x->shape[0]);
    cr_assert_eq(y1->shape[1], 10);
    bool differ = memcmp(y1->data, y2->data, rg_tensor_nbytes(y1)) != 0;
    rg_scope_end();
    return differ;
}

Test(models_forward, eval_is_deterministic_train_draws_dropout_and_override_disables_it) {
    rg_model *models[] = {rg_model_cnn(2), rg_model_mlp(2)};
    rg_tensor *x = rgt_uniform(RG_SHAPE(3, 1, 28, 28), 0, 1, 9);
    for (int i = 0; i < 2; i++) {
        rg_model *m = models[i];
        int ns;
        const rg_named_stream *st = rg_model_streams(m, &ns);
        cr_assert_not(forward_twice_differs(m, x, RG_EVAL), "%s: eval", rg_model_name(m));
        cr_assert_eq(st[0].stream->offset, 0, "eval does not advance the streams");
        cr_assert(forward_twice_differs(m, x, RG_TRAIN), "%s: train uses dropout",
                  rg_model_name(m));
        cr_assert_gt(st[0].stream->offset, 0);
        rg_model_set_dropout(m, 0.0f);
        cr_assert_not(forward_twice_differs(m, x, RG_TRAIN), "%s: --dropout 0", rg_model_name(m));
    }
    rg_model_free(models[0]), rg_model_free(models[1]);
    rg_tensor_free(x);
}

Test(models_forward, to_device_cpu_is_a_no_op) {
    rg_model *m = rg_model_mlp(1);
    cr_assert_eq(rg_model_to_device(m, RG_CPU), RG_OK);
    cr_assert_eq(rg_model_params(m)->items[0].tensor->device.type, RG_DEV_CPU);
    rg_model_free(m);
}

Test(models_misuse, dropout_override_above_one_aborts, .signal = SIGABRT) {
    rg_model *m = rg_model_mlp(1);
    rg_model_set_dropout(m, 2.0f);
}
