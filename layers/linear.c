/* linear.c — the fully connected layer, y = x w^T + b, as PyTorch's nn.Linear: weight (out,in),
 * bias (out), default initialisation U(-1/sqrt(in), 1/sqrt(in)) for both. */
#include "ringgrad/layer.h"
#include "ringgrad/ops.h"

typedef struct {
    rg_layer base;
    rg_tensor *weight; /* (out,in) */
    rg_tensor *bias;   /* (out) */
} linear_layer;

static rg_tensor *linear_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    linear_layer *lin = (linear_layer *)l;
    return rg_linear(x, lin->weight, lin->bias); /* x (N,in) -> (N,out) */
}

static const rg_layer_vtable linear_vt = {.kind = "Linear", .forward = linear_forward};

rg_layer *rg_linear_new(const char *name, int64_t in, int64_t out, rg_rng_stream *init) {
    RG_CHECK(in > 0 && out > 0, "Linear %s: sizes in=%lld out=%lld must be positive",
             name ? name : "", (long long)in, (long long)out);
    RG_CHECK(init, "Linear %s: NULL init stream", name ? name : "");
    linear_layer *lin = (linear_layer *)rg_layer_alloc(sizeof *lin, &linear_vt, name);
    rg_tensor *w = rg_tensor_new(RG_F32, RG_SHAPE(out, in), RG_CPU);
    rg_tensor *b = rg_tensor_new(RG_F32, RG_SHAPE(out), RG_CPU);
    RG_CHECK_ALLOC(w && b, "Linear %s: %s", lin->base.name, rg_last_error());
    rg_init_kaiming_uniform_(w, 2.23606797749979 /* sqrt(5) */, in, init);
    rg_init_fan_in_uniform_(b, in, init);
    lin->weight = rg_layer_add_param(&lin->base, "weight", w, false);
    lin->bias = rg_layer_add_param(&lin->base, "bias", b, false);
    return &lin->base;
}
