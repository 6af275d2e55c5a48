/* zoo.c — the bundled Fashion-MNIST models, written the way a user would write theirs.
 *
 * Layers are built one statement at a time on purpose: each constructor draws its initial weights
 * from the shared stream `init`, and C leaves the evaluation order inside one initialiser list
 * unspecified, so a list would make the weights compiler-dependent. */
#include "ringgrad/model.h"

rg_model *rg_model_cnn(uint64_t seed) {
    rg_rng_stream init = {.seed = seed, .offset = 0};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", 1, 32, 3, NULL, &init)); /* (N,32,26,26) */
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_conv2d_new("conv2", 32, 64, 3, NULL, &init)); /* (N,64,24,24) */
    rg_layer_add(net, rg_relu_new("relu2"));
    rg_layer_add(net, rg_maxpool2d_new("pool", 2, 2, 0)); /* (N,64,12,12) */
    rg_layer_add(net, rg_dropout_new("dropout1", 0.25f, rg_seed_derive(seed, 0)));
    rg_layer_add(net, rg_flatten_new("flatten")); /* (N,9216) */
    rg_layer_add(net, rg_linear_new("fc1", 9216, 128, &init));
    rg_layer_add(net, rg_relu_new("relu3"));
    rg_layer_add(net, rg_dropout_new("dropout2", 0.5f, rg_seed_derive(seed, 1)));
    rg_layer_add(net, rg_linear_new("fc2", 128, 10, &init)); /* (N,10) */
    return rg_model_new("cnn", net, seed);
}

rg_model *rg_model_mlp(uint64_t seed) {
    rg_rng_stream init = {.seed = seed, .offset = 0};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_flatten_new("flatten")); /* (N,784) */
    rg_layer_add(net, rg_linear_new("fc1", 784, 256, &init));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_dropout_new("dropout1", 0.2f, rg_seed_derive(seed, 0)));
    rg_layer_add(net, rg_linear_new("fc2", 256, 128, &init));
    rg_layer_add(net, rg_relu_new("relu2"));
    rg_layer_add(net, rg_linear_new("fc3", 128, 10, &init)); /* (N,10) */
    return rg_model_new("mlp", net, seed);
}
