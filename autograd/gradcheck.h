/* gradcheck.h — compare an op's analytic gradients with central finite differences.
 *
 * The function under test maps input tensors to an output of any shape. The checker reduces the
 * output to a scalar with a fixed random projection, L = sum(out * r), so that every output
 * element's gradient path is exercised, then for sampled input elements compares dL/dx from
 * rg_backward with (L(x + eps) - L(x - eps)) / (2 eps), evaluated in double precision. */
#ifndef RG_GRADCHECK_H
#define RG_GRADCHECK_H

#include "tensor/tensor.h"

/* Builds the output from the inputs with differentiable ops. Called inside a scope. */
typedef rg_tensor *(*rg_gradcheck_fn)(rg_tensor *const *inputs, void *ctx);

typedef struct {
    double eps;        /* step (default 1e-2: float32 needs a large one) */
    double atol, rtol; /* pass when |analytic - numeric| <= atol + rtol |numeric| (1e-2, 1e-2) */
    int max_checks;    /* elements checked per input, spread evenly (default 64; 0 = default) */
    uint64_t seed;     /* projection seed */
} rg_gradcheck_opts;

/* Checks every input that requires a gradient (CPU float32, long-lived). Returns RG_OK, or
 * RG_EMISMATCH with rg_last_error() naming the input, element, analytic and numeric values.
 * Must be called outside any scope; opens its own. */
rg_status rg_gradcheck(rg_gradcheck_fn f, void *ctx, int n_inputs, rg_tensor *const *inputs,
                       const rg_gradcheck_opts *opts);

#endif
