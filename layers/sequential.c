/* sequential.c — Sequential: a container whose forward runs its children in order.
 *
 * It is also where the layer stack is fused, the one graph rewrite ringgrad does: a Conv2d and the
 * ReLU after it run as one op (rg_conv2d_relu), as oneDNN's post-ops and PyTorch's fused
 * ConvReLU2d do. The results are the same bit for bit; what goes is
 * two memory-bound passes over the activation. RG_FUSE=0 runs every child by itself (to compare
 * or to debug). */
#include <stdlib.h>
#include <string.h>

#include "layers/layers_impl.h"
#include "ringgrad/layer.h"

static bool fusion_enabled(void) {
    const char *v = getenv("RG_FUSE");
    return !(v && strcmp(v, "0") == 0);
}

rg_tensor *rg_sequential_forward_range(rg_layer *l, int first, int last, rg_tensor *x,
                                       rg_mode mode) {
    RG_CHECK(l && x, "rg_sequential_forward_range: NULL argument");
    RG_CHECK(0 <= first && first <= last && last <= l->n_children,
             "layer %s: children [%d, %d) of %d", l->name, first, last, l->n_children);
    bool fuse = fusion_enabled();
    for (int i = first; i < last; i++) {
        rg_layer *c = l->children[i];
        rg_tensor *y = NULL;
        if (fuse && i + 1 < last && rg_layer_is_relu(l->children[i + 1]))
            y = rg_conv2d_layer_forward_relu(c, x); /* NULL: c is not a Conv2d */
        if (y) {
            x = y;
            i++; /* the ReLU is done */
            continue;
        }
        x = rg_layer_forward(c, x, mode);
    }
    return x;
}

static rg_tensor *sequential_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    return rg_sequential_forward_range(l, 0, l->n_children, x, mode);
}

static const rg_layer_vtable sequential_vt = {.kind = "Sequential", .forward = sequential_forward};

rg_layer *rg_sequential_new(const char *name) {
    return rg_layer_alloc(sizeof(rg_layer), &sequential_vt, name);
}
