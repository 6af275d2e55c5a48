/* resnet.c — the ResNet family with torchvision's layout and state_dict names, and He et al.'s
 * CIFAR ResNets in the same naming pattern.
 *
 *   resnet18/34: BasicBlock [2,2,2,2] / [3,4,6,3];  resnet50: Bottleneck [3,4,6,3] (expansion 4,
 *   the stride on the 3x3 conv, as torchvision v1.5). Stem conv1 7x7/2 pad 3 -> bn1 -> relu ->
 *   maxpool 3x3/2 pad 1, then layer1..layer4 (64,128,256,512 wide), avgpool, fc. With
 *   small_input the stem is conv1 3x3/1 pad 1 and there is no max-pool (28-64 px images).
 *   resnet20/56: conv1 3x3 16 -> bn1 -> relu -> layer1..3 of n = 3 / 9 BasicBlocks (16,32,64
 *   wide, stride 2 at the start of layers 2 and 3) -> avgpool -> fc. Downsampling, wherever the
 *   shape changes, is "downsample.0" conv1x1 (stride s, no bias) + "downsample.1" BatchNorm2d.
 *
 * Initialisation is torchvision's: kaiming_normal_(mode="fan_out", nonlinearity="relu") for every
 * conv (std = sqrt(2 / (out_ch k k))), BN weight 1 and bias 0, fc as nn.Linear; zero_init_residual
 * zeroes the last BN weight of each block, so every block starts as the identity. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/zoo_impl.h"
#include "ringgrad/trace.h"

/* A residual block: its children are the branch's layers in order, then optionally the
 * downsample Sequential; forward is relu(branch(x) + shortcut(x)). The branch but its last
 * BatchNorm2d runs as a Sequential's range, so that each BatchNorm2d and the ReLU after it run as
 * one op (rg_batch_norm2d_relu), and the last BatchNorm2d, the add and the ReLU as another
 * (rg_batch_norm2d_add_relu); RG_FUSE=0 keeps them all apart. */
typedef struct {
    rg_layer base;
    int n_branch;  /* children[0..n_branch) form the branch (conv, bn, relu, ..., conv, bn) */
    bool has_down; /* children[n_branch] is the downsample */
} block_layer;

static rg_tensor *block_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    block_layer *b = (block_layer *)l;
    rg_tensor *h = rg_sequential_forward_range(l, 0, b->n_branch - 1, x, mode);
    rg_tensor *sc = b->has_down ? rg_layer_forward(l->children[b->n_branch], x, mode) : x;
    rg_layer *last = l->children[b->n_branch - 1];
    const int64_t t0 = rg_trace_ops_enabled() ? rg_trace_now() : -1;   /* a timeline event */
    rg_tensor *y = rg_batchnorm2d_forward_add_relu(last, h, sc, mode); /* NULL: not a BatchNorm2d */
    if (y && t0 >= 0)
        rg_trace_complete("BatchNorm2d+add+ReLU", "forward op", t0, rg_trace_now(), 0, NULL);
    return y ? y : rg_relu(rg_add(rg_layer_forward(last, h, mode), sc));
}

static const rg_layer_vtable block_vt = {.kind = "ResidualBlock", .forward = block_forward};

typedef struct {
    rg_rng_stream *init;
    bool zero_init_residual;
} builder;

/* A bias-free conv with torchvision's kaiming-normal fan_out init. */
static rg_layer *conv(builder *bd, const char *name, int64_t in, int64_t out, int k, int stride,
                      int pad) {
    rg_layer *c = rg_conv2d_new(name, in, out, k,
                                &(rg_conv2d_opts){.stride = stride, .padding = pad, .no_bias = true},
                                bd->init);
    float std = (float)sqrt(2.0 / (double)(out * k * k));
    rg_tensor_normal_(c->params.items[0].tensor, 0.0f, std, bd->init->seed, &bd->init->offset);
    return c;
}

/* Block `name` of in -> planes*expansion channels; bottleneck when expansion is 4. */
static rg_layer *block(builder *bd, const char *name, int64_t in, int64_t planes, int stride,
                       int expansion) {
    block_layer *b = (block_layer *)rg_layer_alloc(sizeof *b, &block_vt, name);
    rg_layer *l = &b->base;
    char nm[128];
    int64_t out = planes * expansion;
#define SUB(fmt) (snprintf(nm, sizeof nm, "%s." fmt, name), nm)
    rg_layer *last_bn;
    if (expansion == 1) {
        rg_layer_add(l, conv(bd, SUB("conv1"), in, planes, 3, stride, 1));
        rg_layer_add(l, rg_batchnorm2d_new(SUB("bn1"), planes));
        rg_layer_add(l, rg_relu_new(SUB("relu1")));
        rg_layer_add(l, conv(bd, SUB("conv2"), planes, planes, 3, 1, 1));
        last_bn = rg_layer_add(l, rg_batchnorm2d_new(SUB("bn2"), planes));
        b->n_branch = 5;
    } else {
        rg_layer_add(l, conv(bd, SUB("conv1"), in, planes, 1, 1, 0));
        rg_layer_add(l, rg_batchnorm2d_new(SUB("bn1"), planes));
        rg_layer_add(l, rg_relu_new(SUB("relu1")));
        rg_layer_add(l, conv(bd, SUB("conv2"), planes, planes, 3, stride, 1));
        rg_layer_add(l, rg_batchnorm2d_new(SUB("bn2"), planes));
        rg_layer_add(l, rg_relu_new(SUB("relu2")));
        rg_layer_add(l, conv(bd, SUB("conv3"), planes, out, 1, 1, 0));
        last_bn = rg_layer_add(l, rg_batchnorm2d_new(SUB("bn3"), out));
        b->n_branch = 8;
    }
    if (bd->zero_init_residual) rg_tensor_zero_(last_bn->params.items[0].tensor);
    if (stride != 1 || in != out) {
        /* filled before it joins the block: a container copies its child's list when added */
        rg_layer *down = rg_sequential_new(SUB("downsample"));
        rg_layer_add(down, conv(bd, SUB("downsample.0"), in, out, 1, stride, 0));
        rg_layer_add(down, rg_batchnorm2d_new(SUB("downsample.1"), out));
        rg_layer_add(l, down);
        b->has_down = true;
    }
#undef SUB
    return l;
}

/* layer<idx>: n blocks, the first with `stride`; returns the output channels via *in. */
static void stage(builder *bd, rg_layer *net, int idx, int n, int64_t *in, int64_t planes,
                  int stride, int expansion) {
    char name[32], bname[48];
    snprintf(name, sizeof name, "layer%d", idx);
    rg_layer *seq = rg_sequential_new(name);
    for (int i = 0; i < n; i++) {
        snprintf(bname, sizeof bname, "%s.%d", name, i);
        rg_layer_add(seq, block(bd, bname, *in, planes, i == 0 ? stride : 1, expansion));
        *in = planes * expansion;
    }
    rg_layer_add(net, seq);
}

static void head(builder *bd, rg_layer *net, int64_t features, int64_t classes) {
    rg_layer_add(net, rg_global_avgpool_new("avgpool"));
    rg_layer_add(net, rg_flatten_new("flatten"));
    rg_layer_add(net, rg_linear_new("fc", features, classes, bd->init));
}

static rg_layer *resnet(const rg_model_spec *s, const int blocks[4], int expansion,
                        uint64_t seed) {
    rg_rng_stream init = {.seed = seed, .offset = 0};
    builder bd = {.init = &init, .zero_init_residual = s->zero_init_residual};
    rg_layer *net = rg_sequential_new("");
    if (s->small_input) {
        rg_layer_add(net, conv(&bd, "conv1", s->channels, 64, 3, 1, 1));
    } else {
        rg_layer_add(net, conv(&bd, "conv1", s->channels, 64, 7, 2, 3));
    }
    rg_layer_add(net, rg_batchnorm2d_new("bn1", 64));
    rg_layer_add(net, rg_relu_new("relu"));
    if (!s->small_input) rg_layer_add(net, rg_maxpool2d_new("maxpool", 3, 2, 1));
    int64_t in = 64;
    static const int64_t planes[4] = {64, 128, 256, 512};
    for (int i = 0; i < 4; i++) stage(&bd, net, i + 1, blocks[i], &in, planes[i], i ? 2 : 1, expansion);
    head(&bd, net, in, s->num_classes);
    return net;
}

static rg_layer *resnet_cifar(const rg_model_spec *s, int n, uint64_t seed) {
    rg_rng_stream init = {.seed = seed, .offset = 0};
    builder bd = {.init = &init, .zero_init_residual = s->zero_init_residual};
    rg_layer *net = rg_sequential_new("");
    rg_layer_add(net, conv(&bd, "conv1", s->channels, 16, 3, 1, 1));
    rg_layer_add(net, rg_batchnorm2d_new("bn1", 16));
    rg_layer_add(net, rg_relu_new("relu"));
    int64_t in = 16;
    for (int i = 0; i < 3; i++) stage(&bd, net, i + 1, n, &in, 16 << i, i ? 2 : 1, 1);
    head(&bd, net, in, s->num_classes);
    return net;
}

rg_status rg_zoo_resnet18(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    *out = resnet(s, (const int[4]){2, 2, 2, 2}, 1, seed);
    return RG_OK;
}
rg_status rg_zoo_resnet34(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    *out = resnet(s, (const int[4]){3, 4, 6, 3}, 1, seed);
    return RG_OK;
}
rg_status rg_zoo_resnet50(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    *out = resnet(s, (const int[4]){3, 4, 6, 3}, 4, seed);
    return RG_OK;
}
rg_status rg_zoo_resnet20(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    *out = resnet_cifar(s, 3, seed);
    return RG_OK;
}
rg_status rg_zoo_resnet56(const rg_model_spec *s, uint64_t seed, rg_layer **out) {
    *out = resnet_cifar(s, 9, seed);
    return RG_OK;
}

/* Every stride-2 layer of these ResNets (the 7x7 stem, the max-pool, a stage's first 3x3 conv
 * and its 1x1 downsample, all padded as torchvision pads them) maps x pixels to ceil(x / 2); the
 * last stage's planes are the smallest. */
static int64_t halved(int64_t x, int times) {
    while (times-- > 0) x = (x + 1) / 2;
    return x;
}

int64_t rg_zoo_resnet_bn_plane(const rg_model_spec *s) {
    int t = s->small_input ? 3 : 5; /* (stem, max-pool,) layer2, layer3, layer4 */
    return halved(s->height, t) * halved(s->width, t);
}

int64_t rg_zoo_resnet_cifar_bn_plane(const rg_model_spec *s) {
    return halved(s->height, 2) * halved(s->width, 2); /* layer2, layer3 */
}
