/* adam.c — torch.optim.Adam and AdamW.
 *
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;  p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)
 *   with bc_k = 1 - b_k^t, t the parameter's step count (from 1). Adam adds wd*p to g; AdamW
 *   first shrinks p by (1 - lr*wd) (decoupled weight decay, Loshchilov & Hutter).
 *
 * The formula is rg_adam_update in core/kernels.h; the backend's adam_step runs it fused. */
#include <math.h>

#include "optim/optim_impl.h"
#include "tensor/backend_impl.h"

static void adam_update(rg_optim *o, int i) {
    rg_tensor *p = o->params[i].tensor;
    double t = (double)(o->param_steps[i] + 1);
    rg_adam_hparams h = {
        .lr = o->lr,
        .beta1 = o->adam.beta1,
        .beta2 = o->adam.beta2,
        .eps = o->adam.eps,
        .weight_decay = o->adam.weight_decay,
        .decoupled = o->adam.decoupled,
        .bias_correction1 = (float)(1.0 - pow(o->adam.beta1, t)),
        .bias_correction2 = (float)(1.0 - pow(o->adam.beta2, t)),
    };
    rg_backend_for(p->device)->adam_step(p->numel, &h, p->data, p->grad->data, o->bufs[0][i]->data,
                                         o->bufs[1][i]->data);
}

/* torch's defaults for the zero fields. */
static rg_adam_opts with_defaults(const rg_adam_opts *opts) {
    rg_adam_opts a = opts ? *opts : (rg_adam_opts){0};
    if (a.lr == 0.0f) a.lr = 1e-3f;
    if (a.beta1 == 0.0f) a.beta1 = 0.9f;
    if (a.beta2 == 0.0f) a.beta2 = 0.999f;
    if (a.eps == 0.0f) a.eps = 1e-8f;
    RG_CHECK(a.lr > 0.0f && a.eps > 0.0f && a.weight_decay >= 0.0f,
             "Adam: lr %g, eps %g and weight decay %g must not be negative", (double)a.lr,
             (double)a.eps, (double)a.weight_decay);
    RG_CHECK(a.beta1 > 0.0f && a.beta1 < 1.0f && a.beta2 > 0.0f && a.beta2 < 1.0f,
             "Adam: betas (%g, %g) must lie in (0, 1)", (double)a.beta1, (double)a.beta2);
    return a;
}

rg_optim *rg_adam_new(const rg_param_list *params, const rg_adam_opts *opts) {
    static const char *const names[] = {"exp_avg", "exp_avg_sq"};
    rg_adam_opts a = with_defaults(opts);
    rg_optim *o = rg_optim_alloc(params, 2, names);
    if (!o) return NULL;
    o->kind = a.decoupled ? "adamw" : "adam";
    o->update = adam_update;
    o->lr = a.lr;
    o->adam = a;
    return o;
}

rg_optim *rg_adamw_new(const rg_param_list *params, const rg_adam_opts *opts) {
    rg_adam_opts a = opts ? *opts : (rg_adam_opts){0};
    a.decoupled = true;
    return rg_adam_new(params, &a);
}
