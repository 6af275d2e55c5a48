/* gradcheck.c — central-difference gradient checking (ringgrad/autograd.h).
 *
 * The projection L = sum(out * r) needs no op: the numeric side computes it on the host in double,
 * and the analytic side seeds backward with r itself (dL/dout = r), so the checker sits in
 * autograd below every op it checks. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd_impl.h"
#include "core/kernels.h"
#include "ringgrad/scope.h"
#include "core/alloc.h"

/* L = sum(out * r) in double, with r drawn from Philox (seed, 0): the same r on every call. */
static double projected(rg_gradcheck_fn f, void *ctx, rg_tensor *const *inputs, uint64_t seed) {
    rg_scope_begin();
    rg_no_grad_begin();
    rg_tensor *out = f(inputs, ctx);
    const float *o = rg_tensor_f32(out);
    double l = 0.0;
    for (int64_t i = 0; i < out->numel; i++)
        l += (double)o[i] * (2.0 * rg_philox_uniform(seed, (uint64_t)i) - 1.0);
    rg_no_grad_end();
    rg_scope_end();
    return l;
}

/* Runs backward through L and copies each input's gradient out (NULL where none is wanted). */
static float **analytic(rg_gradcheck_fn f, void *ctx, int n, rg_tensor *const *inputs,
                        uint64_t seed) {
    float **grads = rg_xcalloc((size_t)n, sizeof *grads, "gradcheck: gradient list");
    for (int i = 0; i < n; i++) rg_zero_grad(inputs[i]);
    rg_scope_begin();
    rg_tensor *out = f(inputs, ctx);
    rg_tensor *r = rg_tensor_empty_like(out);
    float *rp = rg_tensor_f32(r);
    for (int64_t i = 0; i < r->numel; i++)
        rp[i] = (float)(2.0 * rg_philox_uniform(seed, (uint64_t)i) - 1.0);
    rg_backward_grad(out, r); /* dL/dout = r */
    for (int i = 0; i < n; i++) {
        rg_tensor *x = inputs[i];
        if (!rg_tensor_requires_grad(x)) continue;
        grads[i] = rg_xcalloc((size_t)x->numel, sizeof(float), "gradcheck: an analytic gradient");
        if (x->grad) rg_tensor_copy_to_host(x->grad, grads[i]); /* no grad: the output ignores x */
    }
    rg_scope_end();
    return grads;
}

rg_status rg_gradcheck(rg_gradcheck_fn f, void *ctx, int n_inputs, rg_tensor *const *inputs,
                       const rg_gradcheck_opts *opts) {
    rg_gradcheck_opts o = opts ? *opts : (rg_gradcheck_opts){0};
    if (o.eps == 0) o.eps = 1e-2;
    if (o.atol == 0) o.atol = 1e-2;
    if (o.rtol == 0) o.rtol = 1e-2;
    if (o.max_checks <= 0) o.max_checks = 64;
    RG_CHECK(rg_scope_depth() == 0, "gradcheck: call it outside any step scope");

    float **grads = analytic(f, ctx, n_inputs, inputs, o.seed);
    rg_status st = RG_OK;
    for (int i = 0; i < n_inputs && st == RG_OK; i++) {
        rg_tensor *x = inputs[i];
        if (!grads[i]) continue;
        float *xp = rg_tensor_f32(x);
        int64_t step = x->numel > o.max_checks ? x->numel / o.max_checks : 1;
        for (int64_t j = 0; j < x->numel && st == RG_OK; j += step) {
            float orig = xp[j];
            xp[j] = (float)(orig + o.eps);
            double lp = projected(f, ctx, inputs, o.seed);
            xp[j] = (float)(orig - o.eps);
            double lm = projected(f, ctx, inputs, o.seed);
            xp[j] = orig;
            double numeric = (lp - lm) / (2.0 * o.eps), got = grads[i][j];
            if (!(fabs(got - numeric) <= o.atol + o.rtol * fabs(numeric)))
                st = rg_error(RG_EMISMATCH, "gradcheck: input %d element %lld: analytic %.6g, "
                              "numeric %.6g", i, (long long)j, got, numeric);
        }
    }
    for (int i = 0; i < n_inputs; i++) free(grads[i]);
    free(grads);
    return st;
}
