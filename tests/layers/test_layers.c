/* Layers: output shapes, PyTorch parameter names and layouts, default initialisation bounds,
 * gradients reaching every parameter, dropout streams, and API misuse. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rgtest.h"

static void free_layer_and_input(rg_layer *l, rg_tensor *x) {
    rg_layer_free(l);
    rg_tensor_free(x);
}

Test(layers_linear, names_shapes_and_forward_match_rg_linear) {
    rg_rng_stream init = {.seed = 7};
    rg_layer *l = rg_linear_new("fc1", 6, 3, &init);
    const rg_param_list *p = rg_layer_params(l);
    cr_assert_eq(p->n, 2);
    cr_assert_str_eq(p->items[0].name, "fc1.weight");
    cr_assert_str_eq(p->items[1].name, "fc1.bias");
    cr_assert_eq(p->items[0].tensor->ndim, 2);
    cr_assert_eq(p->items[0].tensor->shape[0], 3, "weight is [out, in]");
    cr_assert_eq(p->items[0].tensor->shape[1], 6);
    cr_assert_eq(p->items[1].tensor->shape[0], 3);
    cr_assert(rg_tensor_requires_grad(p->items[0].tensor) && !p->items[0].is_buffer);
    rg_tensor *x = rgt_uniform(RG_SHAPE(5, 6), -1, 1, 1);
    rg_scope_begin();
    rg_tensor *y = rg_layer_forward(l, x, RG_TRAIN);
    rg_tensor *want = rg_linear(x, p->items[0].tensor, p->items[1].tensor);
    cr_assert_eq(y->shape[0], 5);
    cr_assert_eq(y->shape[1], 3);
    rgt_assert_close(rg_tensor_f32(y), rg_tensor_f32(want), 15, 0, 0, "Linear layer");
    rg_scope_end();
    free_layer_and_input(l, x);
}

Test(layers_conv2d, oihw_weight_output_shape_and_optional_bias) {
    rg_rng_stream init = {.seed = 8};
    rg_layer *c = rg_conv2d_new("layer1.0.conv1", 3, 5, 3,
                                &(rg_conv2d_opts){.stride = 2, .padding = 1}, &init);
    const rg_param_list *p = rg_layer_params(c);
    cr_assert_eq(p->n, 2);
    cr_assert_str_eq(p->items[0].name, "layer1.0.conv1.weight");
    int64_t want_w[] = {5, 3, 3, 3};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p->items[0].tensor->shape[i], want_w[i], "OIHW dim %d", i);
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 9, 8), -1, 1, 2);
    rg_scope_begin();
    rg_tensor *y = rg_layer_forward(c, x, RG_EVAL);
    int64_t want_y[] = {2, 5, 5, 4}; /* (9 + 2 - 3)/2 + 1 = 5, (8 + 2 - 3)/2 + 1 = 4 */
    for (int i = 0; i < 4; i++) cr_assert_eq(y->shape[i], want_y[i], "output dim %d", i);
    rg_scope_end();
    rg_layer *nb = rg_conv2d_new("conv", 3, 4, 1, &(rg_conv2d_opts){.no_bias = true}, &init);
    cr_assert_eq(rg_layer_params(nb)->n, 1, "no_bias: only the weight");
    rg_layer_free(nb);
    free_layer_and_input(c, x);
}

/* Draws a big layer and checks the values lie in +-1/sqrt(fan_in), fill the range, and have the
 * uniform distribution's mean 0 and variance bound^2/3. */
static void check_uniform(const rg_tensor *t, double bound, const char *what) {
    const float *v = rg_tensor_f32(t);
    double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < t->numel; i++) {
        sum += v[i], sq += (double)v[i] * v[i];
        lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    }
    double n = (double)t->numel, mean = sum / n, var = sq / n - mean * mean;
    double fill = 1 - 20 / n; /* P(max below it) = e^-10 */
    cr_assert(lo >= -bound && hi <= bound, "%s: values in [%g, %g], bound %g", what, lo, hi, bound);
    cr_assert(lo < -fill * bound && hi > fill * bound, "%s: range [%g, %g] does not fill +-%g",
              what, lo, hi, bound);
    /* five standard errors: of the mean, bound/sqrt(3n); of the variance, sqrt(0.8/n) relative */
    cr_assert(fabs(mean) < 5 * bound / sqrt(3 * n), "%s: mean %g", what, mean);
    cr_assert(fabs(var / (bound * bound / 3) - 1) < 5 * sqrt(0.8 / n), "%s: variance %g, want %g",
              what, var, bound * bound / 3);
}

Test(layers_init, default_init_is_uniform_within_one_over_sqrt_fan_in) {
    rg_rng_stream init = {.seed = 11};
    rg_layer *lin = rg_linear_new("fc", 300, 200, &init);
    check_uniform(rg_layer_params(lin)->items[0].tensor, 1 / sqrt(300.0), "linear weight");
    rg_layer *conv = rg_conv2d_new("conv", 16, 600, 3, NULL, &init);
    check_uniform(rg_layer_params(conv)->items[0].tensor, 1 / sqrt(16 * 9.0), "conv weight");
    check_uniform(rg_layer_params(conv)->items[1].tensor, 1 / sqrt(16 * 9.0), "conv bias");
    rg_layer *wide = rg_linear_new("fc", 4, 6000, &init);
    check_uniform(rg_layer_params(wide)->items[1].tensor, 0.5, "linear bias");
    rg_layer_free(lin), rg_layer_free(conv), rg_layer_free(wide);
}

Test(layers_init, same_seed_same_weights_and_stream_advances) {
    rg_rng_stream a = {.seed = 5}, b = {.seed = 5};
    rg_layer *l1 = rg_linear_new("fc", 10, 7, &a), *l2 = rg_linear_new("fc", 10, 7, &b);
    cr_assert_eq(a.offset, b.offset);
    cr_assert_geq(a.offset, 77, "the stream advanced past weight and bias");
    const rg_tensor *w1 = rg_layer_params(l1)->items[0].tensor,
                    *w2 = rg_layer_params(l2)->items[0].tensor;
    cr_assert(memcmp(w1->data, w2->data, rg_tensor_nbytes(w1)) == 0);
    rg_layer *l3 = rg_linear_new("fc", 10, 7, &a); /* continues the stream: different numbers */
    cr_assert(memcmp(w1->data, rg_layer_params(l3)->items[0].tensor->data, rg_tensor_nbytes(w1)) !=
              0);
    cr_assert_neq(rg_seed_derive(5, 0), rg_seed_derive(5, 1));
    cr_assert_neq(rg_seed_derive(5, 0), rg_seed_derive(6, 0));
    rg_layer_free(l1), rg_layer_free(l2), rg_layer_free(l3);
}

Test(layers_sequential, concatenates_names_and_runs_children_in_order) {
    rg_rng_stream init = {.seed = 3};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 1, 2, 3, NULL, &init));
    rg_layer_add(net, rg_relu_new("relu"));
    rg_layer_add(net, rg_maxpool2d_new("pool", 2, 0, 0));
    rg_layer_add(net, rg_flatten_new("flatten"));
    rg_layer_add(net, rg_linear_new("fc1", 2 * 3 * 3, 4, &init));
    const char *names[] = {"conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias"};
    const rg_param_list *p = rg_layer_params(net);
    cr_assert_eq(p->n, 4);
    for (int i = 0; i < 4; i++) cr_assert_str_eq(p->items[i].name, names[i]);
    cr_assert_eq(rg_param_list_find(p, "fc1.weight")->tensor, p->items[2].tensor);
    cr_assert_null(rg_param_list_find(p, "fc2.weight"));
    cr_assert_eq(rg_param_list_numel(p), 2 * 9 + 2 + 18 * 4 + 4);
    rg_tensor *x = rgt_uniform(RG_SHAPE(3, 1, 8, 8), -1, 1, 4);
    rg_scope_begin();
    rg_tensor *y = rg_layer_forward(net, x, RG_TRAIN); /* 8 -> conv 6 -> pool 3 -> 18 -> 4 */
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 3);
    cr_assert_eq(y->shape[1], 4);
    rg_backward(rg_sum(y));
    for (int i = 0; i < 4; i++) {
        const rg_tensor *g = p->items[i].tensor->grad;
        cr_assert(g && rg_tensor_same_shape(g, p->items[i].tensor), "%s has a gradient", names[i]);
        double s = 0;
        for (int64_t k = 0; k < g->numel; k++) s += fabs(rg_tensor_f32(g)[k]);
        cr_assert_gt(s, 0, "%s: gradient is not all zero", names[i]);
    }
    rg_scope_end();
    free_layer_and_input(net, x);
}

/* The op that made y, as the tape names it. */
static const char *made_by(const rg_tensor *y) {
    return y->grad_fn ? ((const rg_node *)y->grad_fn)->op : "(leaf)";
}

Test(layers_sequential, fuses_a_conv2d_and_the_relu_after_it_unless_told_not_to) {
    rg_rng_stream init = {.seed = 8};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 2, 4, 3, NULL, &init));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_conv2d_new("conv2", 4, 4, 3, NULL, &init)); /* last: nothing to fuse */
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 2, 9, 9), -1, 1, 5);
    rg_scope_begin();
    rg_tensor *y = rg_layer_forward(net, x, RG_TRAIN);
    cr_assert_str_eq(made_by(y), "conv2d");
    cr_assert_str_eq(made_by(((const rg_node *)y->grad_fn)->in[0]), "conv2d_relu");
    setenv("RG_FUSE", "0", 1);
    y = rg_layer_forward(net, x, RG_TRAIN);
    unsetenv("RG_FUSE");
    cr_assert_str_eq(made_by(((const rg_node *)y->grad_fn)->in[0]), "relu");
    y = rg_sequential_forward_range(net, 0, 2, x, RG_TRAIN); /* a pipeline stage's share */
    cr_assert_str_eq(made_by(y), "conv2d_relu");
    cr_assert_str_eq(made_by(rg_sequential_forward_range(net, 1, 3, y, RG_TRAIN)), "conv2d");
    cr_assert_eq(rg_sequential_forward_range(net, 2, 2, y, RG_TRAIN), y); /* an empty range */
    rg_scope_end();
    cr_assert(rg_layer_is_relu(net->children[1]));
    cr_assert(!rg_layer_is_relu(net->children[0]));
    cr_assert(!rg_layer_is_relu(NULL));
    free_layer_and_input(net, x);
}

Test(layers_sequential, fuses_a_conv2d_relu_and_maxpool2d_into_one_op) {
    rg_rng_stream init = {.seed = 9};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 2, 4, 3, NULL, &init));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_maxpool2d_new("pool1", 2, 0, 0));
    rg_layer_add(net, rg_conv2d_new("conv2", 4, 4, 3, NULL, &init));
    rg_layer_add(net, rg_maxpool2d_new("pool2", 2, 0, 0)); /* no ReLU between: not fused */
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 2, 16, 16), -1, 1, 5);
    rg_scope_begin();
    rg_tensor *y = rg_layer_forward(net, x, RG_TRAIN); /* 16 -> 14 -> 7 -> 5 -> 2 */
    cr_assert_eq(y->shape[2], 2);
    cr_assert_str_eq(made_by(y), "max_pool2d");
    const rg_tensor *c2 = ((const rg_node *)y->grad_fn)->in[0];
    cr_assert_str_eq(made_by(c2), "conv2d");
    const rg_tensor *p1 = ((const rg_node *)c2->grad_fn)->in[0];
    cr_assert_str_eq(made_by(p1), "conv2d_relu_maxpool2d");
    cr_assert_eq(p1->shape[2], 7);
    /* a pipeline stage that ends after the ReLU: conv + ReLU only */
    cr_assert_str_eq(made_by(rg_sequential_forward_range(net, 0, 2, x, RG_TRAIN)), "conv2d_relu");
    setenv("RG_FUSE", "0", 1);
    y = rg_layer_forward(net, x, RG_TRAIN);
    unsetenv("RG_FUSE");
    c2 = ((const rg_node *)y->grad_fn)->in[0];
    cr_assert_str_eq(made_by(((const rg_node *)c2->grad_fn)->in[0]), "max_pool2d");
    rg_scope_end();
    free_layer_and_input(net, x);
}

Test(layers_sequential, fuses_a_batchnorm2d_and_the_relu_after_it_in_training_and_evaluation) {
    rg_rng_stream init = {.seed = 10};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 2, 4, 3, NULL, &init));
    rg_layer_add(net, rg_batchnorm2d_new("bn1", 4));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 2, 9, 9), -1, 1, 5);
    rg_scope_begin();
    for (int train = 0; train < 2; train++) {
        rg_tensor *y = rg_layer_forward(net, x, train ? RG_TRAIN : RG_EVAL);
        cr_assert_str_eq(made_by(y), "batch_norm2d_relu");
        cr_assert_str_eq(made_by(((const rg_node *)y->grad_fn)->in[0]), "conv2d");
    }
    setenv("RG_FUSE", "0", 1);
    rg_tensor *y = rg_layer_forward(net, x, RG_TRAIN);
    unsetenv("RG_FUSE");
    cr_assert_str_eq(made_by(y), "relu");
    cr_assert_str_eq(made_by(((const rg_node *)y->grad_fn)->in[0]), "batch_norm2d");
    rg_scope_end();
    free_layer_and_input(net, x);
}

Test(layers_sequential, a_range_past_the_children_stops_with_a_message, .signal = SIGABRT) {
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 5);
    rg_scope_begin();
    rg_sequential_forward_range(net, 0, 2, x, RG_TRAIN);
}

/* Logits, every gradient and every float buffer (BatchNorm's running statistics) after each of
 * two training steps of a model (the CNN with dropout on, or resnet20, whose conv, bn, relu fuse
 * the BatchNorm2d and the ReLU), fused and not; NULL for an int64 buffer. */
static void two_steps(const char *model, bool fused, float **out, int *nout) {
    if (!fused) setenv("RG_FUSE", "0", 1);
    rg_model *m = rg_model_new_by_name(model, 21);
    const rg_param_list *p = rg_model_params(m);
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 1, 28, 28), 0, 1, 6); /* both are built for 1x28x28 */
    *nout = 0;
    for (int step = 0; step < 2; step++) {
        rg_scope_begin();
        rg_tensor *y = rg_model_forward(m, x, RG_TRAIN);
        rg_backward(rg_sum(rg_mul(y, y)));
        out[(*nout)++] = rgt_copy_out(y);
        for (int i = 0; i < p->n; i++) {
            const rg_named_tensor *it = &p->items[i];
            const rg_tensor *t = it->is_buffer ? it->tensor : it->tensor->grad;
            out[(*nout)++] = t->dtype == RG_F32 ? rgt_copy_out(t) : NULL;
            if (!it->is_buffer) rg_zero_grad(it->tensor);
        }
        rg_scope_end();
    }
    rg_tensor_free(x);
    rg_model_free(m);
    unsetenv("RG_FUSE");
}

static void fused_trains_bit_for_bit(const char *model) {
    rg_set_num_threads(2);
    static float *want[1024], *got[1024];
    int nwant, ngot;
    rg_model *m = rg_model_new_by_name(model, 21); /* for the parameters' names and sizes */
    const rg_param_list *p = rg_model_params(m);
    cr_assert(2 * (p->n + 1) <= 1024, "%s: too many tensors", model);
    two_steps(model, false, want, &nwant);
    two_steps(model, true, got, &ngot);
    cr_assert_eq(nwant, ngot);
    int64_t logits = 4 * 10;
    for (int i = 0; i < nwant; i++) {
        int pi = i % (p->n + 1) - 1; /* -1: the logits, else parameter pi's gradient */
        int64_t n = pi < 0 ? logits : p->items[pi].tensor->numel;
        cr_assert_eq(!got[i], !want[i]);
        cr_assert(!want[i] || memcmp(got[i], want[i], (size_t)n * sizeof(float)) == 0,
                  "%s step %d: %s differs", model, i / (p->n + 1),
                  pi < 0 ? "the logits" : p->items[pi].name);
        free(got[i]), free(want[i]);
    }
    rg_model_free(m);
    rg_set_num_threads(1);
}

Test(layers_sequential, the_fused_cnn_trains_bit_for_bit_as_the_unfused_one) {
    fused_trains_bit_for_bit("cnn");
}

Test(layers_sequential, the_fused_resnet20_trains_bit_for_bit_as_the_unfused_one) {
    fused_trains_bit_for_bit("resnet20");
}

/* BasicBlocks with a downsample, whose gradient meets the branch's at the block's input */
Test(layers_sequential, the_fused_resnet18_trains_bit_for_bit_as_the_unfused_one) {
    fused_trains_bit_for_bit("resnet18");
}

/* Bottlenecks: two BatchNorm2d + ReLU pairs and a downsample in the first block of each stage */
Test(layers_sequential, the_fused_resnet50_trains_bit_for_bit_as_the_unfused_one) {
    fused_trains_bit_for_bit("resnet50");
}

/* How many nodes of the graph behind y (each once; index = its place on the tape) are op `op`. */
static int count_ops(const rg_tensor *y, const char *op, bool *seen) {
    const rg_node *n = y ? (const rg_node *)y->grad_fn : NULL;
    if (!n) return 0;
    cr_assert(n->index >= 0 && n->index < 4096, "tape position %lld", (long long)n->index);
    if (seen[n->index]) return 0;
    seen[n->index] = true;
    int k = strcmp(n->op, op) == 0;
    for (int i = 0; i < n->n_in; i++) k += count_ops(n->in[i], op, seen);
    return k;
}

/* The residual blocks run their branch as a Sequential's range, so each block's first BatchNorm2d
 * and ReLU fuse too (resnet20: the stem's and one in each of the 9 blocks), and the last
 * BatchNorm2d, the residual add and the ReLU run as one op; with RG_FUSE=0 every ReLU is its own
 * op again (the stem's, and two in each block). */
Test(layers_sequential, resnet_blocks_fuse_their_batchnorms_add_and_relus) {
    for (int fused = 1; fused >= 0; fused--) {
        if (!fused) setenv("RG_FUSE", "0", 1);
        rg_model *m = rg_model_new_by_name("resnet20", 21);
        rg_tensor *x = rgt_uniform(RG_SHAPE(2, 1, 28, 28), 0, 1, 6);
        rg_scope_begin();
        rg_tensor *y = rg_model_forward(m, x, RG_TRAIN);
        static bool seen[4096];
        memset(seen, 0, sizeof seen);
        int bn_relu = count_ops(y, "batch_norm2d_relu", seen);
        memset(seen, 0, sizeof seen);
        int bn_add_relu = count_ops(y, "batch_norm2d_add_relu", seen);
        memset(seen, 0, sizeof seen);
        int relu = count_ops(y, "relu", seen);
        memset(seen, 0, sizeof seen);
        int add = count_ops(y, "add", seen);
        rg_scope_end();
        unsetenv("RG_FUSE");
        cr_assert_eq(bn_relu, fused ? 10 : 0, "fused %d: %d batch_norm2d_relu", fused, bn_relu);
        cr_assert_eq(bn_add_relu, fused ? 9 : 0, "fused %d: %d batch_norm2d_add_relu", fused,
                     bn_add_relu);
        cr_assert_eq(relu, fused ? 0 : 19, "fused %d: %d relu", fused, relu);
        cr_assert_eq(add, fused ? 0 : 9, "fused %d: %d add", fused, add);
        rg_tensor_free(x);
        rg_model_free(m);
    }
}

Test(layers_dropout, stream_advances_only_in_training_and_rate_can_change) {
    rg_layer *d = rg_dropout_new("dropout1", 0.5f, 99);
    rg_rng_stream *s = rg_dropout_stream(d);
    cr_assert_not_null(s);
    cr_assert_eq(s->seed, 99);
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 10), 1, 2, 5);
    rg_scope_begin();
    cr_assert_eq(rg_layer_forward(d, x, RG_EVAL), x, "evaluation: identity");
    cr_assert_eq(s->offset, 0);
    rg_tensor *y1 = rg_layer_forward(d, x, RG_TRAIN);
    uint64_t after_one = s->offset;
    cr_assert_geq(after_one, 40);
    rg_tensor *y2 = rg_layer_forward(d, x, RG_TRAIN);
    cr_assert_eq(s->offset, 2 * after_one);
    int zeros = 0;
    bool differ = false;
    for (int i = 0; i < 40; i++) {
        float v = rg_tensor_f32(y1)[i], xi = rg_tensor_f32(x)[i];
        cr_assert(v == 0.0f || fabsf(v - 2 * xi) < 1e-6f, "kept values are scaled by 1/(1-p)");
        zeros += v == 0.0f;
        differ |= v != rg_tensor_f32(y2)[i];
    }
    cr_assert(zeros > 5 && zeros < 35, "%d of 40 dropped at p = 0.5", zeros);
    cr_assert(differ, "the second forward draws a new mask");
    cr_assert(rg_dropout_set_p(d, 0.0f));
    cr_assert_float_eq(rg_dropout_p(d), 0.0f, 0);
    cr_assert_eq(rg_layer_forward(d, x, RG_TRAIN), x, "p = 0 disables dropout");
    rg_scope_end();
    rg_layer *relu = rg_relu_new("r");
    cr_assert_null(rg_dropout_stream(relu));
    cr_assert_not(rg_dropout_set_p(relu, 0.3f));
    cr_assert_float_eq(rg_dropout_p(relu), -1.0f, 0);
    rg_layer_free(relu);
    free_layer_and_input(d, x);
}

Test(layers_params, to_device_on_the_same_device_keeps_everything) {
    rg_rng_stream init = {.seed = 1};
    rg_layer *l = rg_linear_new("fc", 3, 2, &init);
    const rg_param_list *p = rg_layer_params(l);
    void *data = p->items[0].tensor->data;
    cr_assert_eq(rg_param_list_to_device(p, RG_CPU), RG_OK);
    cr_assert_eq(p->items[0].tensor->data, data);
    rg_layer_free(l);
}

Test(layers_misuse, bad_dropout_probability_aborts, .signal = SIGABRT) {
    rg_dropout_new("d", 1.5f, 0);
}

Test(layers_misuse, linear_with_zero_inputs_aborts, .signal = SIGABRT) {
    rg_rng_stream init = {0};
    rg_linear_new("fc", 0, 3, &init);
}

Test(layers_misuse, adding_a_child_to_a_layer_with_parameters_aborts, .signal = SIGABRT) {
    rg_rng_stream init = {0};
    rg_layer *l = rg_linear_new("fc", 2, 3, &init);
    rg_layer_add(l, rg_relu_new("r"));
}

/* A container frees its children: one added twice (a ReLU reused, as nn.Sequential allows) was
 * freed twice, a segfault at rg_layer_free; now the second add stops, naming both. */
Test(layers_misuse, adding_a_layer_twice_aborts, .signal = SIGABRT) {
    rg_layer *net = rg_sequential_new("net"), *relu = rg_relu_new("act");
    rg_layer_add(net, relu);
    rg_layer_add(net, rg_relu_new("other"));
    rgt_expect_fatal("layer 'act' is already in 'net'");
    rg_layer_add(net, relu);
}

Test(layers_misuse, adding_a_layer_to_a_second_container_aborts, .signal = SIGABRT) {
    rg_layer *a = rg_sequential_new("a"), *b = rg_sequential_new("b"), *relu = rg_relu_new("r");
    rg_layer_add(a, relu);
    rgt_expect_fatal("layer 'r' is already in 'a'");
    rg_layer_add(b, relu);
}

/* Two tensors of one name were accepted until rg_checkpoint_save stopped on them. */
Test(layers_misuse, two_layers_of_one_name_abort, .signal = SIGABRT) {
    rg_rng_stream init = {0};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_linear_new("fc", 2, 3, &init));
    rg_layer_add(net, rg_relu_new("fc")); /* no tensors: no clash */
    rgt_expect_fatal(
        "layer 'fc' has a tensor 'fc.weight', and so has another layer of 'the model'");
    rg_layer_add(net, rg_linear_new("fc", 3, 3, &init));
}

Test(layers_misuse, a_container_inside_itself_aborts, .signal = SIGABRT) {
    rg_layer *a = rg_sequential_new("a"), *b = rg_sequential_new("b");
    rg_layer_add(a, b);
    rgt_expect_fatal("layer 'a' would contain itself");
    rg_layer_add(b, a);
}

Test(layers_misuse, wrong_input_shape_aborts, .signal = SIGABRT) {
    rg_rng_stream init = {0};
    rg_layer *l = rg_linear_new("fc", 4, 3, &init);
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 5), -1, 1, 1);
    rg_scope_begin();
    rg_layer_forward(l, x, RG_TRAIN);
}
