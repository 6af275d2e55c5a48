/* tape.h — the autograd tape: one node per differentiable op, in creation order.
 *
 * Define-by-run: an op computes its result at once and, if any input needs a gradient and grad
 * mode is on, appends a node holding its inputs, whatever it saved for backward, and its backward
 * function (which sits in the same file as the op's forward). Creation order is a topological
 * order, so rg_backward just walks the tape in reverse. The tape lives in the step scope. */
#ifndef RG_TAPE_H
#define RG_TAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

#define RG_NODE_MAX_INPUTS 4

typedef struct rg_node rg_node;

/* Reads n->out->grad and adds each input's gradient into in[i]->grad (see rg_grad_begin). */
typedef void (*rg_backward_fn)(rg_node *n);

struct rg_node {
    const char *op; /* "conv2d": for error messages and timelines */
    rg_backward_fn backward;
    rg_tensor *out;
    int n_in;
    rg_tensor *in[RG_NODE_MAX_INPUTS]; /* may hold NULL (an absent bias) */
    rg_tensor *saved[2];               /* extra tensors kept for backward */
    int64_t iattr[8];                  /* integer attributes (stride, seed, ...) */
    float fattr[4];                    /* float attributes (scale, p, ...) */
    int64_t index;                     /* position on the tape */
};

/* Appends a node for `op` if grad mode is on and an input requires a gradient; marks `out` as
 * requiring one and links it to the node. Returns the node, to store attributes and saved
 * tensors in, or NULL when nothing was recorded. NULL inputs are skipped. */
rg_node *rg_tape_record(const char *op, rg_backward_fn backward, rg_tensor *out, int n_in,
                        rg_tensor *const *in);

/* ---- grad mode ---- */
/* Inside rg_no_grad_begin()/rg_no_grad_end() (nestable, per thread) ops record nothing. */
void rg_no_grad_begin(void);
void rg_no_grad_end(void);
bool rg_grad_enabled(void);

/* ---- for backward functions ---- */

static inline bool rg_needs_grad(const rg_tensor *t) {
    return t && (t->flags & RG_TENSOR_REQUIRES_GRAD);
}

/* Makes sure t->grad exists before a kernel writes into it, and returns the kernel's beta:
 * 0 when the buffer is new (overwrite), 1 when it already holds a gradient (accumulate).
 * A gradient has its tensor's lifetime: scoped for op results, long-lived for parameters. */
float rg_grad_begin(rg_tensor *t);

#endif
