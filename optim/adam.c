/* adam.c — torch.optim.Adam and AdamW.
 *
 *   g = grad_scale*grad;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
 *   p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)
 *   with bc_k = 1 - b_k^t, t the parameter's step count (from 1). Adam adds wd*p to g; AdamW
 *   first shrinks p by (1 - lr*wd) (decoupled weight decay, Loshchilov & Hutter).
 *
 * The formula is rg_adam_update in core/kernels.h; the backend's adam_step runs it fused. This
 * file owns Adam's options (rg_adam_opts) and their names for the registry. */
#include <math.h>

#include "optim/optim_impl.h"
#include "tensor/backend_impl.h"

typedef struct {
    rg_optim base; /* first: an adam_optim is an rg_optim */
    rg_adam_opts opts;
} adam_optim;

static void adam_update_one(rg_optim *o, int i) {
    const rg_adam_opts *a = &((adam_optim *)o)->opts;
    rg_tensor *p = o->params[i].tensor;
    double t = (double)(o->param_steps[i] + 1);
    rg_adam_hparams h = {
        .lr = o->lr,
        .beta1 = a->beta1,
        .beta2 = a->beta2,
        .eps = a->eps,
        .weight_decay = rg_optim_decay_of(o, i, a->weight_decay),
        .decoupled = a->decoupled,
        .bias_correction1 = (float)(1.0 - pow(a->beta1, t)),
        .bias_correction2 = (float)(1.0 - pow(a->beta2, t)),
        .grad_scale = o->grad_scale,
    };
    rg_backend_for(p->device)->adam_step(p->numel, &h, p->data, p->grad->data, o->bufs[0][i]->data,
                                         o->bufs[1][i]->data);
}

static void adam_update(rg_optim *o, const int *idx, int count) {
    for (int j = 0; j < count; j++) adam_update_one(o, idx[j]);
}

/* torch's defaults for the zero fields. */
static rg_adam_opts with_defaults(const rg_adam_opts *opts) {
    rg_adam_opts a = opts ? *opts : (rg_adam_opts){0};
    if (a.lr == 0.0f) a.lr = 1e-3f;
    if (a.beta1 == 0.0f) a.beta1 = 0.9f;
    if (a.beta2 == 0.0f) a.beta2 = 0.999f;
    if (a.eps == 0.0f) a.eps = 1e-8f;
    return a;
}

/* RG_OK, or RG_EINVAL with a message naming the bad value. */
static rg_status adam_check(const rg_adam_opts *a) {
    if (!(a->lr > 0.0f && a->eps > 0.0f && a->weight_decay >= 0.0f))
        return rg_error(RG_EINVAL, "Adam: lr %g, eps %g and weight decay %g must not be negative",
                        (double)a->lr, (double)a->eps, (double)a->weight_decay);
    if (!(a->beta1 > 0.0f && a->beta1 < 1.0f && a->beta2 > 0.0f && a->beta2 < 1.0f))
        return rg_error(RG_EINVAL, "Adam: betas (%g, %g) must lie in (0, 1)", (double)a->beta1,
                        (double)a->beta2);
    return RG_OK;
}

static rg_optim *adam_create(const rg_param_list *params, const void *opts) {
    static const char *const names[] = {"exp_avg", "exp_avg_sq"};
    rg_adam_opts a = with_defaults(opts);
    if (adam_check(&a) != RG_OK) return NULL;
    rg_optim *o = rg_optim_alloc(sizeof(adam_optim), params, 2, names);
    if (!o) return NULL;
    o->kind = a.decoupled ? "adamw" : "adam";
    o->update = adam_update;
    o->lr = a.lr;
    ((adam_optim *)o)->opts = a;
    return o;
}

rg_optim *rg_adam_new(const rg_param_list *params, const rg_adam_opts *opts) {
    rg_adam_opts a = with_defaults(opts);
    RG_CHECK(adam_check(&a) == RG_OK, "%s", rg_last_error());
    return adam_create(params, &a);
}

rg_optim *rg_adamw_new(const rg_param_list *params, const rg_adam_opts *opts) {
    rg_adam_opts a = opts ? *opts : (rg_adam_opts){0};
    a.decoupled = true;
    return rg_adam_new(params, &a);
}

/* ---- for the registry (registry.c): rg_optim_new("adam", params, "lr=1e-3,beta2=0.98") ---- */

static void adam_defaults(void *opts) {
    *(rg_adam_opts *)opts = with_defaults(NULL);
}
static void adamw_defaults(void *opts) {
    adam_defaults(opts);
    ((rg_adam_opts *)opts)->decoupled = true;
}

#define K(key, type, field) {key, type, offsetof(rg_adam_opts, field)}
static const rg_optim_key adam_keys[] = {
    K("lr", RG_OPTKEY_FLOAT, lr),       K("beta1", RG_OPTKEY_FLOAT, beta1),
    K("beta2", RG_OPTKEY_FLOAT, beta2), K("eps", RG_OPTKEY_FLOAT, eps),
    K("weight_decay", RG_OPTKEY_FLOAT, weight_decay),
};
#undef K

const rg_optim_desc rg_adam_desc = {
    .name = "adam", .opts_size = sizeof(rg_adam_opts), .keys = adam_keys,
    .n_keys = (int)(sizeof adam_keys / sizeof adam_keys[0]), .defaults = adam_defaults,
    .create = adam_create,
};
const rg_optim_desc rg_adamw_desc = {
    .name = "adamw", .opts_size = sizeof(rg_adam_opts), .keys = adam_keys,
    .n_keys = (int)(sizeof adam_keys / sizeof adam_keys[0]), .defaults = adamw_defaults,
    .create = adam_create,
};
