/* autograd.h — reverse-mode differentiation: backward over the tape that ops record, no-grad mode,
 * gradient-ready hooks (the event data parallelism is built on) and a finite-difference checker.
 * The tape itself is internal (autograd/autograd_impl.h). */
#ifndef RG_AUTOGRAD_H
#define RG_AUTOGRAD_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/status.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backward ---- */

/* Computes d loss / d t for every tensor t that requires a gradient and led to `loss` (one
 * float32 element), adding it into t->grad: gradients accumulate across calls until zeroed.
 * Gradients of op results made in this scope are recomputed from scratch on each call (a
 * reshape's input and output may share one gradient buffer: the same values). Hooks fire as each
 * parameter's gradient becomes final. `loss` must come from the current scope.
 * Not thread-safe over shared parameters: two threads may not run backward into the same
 * gradients at once (nor may one run backward while another reads those gradients). */
RG_API void rg_backward(rg_tensor *loss);

/* Backward from an output of any shape, seeded with dy (float32, y's shape and device): every
 * tensor t that led to y gets d<y, dy>/dt added into t->grad, as torch.autograd.backward(y, dy).
 * rg_backward(loss) is this with dy = 1. A pipeline stage runs it with the activation gradient it
 * received from the next stage. dy is copied; it may be freed or reused afterwards. */
RG_API void rg_backward_grad(rg_tensor *y, const rg_tensor *dy);

/* Sets t->grad to zero if it exists. */
RG_API void rg_zero_grad(rg_tensor *t);

/* ---- grad mode ---- */
/* Inside rg_no_grad_begin()/rg_no_grad_end() (nestable, per thread) ops record nothing. */
RG_API void rg_no_grad_begin(void);
RG_API void rg_no_grad_end(void);
RG_API bool rg_grad_enabled(void);

/* ---- gradient-ready hooks ----
 * A hook registered on a parameter runs exactly once per rg_backward whose loss depends on the
 * parameter, on the thread running backward, as soon as that parameter's gradient is final, that
 * is after the last op on the way to the loss that used the parameter has done its backward. A
 * parameter used twice fires once, after both uses. A parameter the loss does not depend on (used
 * only by another model, or by a computation on the side) does not fire. The DDP reducer (dist/)
 * uses this to start reducing a bucket while backward goes on; rg_ddp_wait covers parameters that
 * did not fire. */
typedef void (*rg_grad_hook_fn)(rg_tensor *param, void *ctx);

/* Registers fn(param, ctx) on a leaf tensor that requires a gradient. Hooks of one parameter run
 * in registration order. Returns an id for rg_grad_hook_remove (ids start at 1). The hooks are
 * freed with the tensor. */
RG_API int rg_grad_hook_add(rg_tensor *param, rg_grad_hook_fn fn, void *ctx);
/* Removes a hook; an unknown id is ignored. */
RG_API void rg_grad_hook_remove(rg_tensor *param, int id);

/* ---- gradient checking ----
 * Compares an op's analytic gradients with central finite differences. The function under test
 * maps input tensors to an output of any shape. The checker reduces the output to a scalar with a
 * fixed random projection, L = sum(out * r), so that every output element's gradient path is
 * exercised, then for sampled input elements compares dL/dx from rg_backward with
 * (L(x + eps) - L(x - eps)) / (2 eps), evaluated in double precision. */

/* Builds the output from the inputs with differentiable ops. Called inside a scope. */
typedef rg_tensor *(*rg_gradcheck_fn)(rg_tensor *const *inputs, void *ctx);

typedef struct {
    /* public: options; a zero field takes its default */
    double eps;        /* step (default 1e-2: float32 needs a large one) */
    double atol, rtol; /* pass when |analytic - numeric| <= atol + rtol |numeric| (1e-2, 1e-2) */
    int max_checks;    /* elements checked per input, spread evenly (default 64; 0 = default) */
    uint64_t seed;     /* projection seed */
} rg_gradcheck_opts;

/* Checks every input that requires a gradient (CPU float32, long-lived). Returns RG_OK, or
 * RG_EMISMATCH with rg_last_error() naming the input, element, analytic and numeric values.
 * Must be called outside any scope; opens its own. */
RG_API RG_NODISCARD
rg_status rg_gradcheck(rg_gradcheck_fn f, void *ctx, int n_inputs, rg_tensor *const *inputs,
                       const rg_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
