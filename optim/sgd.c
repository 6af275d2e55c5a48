/* sgd.c — torch.optim.SGD: plain, with momentum (and dampening), Nesterov, and L2 weight decay.
 *
 *   g = grad_scale*grad;  d = g + wd*p;  buf = first ? d : mu*buf + (1-dampening)*d;
 *   d = nesterov ? d + mu*buf : buf;  p -= lr*d
 *
 * The formula is rg_sgd_update in core/kernels.h; the backend's sgd_step_many runs it over the
 * step's tensors in one call (one launch per 48 tensors on a GPU).
 * "first" is per parameter: torch creates the momentum buffer on a parameter's first update.
 * This file owns SGD's options (rg_sgd_opts) and their names for the registry. */
#include "optim/optim_impl.h"
#include "tensor/backend_impl.h"

typedef struct {
    rg_optim base; /* first: an sgd_optim is an rg_optim */
    rg_sgd_opts opts;
    rg_sgd_tensor list[]; /* a step's tensors for the backend's sgd_step_many (one per parameter) */
} sgd_optim;

static void sgd_update(rg_optim *o, const int *idx, int count) {
    sgd_optim *so = (sgd_optim *)o;
    const rg_sgd_opts *s = &so->opts;
    for (int j = 0; j < count; j++) {
        int i = idx[j];
        rg_tensor *p = o->params[i].tensor;
        so->list[j] = (rg_sgd_tensor){
            .n = p->numel,
            .param = p->data,
            .grad = p->grad->data,
            .momentum_buf = o->n_bufs ? o->bufs[0][i]->data : NULL,
            .h = {.lr = o->lr,
                  .momentum = s->momentum,
                  .dampening = s->dampening,
                  .weight_decay = rg_optim_decay_of(o, i, s->weight_decay),
                  .nesterov = s->nesterov,
                  .first_step = o->param_steps[i] == 0,
                  .grad_scale = o->grad_scale},
        };
    }
    /* one multi-tensor call per run of parameters on one device (normally the whole list) */
    for (int j = 0; j < count;) {
        rg_device dev = o->params[idx[j]].tensor->device;
        int k = j + 1;
        while (k < count && rg_device_eq(o->params[idx[k]].tensor->device, dev)) k++;
        rg_backend_for(dev)->sgd_step_many(k - j, so->list + j);
        j = k;
    }
}

/* RG_OK, or RG_EINVAL with a message naming the bad value. */
static rg_status sgd_check(const rg_sgd_opts *s) {
    if (!(s->lr > 0.0f))
        return rg_error(RG_EINVAL, "sgd: learning rate %g must be positive", (double)s->lr);
    if (!(s->momentum >= 0.0f && s->weight_decay >= 0.0f && s->dampening >= 0.0f))
        return rg_error(RG_EINVAL,
                        "sgd: momentum %g, dampening %g and weight decay %g must not be negative",
                        (double)s->momentum, (double)s->dampening, (double)s->weight_decay);
    if (s->nesterov && !(s->momentum > 0.0f && s->dampening == 0.0f))
        return rg_error(RG_EINVAL, "sgd: Nesterov momentum requires a momentum and zero dampening");
    return RG_OK;
}

static rg_optim *sgd_create(const rg_param_list *params, const void *opts) {
    const rg_sgd_opts *s = opts;
    if (sgd_check(s) != RG_OK) return NULL;
    static const char *const names[] = {"momentum_buffer"};
    rg_optim *o = rg_optim_alloc(sizeof(sgd_optim) + (size_t)params->n * sizeof(rg_sgd_tensor),
                                 params, s->momentum != 0.0f ? 1 : 0, names);
    if (!o) return NULL;
    o->kind = "sgd";
    o->update = sgd_update;
    o->lr = s->lr;
    ((sgd_optim *)o)->opts = *s;
    return o;
}

rg_optim *rg_sgd_new(const rg_param_list *params, const rg_sgd_opts *opts) {
    RG_CHECK(opts, "rg_sgd_new: SGD needs options with a learning rate");
    RG_CHECK(sgd_check(opts) == RG_OK, "rg_sgd_new: %s", rg_last_error());
    return sgd_create(params, opts);
}

/* ---- for the registry (registry.c): rg_optim_new("sgd", params, "lr=0.1,momentum=0.9") ---- */

static void sgd_defaults(void *opts) {
    *(rg_sgd_opts *)opts = (rg_sgd_opts){.lr = 0.01f}; /* torch has none; ringgrad-train's */
}

#define K(key, type, field) {key, type, offsetof(rg_sgd_opts, field)}
static const rg_optim_key sgd_keys[] = {
    K("lr", RG_OPTKEY_FLOAT, lr),
    K("momentum", RG_OPTKEY_FLOAT, momentum),
    K("dampening", RG_OPTKEY_FLOAT, dampening),
    K("weight_decay", RG_OPTKEY_FLOAT, weight_decay),
    K("nesterov", RG_OPTKEY_BOOL, nesterov),
};
#undef K

const rg_optim_desc rg_sgd_desc = {
    .name = "sgd", .opts_size = sizeof(rg_sgd_opts), .keys = sgd_keys,
    .n_keys = (int)(sizeof sgd_keys / sizeof sgd_keys[0]), .defaults = sgd_defaults,
    .create = sgd_create,
};
