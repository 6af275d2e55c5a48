/* zoo.c — the bundled Fashion-MNIST models, written the way a user would write theirs.
 *
 * Layers are built one statement at a time on purpose: each constructor draws its initial weights
 * from the shared stream `init`, and C leaves the evaluation order inside one initialiser list
 * unspecified, so a list would make the weights compiler-dependent.
 *
 * Both take the data's channels and classes. The MLP's fc1 takes any image size (C*H*W inputs);
 * the CNN is PyTorch's MNIST example, whose fc1 has 9216 = 64x12x12 inputs, so it takes 28x28
 * (or 29x29) images only, and says so before training starts. */
#include "models/zoo_impl.h"

rg_status rg_zoo_cnn(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    int64_t p = s->height >= 6 ? (s->height - 4) / 2 : 0, q = s->width >= 6 ? (s->width - 4) / 2 : 0;
    if (64 * p * q != 9216)
        return rg_error(RG_EINVAL, "model cnn: fc1 takes 9216 = 64x12x12 features, made from 28x28 "
                        "images, but the data's images are %lldx%lldx%lld (giving %lld); use "
                        "--model mlp or a resnet for other sizes", (long long)s->channels,
                        (long long)s->height, (long long)s->width, (long long)(64 * p * q));
    rg_rng_stream init = {.seed = seed, .offset = 0};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_conv2d_new("conv1", s->channels, 32, 3, NULL, &init)); /* (N,32,26,26) */
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_conv2d_new("conv2", 32, 64, 3, NULL, &init)); /* (N,64,24,24) */
    rg_layer_add(net, rg_relu_new("relu2"));
    rg_layer_add(net, rg_maxpool2d_new("pool", 2, 2, 0)); /* (N,64,12,12) */
    rg_layer_add(net, rg_dropout_new("dropout1", 0.25f, rg_seed_derive(seed, 0)));
    rg_layer_add(net, rg_flatten_new("flatten")); /* (N,9216) */
    rg_layer_add(net, rg_linear_new("fc1", 9216, 128, &init));
    rg_layer_add(net, rg_relu_new("relu3"));
    rg_layer_add(net, rg_dropout_new("dropout2", 0.5f, rg_seed_derive(seed, 1)));
    rg_layer_add(net, rg_linear_new("fc2", 128, s->num_classes, &init)); /* (N,classes) */
    *out = net;
    return RG_OK;
}

rg_status rg_zoo_mlp(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    /* fc1's weight (256, C*H*W) must be a tensor at all (at most 2^40 elements, tensor.c); a
     * larger one stopped the process in the tensor's shape check instead of returning */
    double weights = 256.0 * (double)s->channels * (double)s->height * (double)s->width;
    if (weights > (double)(INT64_C(1) << 40))
        return rg_error(RG_ENOMEM,
                        "model mlp: fc1 would take %lldx%lldx%lld = %.3g inputs, a "
                        "weight of %.3g values (%.3g TB), more than one tensor may hold (2^40 "
                        "values); use smaller images (--image-size) or fewer channels",
                        (long long)s->channels, (long long)s->height, (long long)s->width,
                        weights / 256.0, weights, weights * 4e-12);
    rg_rng_stream init = {.seed = seed, .offset = 0};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, rg_flatten_new("flatten")); /* (N,C*H*W) */
    rg_layer_add(net, rg_linear_new("fc1", s->channels * s->height * s->width, 256, &init));
    rg_layer_add(net, rg_relu_new("relu1"));
    rg_layer_add(net, rg_dropout_new("dropout1", 0.2f, rg_seed_derive(seed, 0)));
    rg_layer_add(net, rg_linear_new("fc2", 256, 128, &init));
    rg_layer_add(net, rg_relu_new("relu2"));
    rg_layer_add(net, rg_linear_new("fc3", 128, s->num_classes, &init)); /* (N,classes) */
    *out = net;
    return RG_OK;
}

static rg_model *fmnist_model(const char *name, uint64_t seed) {
    rg_model *m = NULL;
    rg_status st = rg_model_new_for(name, seed, NULL, &m);
    RG_CHECK(st == RG_OK, "%s", rg_last_error());
    return m;
}

rg_model *rg_model_cnn(uint64_t seed) {
    return fmnist_model("cnn", seed);
}

rg_model *rg_model_mlp(uint64_t seed) {
    return fmnist_model("mlp", seed);
}
