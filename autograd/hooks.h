/* hooks.h — gradient-ready hooks: the event data parallelism is built on.
 *
 * A hook registered on a parameter runs exactly once per rg_backward, on the thread running
 * backward, as soon as that parameter's gradient is final, that is after the last op that used the
 * parameter has done its backward. A parameter used twice fires once, after both uses. A parameter
 * whose consumers did not lead to the loss fires too, with a zero gradient if it had none. The DDP
 * reducer (dist/) uses this to start reducing a bucket while backward goes on. */
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
