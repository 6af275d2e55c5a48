/* simple.c — the layers without parameters: ReLU, Flatten, AdaptiveAvgPool2d(1) and MaxPool2d. Each
 * is a thin wrapper over its op in ringgrad/ops.h, so that it can sit in a Sequential. */
#include "ringgrad/layer.h"
#include "ringgrad/ops.h"

/* ---- ReLU: y = max(x, 0) ---- */

static rg_tensor *relu_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    return rg_relu(x);
}

static const rg_layer_vtable relu_vt = {.kind = "ReLU", .forward = relu_forward};

rg_layer *rg_relu_new(const char *name) {
    return rg_layer_alloc(sizeof(rg_layer), &relu_vt, name);
}

bool rg_layer_is_relu(const rg_layer *l) {
    return l && l->vt == &relu_vt;
}

/* ---- Flatten: (N, d1, d2, ...) -> (N, d1*d2*...), a view ---- */

static rg_tensor *flatten_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    return rg_flatten(x);
}

static const rg_layer_vtable flatten_vt = {.kind = "Flatten", .forward = flatten_forward};

rg_layer *rg_flatten_new(const char *name) {
    return rg_layer_alloc(sizeof(rg_layer), &flatten_vt, name);
}

/* ---- AdaptiveAvgPool2d(1): (N,C,H,W) -> (N,C,1,1) ---- */

static rg_tensor *avgpool_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    return rg_global_avg_pool2d(x);
}

static const rg_layer_vtable avgpool_vt = {.kind = "AdaptiveAvgPool2d", .forward = avgpool_forward};

rg_layer *rg_global_avgpool_new(const char *name) {
    return rg_layer_alloc(sizeof(rg_layer), &avgpool_vt, name);
}

/* ---- MaxPool2d: y[n,c,p,q] = max over the window ---- */

typedef struct {
    rg_layer base;
    int kernel, stride, padding;
} maxpool2d_layer;

static rg_tensor *maxpool2d_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    maxpool2d_layer *m = (maxpool2d_layer *)l;
    return rg_max_pool2d(x, m->kernel, m->stride, m->padding); /* (N,C,H,W) -> (N,C,P,Q) */
}

static const rg_layer_vtable maxpool2d_vt = {.kind = "MaxPool2d", .forward = maxpool2d_forward};

bool rg_maxpool2d_layer_params(const rg_layer *l, int pool[3]) {
    if (!l || l->vt != &maxpool2d_vt) return false;
    const maxpool2d_layer *m = (const maxpool2d_layer *)l;
    pool[0] = m->kernel, pool[1] = m->stride, pool[2] = m->padding;
    return true;
}

rg_layer *rg_maxpool2d_new(const char *name, int kernel, int stride, int padding) {
    RG_CHECK(kernel > 0 && stride >= 0 && padding >= 0 && 2 * padding <= kernel,
             "MaxPool2d %s: kernel %d, stride %d, padding %d (need padding <= kernel/2)",
             name ? name : "", kernel, stride, padding);
    maxpool2d_layer *m = (maxpool2d_layer *)rg_layer_alloc(sizeof *m, &maxpool2d_vt, name);
    m->kernel = kernel;
    m->stride = stride ? stride : kernel; /* PyTorch: stride defaults to the kernel size */
    m->padding = padding;
    return &m->base;
}
