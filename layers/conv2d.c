/* conv2d.c — the 2-D convolution layer, as PyTorch's nn.Conv2d: weight (out,in,k,k) in OIHW,
 * optional bias (out), default initialisation U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
 * fan_in = in*k*k. */
#include "layers/layers_impl.h"
#include "ringgrad/layer.h"
#include "ringgrad/ops.h"

typedef struct {
    rg_layer base;
    rg_tensor *weight; /* (out,in,k,k) */
    rg_tensor *bias;   /* (out) or NULL */
    int stride, padding;
} conv2d_layer;

static rg_tensor *conv2d_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    conv2d_layer *c = (conv2d_layer *)l;
    return rg_conv2d(x, c->weight, c->bias, c->stride, c->padding); /* (N,C,H,W) -> (N,K,P,Q) */
}

static const rg_layer_vtable conv2d_vt = {.kind = "Conv2d", .forward = conv2d_forward};

rg_tensor *rg_conv2d_layer_forward_relu(rg_layer *l, rg_tensor *x) {
    if (!l || l->vt != &conv2d_vt) return NULL;
    conv2d_layer *c = (conv2d_layer *)l;
    return rg_conv2d_relu(x, c->weight, c->bias, c->stride, c->padding);
}

rg_tensor *rg_conv2d_layer_forward_relu_pool(rg_layer *l, rg_tensor *x, const int pool[3]) {
    if (!l || l->vt != &conv2d_vt) return NULL;
    conv2d_layer *c = (conv2d_layer *)l;
    return rg_conv2d_relu_maxpool2d(x, c->weight, c->bias, c->stride, c->padding, pool[0], pool[1],
                                    pool[2]);
}

rg_layer *rg_conv2d_new(const char *name, int64_t in_ch, int64_t out_ch, int kernel,
                        const rg_conv2d_opts *opts, rg_rng_stream *init) {
    const char *nm = name ? name : "";
    rg_conv2d_opts o = opts ? *opts : (rg_conv2d_opts){0};
    RG_CHECK(in_ch > 0 && out_ch > 0 && kernel > 0,
             "Conv2d %s: channels %lld -> %lld, kernel %d must be positive", nm, (long long)in_ch,
             (long long)out_ch, kernel);
    RG_CHECK(o.stride >= 0 && o.padding >= 0, "Conv2d %s: stride %d, padding %d", nm, o.stride,
             o.padding);
    RG_CHECK(init, "Conv2d %s: NULL init stream", nm);
    conv2d_layer *c = (conv2d_layer *)rg_layer_alloc(sizeof *c, &conv2d_vt, name);
    c->stride = o.stride ? o.stride : 1;
    c->padding = o.padding;
    int64_t fan_in = in_ch * kernel * kernel;
    rg_tensor *w = rg_tensor_new(RG_F32, RG_SHAPE(out_ch, in_ch, kernel, kernel), RG_CPU);
    RG_CHECK_ALLOC(w, "Conv2d %s: %s", nm, rg_last_error());
    rg_init_kaiming_uniform_(w, 2.23606797749979 /* sqrt(5) */, fan_in, init);
    c->weight = rg_layer_add_param(&c->base, "weight", w, false);
    if (!o.no_bias) {
        rg_tensor *b = rg_tensor_new(RG_F32, RG_SHAPE(out_ch), RG_CPU);
        RG_CHECK_ALLOC(b, "Conv2d %s: %s", nm, rg_last_error());
        rg_init_fan_in_uniform_(b, fan_in, init);
        c->bias = rg_layer_add_param(&c->base, "bias", b, false);
    }
    return &c->base;
}
