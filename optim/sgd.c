/* sgd.c — torch.optim.SGD: plain, with momentum (and dampening), Nesterov, and L2 weight decay.
 *
 *   d = g + wd*p;  buf = first ? d : mu*buf + (1-dampening)*d;  d = nesterov ? d + mu*buf : buf;
 *   p -= lr*d
 *
 * The formula is rg_sgd_update in core/kernels.h; the backend's sgd_step runs it over a tensor.
 * "first" is per parameter: torch creates the momentum buffer on a parameter's first update. */
#include "optim/optim_impl.h"
#include "tensor/backend_impl.h"

static void sgd_update(rg_optim *o, int i) {
    rg_tensor *p = o->params[i].tensor;
    rg_sgd_hparams h = {
        .lr = o->lr,
        .momentum = o->sgd.momentum,
        .dampening = o->sgd.dampening,
        .weight_decay = o->sgd.weight_decay,
        .nesterov = o->sgd.nesterov,
        .first_step = o->param_steps[i] == 0,
    };
    float *buf = o->n_bufs ? o->bufs[0][i]->data : NULL;
    rg_backend_for(p->device)->sgd_step(p->numel, &h, p->data, p->grad->data, buf);
}

rg_optim *rg_sgd_new(const rg_param_list *params, const rg_sgd_opts *opts) {
    RG_CHECK(opts, "rg_sgd_new: SGD needs options with a learning rate");
    rg_sgd_opts s = *opts;
    RG_CHECK(s.lr > 0.0f, "rg_sgd_new: learning rate %g must be positive", (double)s.lr);
    RG_CHECK(s.momentum >= 0.0f && s.weight_decay >= 0.0f,
             "rg_sgd_new: momentum %g and weight decay %g must not be negative", (double)s.momentum,
             (double)s.weight_decay);
    RG_CHECK(!s.nesterov || (s.momentum > 0.0f && s.dampening == 0.0f),
             "rg_sgd_new: Nesterov momentum requires a momentum and zero dampening");
    static const char *const names[] = {"momentum_buffer"};
    rg_optim *o = rg_optim_alloc(params, s.momentum != 0.0f ? 1 : 0, names);
    if (!o) return NULL;
    o->kind = "sgd";
    o->update = sgd_update;
    o->lr = s.lr;
    o->sgd = s;
    return o;
}
