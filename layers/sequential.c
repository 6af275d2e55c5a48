/* sequential.c — Sequential: a container whose forward runs its children in order. */
#include "ringgrad/layer.h"

static rg_tensor *sequential_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    for (int i = 0; i < l->n_children; i++) x = rg_layer_forward(l->children[i], x, mode);
    return x;
}

static const rg_layer_vtable sequential_vt = {.kind = "Sequential", .forward = sequential_forward};

rg_layer *rg_sequential_new(const char *name) {
    return rg_layer_alloc(sizeof(rg_layer), &sequential_vt, name);
}
