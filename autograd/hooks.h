/* hooks.h — gradient-ready hooks: the event data parallelism is built on.
 *
 * A hook registered on a parameter runs exactly once per rg_backward whose loss depends on the
 * parameter, on the thread running backward, as soon as that parameter's gradient is final, that
 * is after the last op on the way to the loss that used the parameter has done its backward. A
 * parameter used twice fires once, after both uses. A parameter the loss does not depend on (used
 * only by another model, or by a computation on the side) does not fire. The DDP reducer (dist/)
 * uses this to start reducing a bucket while backward goes on; rg_ddp_wait covers parameters that
 * did not fire. */
#ifndef RG_HOOKS_H
#define RG_HOOKS_H

#include "tensor/tensor.h"

typedef void (*rg_grad_hook_fn)(rg_tensor *param, void *ctx);

/* Registers fn(param, ctx) on a leaf tensor that requires a gradient. Hooks of one parameter run
 * in registration order. Returns an id for rg_grad_hook_remove (ids start at 1). */
int rg_grad_hook_add(rg_tensor *param, rg_grad_hook_fn fn, void *ctx);
/* Removes a hook; an unknown id is ignored. */
void rg_grad_hook_remove(rg_tensor *param, int id);

/* ---- internal ---- */
struct rg_grad_hooks;
void rg_grad_hooks_fire(rg_tensor *param);
void rg_grad_hooks_free(struct rg_grad_hooks *h);

#endif
