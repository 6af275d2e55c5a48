/* autograd.h — reverse-mode differentiation over the tape (tape.h) with gradient-ready hooks
 * (hooks.h) and a finite-difference checker (gradcheck.h). */
#ifndef RG_AUTOGRAD_H
#define RG_AUTOGRAD_H

#include "autograd/hooks.h"
#include "autograd/tape.h"
#include "tensor/tensor.h"

/* Computes d loss / d t for every tensor t that requires a gradient and led to `loss` (one
 * float32 element), adding it into t->grad: gradients accumulate across calls until zeroed.
 * Gradients of op results made in this scope are recomputed from scratch on each call. Hooks fire
 * as each parameter's gradient becomes final. `loss` must come from the current scope. */
void rg_backward(rg_tensor *loss);

/* Sets t->grad to zero if it exists. */
void rg_zero_grad(rg_tensor *t);

#endif
