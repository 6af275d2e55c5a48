/* A small CNN-shaped model built from ringgrad layers, loaded from a state_dict that PyTorch
 * wrote (tests/data/nn/small_cnn_weights.safetensors, by scripts/make_reference_nn.py), gives
 * PyTorch's logits, loss and parameter gradients. This checks names, layouts (OIHW, [out,in],
 * C,H,W flatten order) and the whole forward and backward path against the reference framework. */
#include <math.h>

#include "nn_ref.h"

/* SmallCNN in the script: the CNN's layer sequence with 4 and 8 channels and 32 hidden units. */
static rg_model *small_cnn(void) {
    rg_rng_stream init = {.seed = 1};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 1, 4, 3, NULL, &init));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_conv2d_new("conv2", 4, 8, 3, NULL, &init));
    rg_layer_add(net, rg_relu_new("relu2"));
    rg_layer_add(net, rg_maxpool2d_new("pool", 2, 0, 0));
    rg_layer_add(net, rg_dropout_new("dropout1", 0.25f, 2));
    rg_layer_add(net, rg_flatten_new("flatten"));
    rg_layer_add(net, rg_linear_new("fc1", 8 * 12 * 12, 32, &init));
    rg_layer_add(net, rg_relu_new("relu3"));
    rg_layer_add(net, rg_dropout_new("dropout2", 0.5f, 3));
    rg_layer_add(net, rg_linear_new("fc2", 32, 10, &init));
    return rg_model_new("small_cnn", net, 1);
}

Test(models_reference, small_cnn_matches_pytorch_forward_and_backward) {
    rg_model *net = small_cnn();
    rg_status s =
        rg_checkpoint_load_weights(rgt_data_path("nn/small_cnn_weights.safetensors"), net);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    rg_safetensors *io = nn_ref_open("small_cnn_io.safetensors");
    float *x = nn_ref_read(io, "input", "F32", 4 * 28 * 28);
    int64_t *y = nn_ref_read(io, "labels", "I64", 4);
    float *logits = nn_ref_read(io, "logits", "F32", 40), *loss = nn_ref_read(io, "loss", "F32", 1);

    rg_scope_begin();
    rg_tensor *xt = rg_tensor_from_f32(RG_SHAPE(4, 1, 28, 28), x, RG_CPU);
    rg_tensor *yt = rg_tensor_empty(RG_I64, RG_SHAPE(4), RG_CPU);
    rg_tensor_copy_from_host(yt, y);
    rg_tensor *out = rg_model_forward(net, xt, RG_EVAL); /* eval: dropout is the identity */
    rgt_assert_close(rg_tensor_f32(out), logits, 40, 1e-5, 1e-4, "logits vs PyTorch");
    rg_tensor *l = rg_cross_entropy(out, yt);
    cr_assert_float_eq(rg_tensor_item(l), loss[0], 1e-5, "loss %g vs PyTorch %g", rg_tensor_item(l),
                       loss[0]);
    rg_backward(l);
    const rg_param_list *p = rg_model_params(net);
    cr_assert_eq(p->n, 8);
    for (int i = 0; i < p->n; i++) {
        char name[96];
        snprintf(name, sizeof name, "grad.%s", p->items[i].name);
        const rg_tensor *g = p->items[i].tensor->grad;
        float *want = nn_ref_read(io, name, "F32", g->numel);
        rgt_assert_close(rg_tensor_f32(g), want, g->numel, 1e-6, 1e-3, name);
        free(want);
    }
    rg_scope_end();
    free(x), free(y), free(logits), free(loss);
    rg_safetensors_close(io);
    rg_model_free(net);
}
