/* sequential.c — Sequential: a container whose forward runs its children in order.
 *
 * It is also where the layer stack is fused, the one graph rewrite ringgrad does: a Conv2d and the
 * ReLU after it run as one op (rg_conv2d_relu), as oneDNN's post-ops and PyTorch's fused
 * ConvReLU2d do, and with a MaxPool2d after the ReLU, all three (rg_conv2d_relu_maxpool2d); a
 * BatchNorm2d and the ReLU after it (ResNet's conv, bn, relu) run as rg_batch_norm2d_relu. The
 * results are the same bit for bit; what goes is two memory-bound passes over the activation,
 * and with the pool the activation itself and its gradient (on the CPU). RG_FUSE=0 runs every
 * child by itself (to compare or to debug), RG_FUSE=relu fuses the ReLUs only. */
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "layers/layers_impl.h"
#include "ringgrad/layer.h"
#include "ringgrad/trace.h"

rg_fusion rg_fusion_level(void) {
    static const char *const levels[] = {"0", "relu", "1"}; /* in rg_fusion's order */
    return (rg_fusion)rg_env_choice("RG_FUSE", levels, 3, 2);
}

rg_tensor *rg_sequential_forward_range(rg_layer *l, int first, int last, rg_tensor *x,
                                       rg_mode mode) {
    RG_CHECK(l && x, "rg_sequential_forward_range: NULL argument");
    RG_CHECK(0 <= first && first <= last && last <= l->n_children,
             "layer %s: children [%d, %d) of %d", l->name, first, last, l->n_children);
    rg_fusion fuse = rg_fusion_level();
    const bool trace = rg_trace_ops_enabled(); /* each fused pair or triple as a timeline event */
    for (int i = first; i < last; i++) {
        rg_layer *c = l->children[i];
        rg_tensor *y = NULL;
        int pool[3];
        if (fuse != RG_FUSE_NONE && i + 1 < last && rg_layer_is_relu(l->children[i + 1])) {
            const int64_t t0 = trace ? rg_trace_now() : 0;
            if (fuse == RG_FUSE_ALL && i + 2 < last &&
                rg_maxpool2d_layer_params(l->children[i + 2], pool) &&
                (y = rg_conv2d_layer_forward_relu_pool(c, x, pool))) { /* NULL: not a Conv2d */
                if (trace)
                    rg_trace_complete("Conv2d+ReLU+MaxPool2d", "forward op", t0, rg_trace_now(), 0,
                                      NULL);
                x = y;
                i += 2; /* the ReLU and the pool are done */
                continue;
            }
            const char *what = "Conv2d+ReLU";
            y = rg_conv2d_layer_forward_relu(c, x); /* NULL: c is not a Conv2d */
            if (!y) {
                what = "BatchNorm2d+ReLU";
                y = rg_batchnorm2d_layer_forward_relu(c, x, mode); /* nor a BatchNorm2d */
            }
            if (y && trace) rg_trace_complete(what, "forward op", t0, rg_trace_now(), 0, NULL);
        }
        if (y) {
            x = y;
            i++; /* the ReLU is done */
            continue;
        }
        x = rg_layer_forward(c, x, mode); /* a leaf records its own event */
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
