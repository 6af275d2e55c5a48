/* autograd_impl.h — the tape, as the ops (ops/) and backward see it. Internal to the library.
 *
 * Define-by-run: an op computes its result at once and, if any input needs a gradient and grad
 * mode is on, appends a node holding its inputs, whatever it saved for backward, and its backward
 * function (which sits in the same file as the op's forward). Creation order is a topological
 * order, so rg_backward just walks the tape in reverse.
 *
 * Autograd owns all of its state. The tape is a per-thread array for each open step scope (the
 * nodes themselves live in the scope's arena, so rg_scope_end frees them); the hooks of a
 * parameter hang off the tensor's extension slot (rg_tensor.ext), which the tensor layer frees
 * through the function it carries without knowing what it is; backward's per-parameter counters
 * live in the scope arena for the length of one backward. */
#ifndef RG_AUTOGRAD_IMPL_H
#define RG_AUTOGRAD_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/autograd.h"
#include "ringgrad/tensor.h"

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

/* The current scope's tape: its nodes in creation order, and how many. */
rg_node **rg_tape_nodes(int64_t *n);
/* How many nodes the current scope's tape holds. */
static inline int64_t rg_tape_len(void) {
    int64_t n;
    rg_tape_nodes(&n);
    return n;
}

/* ---- for backward functions ---- */

static inline bool rg_needs_grad(const rg_tensor *t) {
    return t && (t->flags & RG_TENSOR_REQUIRES_GRAD);
}

/* Makes sure t->grad exists before a kernel writes into it, and returns the kernel's beta:
 * 0 when the buffer is new (overwrite), 1 when it already holds a gradient (accumulate).
 * A gradient has its tensor's lifetime: scoped for op results, long-lived for parameters. */
float rg_grad_begin(rg_tensor *t);

/* For ops whose input gradient is their output gradient g unchanged (reshape): makes x's
 * gradient a view of g itself, in x's shape, instead of a copy, and returns true, when that is
 * safe: x is an op result of this scope whose gradient has not been started, and no op between
 * x's and n on the tape consumes x (backward runs in reverse, so none would add to it after n;
 * an op after n that consumes x has started x's gradient already). Returns false otherwise, and
 * the caller copies. As PyTorch, whose view ops hand back a view of the gradient: g is not
 * written to again, so both read the same values after backward. */
bool rg_grad_alias(rg_tensor *x, rg_tensor *g, const rg_node *n);

/* ---- hooks (hooks.c) ---- */
/* Runs param's gradient-ready hooks, if it has any. */
void rg_grad_hooks_fire(rg_tensor *param);
bool rg_grad_hooks_any(const rg_tensor *param);

#endif
