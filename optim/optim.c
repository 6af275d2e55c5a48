/* optim.c — what every optimizer shares: the parameter walk of a step, zeroing gradients, the
 * learning rate and its schedule, and the named state list that checkpoints save.
 *
 * What it teaches: an optimizer is a loop over parameters that calls one fused kernel each (SGD
 * hands the whole list to one multi-tensor call, which on a GPU is a launch per 48 tensors); the
 * rest is bookkeeping. The bookkeeping is what makes a resumed run bit-identical: every number the
 * update depends on (buffers, per-parameter step counts, the global step) is in the state list. */
#include "optim/optim_impl.h"

#include "ringgrad/autograd.h"
#include "tensor/backend_impl.h"
#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *state_name(const char *param, const char *what) {
    size_t n = strlen("optim.state.") + strlen(param) + strlen(what) + 2;
    char *s = rg_xmalloc(n, "optimizer: a state name");
    snprintf(s, n, "optim.state.%s.%s", param, what);
    return s;
}

/* A long-lived int64 scalar tensor over a host counter, so that counters travel with the state. */
static rg_tensor *wrap_counter(int64_t *counter) {
    static const int64_t no_dims[1] = {0};
    return rg_tensor_wrap(RG_I64, 0, no_dims, RG_CPU, counter);
}

static void add_state(rg_optim *o, char *name, rg_tensor *t) {
    o->state.items[o->state.n++] = (rg_named_tensor){.name = name, .tensor = t, .is_buffer = true};
}

/* Fills o->state: "optim.step", then per parameter its step and its buffers. */
static bool build_state(rg_optim *o, const char *const *buf_names) {
    size_t cap = 1 + (size_t)o->n * (1 + (size_t)o->n_bufs);
    o->state.items = calloc(cap, sizeof *o->state.items);
    if (!o->state.items) return false;
    char *global = malloc(sizeof "optim.step");
    if (!global) return false;
    add_state(o, strcpy(global, "optim.step"), wrap_counter(&o->step));
    for (int i = 0; i < o->n; i++) {
        add_state(o, state_name(o->params[i].name, "step"), wrap_counter(&o->param_steps[i]));
        for (int b = 0; b < o->n_bufs; b++) {
            const rg_tensor *p = o->params[i].tensor;
            o->bufs[b][i] = rg_tensor_new(RG_F32, p->ndim, p->shape, p->device);
            if (!o->bufs[b][i]) return false;
            add_state(o, state_name(o->params[i].name, buf_names[b]), o->bufs[b][i]);
        }
    }
    return true;
}

rg_optim *rg_optim_alloc(size_t size, const rg_param_list *params, int n_bufs,
                         const char *const *buf_names) {
    RG_CHECK(params, "optimizer: NULL parameter list");
    RG_CHECK(n_bufs >= 0 && n_bufs <= RG_OPTIM_MAX_BUFS, "optimizer: %d buffers", n_bufs);
    RG_CHECK(size >= sizeof(rg_optim), "optimizer: struct of %zu bytes", size);
    rg_optim *o = calloc(1, size);
    if (!o) return rg_error(RG_ENOMEM, "optimizer: out of host memory"), NULL;
    o->grad_scale = 1.0f;
    o->n_bufs = n_bufs;
    o->params = calloc((size_t)params->n + 1, sizeof *o->params);
    o->param_steps = calloc((size_t)params->n + 1, sizeof *o->param_steps);
    o->no_decay = calloc((size_t)params->n + 1, sizeof *o->no_decay);
    o->ready = calloc((size_t)params->n + 1, sizeof *o->ready);
    for (int b = 0; b < n_bufs; b++)
        o->bufs[b] = calloc((size_t)params->n + 1, sizeof(rg_tensor *));
    bool ok = o->params && o->param_steps && o->no_decay && o->ready &&
              (n_bufs < 1 || o->bufs[0]) && (n_bufs < 2 || o->bufs[1]);
    for (int i = 0; ok && i < params->n; i++) {
        const rg_named_tensor *p = &params->items[i];
        if (p->is_buffer) continue;
        RG_CHECK(p->tensor->dtype == RG_F32, "optimizer: parameter %s is %s, not float32", p->name,
                 rg_dtype_name(p->tensor->dtype));
        o->params[o->n++] = *p;
    }
    /* The same tensor twice would be stepped twice a step (and on a GPU, by two blocks of one
     * multi-tensor launch at once). torch.optim refuses duplicates too. */
    for (int i = 0; ok && i < o->n; i++)
        for (int j = 0; j < i; j++)
            if (o->params[i].tensor->numel > 0 &&
                o->params[i].tensor->data == o->params[j].tensor->data) {
                rg_error(RG_EINVAL,
                         "optimizer: parameters %s and %s are the same tensor, which would be "
                         "updated twice a step: list each parameter once",
                         o->params[j].name, o->params[i].name);
                rg_optim_free(o);
                return NULL;
            }
    if (!ok || !build_state(o, buf_names)) {
        rg_optim_free(o);
        rg_error(RG_ENOMEM, "optimizer: out of memory for the state of %d parameters", params->n);
        return NULL;
    }
    return o;
}

void rg_optim_free(rg_optim *o) {
    if (!o) return;
    for (int i = 0; o->state.items && i < o->state.n; i++) {
        free((char *)o->state.items[i].name);
        rg_tensor_free(o->state.items[i].tensor); /* counters are wrapped: only the header goes */
    }
    free(o->state.items);
    for (int b = 0; b < o->n_bufs; b++) free(o->bufs[b]);
    free(o->param_steps);
    free(o->no_decay);
    free(o->ready);
    free(o->params);
    free(o);
}

void rg_optim_step(rg_optim *o) {
    RG_CHECK(o, "rg_optim_step: NULL optimizer");
    int count = 0;
    for (int i = 0; i < o->n; i++) {
        const rg_tensor *p = o->params[i].tensor;
        if (!p->grad) continue; /* as torch: no gradient, no update, no state change */
        for (int b = 0; b < o->n_bufs; b++)
            RG_CHECK(rg_device_eq(o->bufs[b][i]->device, p->device),
                     "%s: parameter %s moved to another device after the optimizer was created",
                     o->kind, o->params[i].name);
        o->ready[count++] = i;
    }
    if (count > 0) o->update(o, o->ready, count); /* reads param_steps as they were */
    for (int j = 0; j < count; j++) o->param_steps[o->ready[j]]++;
    o->step++;
    if (o->has_schedule) o->lr = rg_lr_schedule_at(&o->schedule, o->step);
}

/* Zeroes the gradients that exist, a batch at a time per device: one zero_f32_many call (on a
 * GPU, one launch per 128 tensors instead of a memset per tensor). */
void rg_optim_zero_grad(rg_optim *o) {
    enum { BATCH = 128 };
    float *p[BATCH];
    int64_t n[BATCH];
    int count = 0;
    rg_device dev = {0};
    for (int i = 0; i < o->n; i++) {
        const rg_tensor *g = o->params[i].tensor->grad;
        if (!g) continue;
        RG_CHECK(g->dtype == RG_F32, "%s: gradient of %s is not float32", o->kind,
                 o->params[i].name);
        if (count == BATCH || (count > 0 && !rg_device_eq(g->device, dev))) {
            rg_backend_for(dev)->zero_f32_many(count, p, n);
            count = 0;
        }
        dev = g->device;
        p[count] = g->data, n[count] = g->numel, count++;
    }
    if (count > 0) rg_backend_for(dev)->zero_f32_many(count, p, n);
}

float rg_optim_get_lr(const rg_optim *o) {
    return o->lr;
}

void rg_optim_set_lr(rg_optim *o, float lr) {
    RG_CHECK(lr >= 0.0f, "%s: learning rate %g is negative", o->kind, (double)lr);
    o->lr = lr;
}

void rg_optim_set_grad_scale(rg_optim *o, float scale) {
    RG_CHECK(o && scale > 0.0f && isfinite(scale), "rg_optim_set_grad_scale: scale %g must be positive",
             (double)scale);
    o->grad_scale = scale;
}

float rg_optim_get_grad_scale(const rg_optim *o) {
    return o->grad_scale;
}

int64_t rg_optim_num_steps(const rg_optim *o) {
    return o->step;
}

const char *rg_optim_kind(const rg_optim *o) {
    return o->kind;
}

void rg_optim_set_schedule(rg_optim *o, const rg_lr_schedule *s) {
    o->has_schedule = s != NULL;
    if (!s) return;
    o->schedule = *s;
    o->lr = rg_lr_schedule_at(s, o->step);
}

float rg_optim_decay_of(const rg_optim *o, int i, float weight_decay) {
    return o->no_decay[i] ? 0.0f : weight_decay;
}

int rg_optim_exclude_decay(rg_optim *o, const char *name) {
    RG_CHECK(o && name, "rg_optim_exclude_decay: NULL optimizer or name");
    int found = 0;
    for (int i = 0; i < o->n; i++) /* zero1 and ps: every piece of the parameter this rank holds */
        if (strcmp(o->params[i].name, name) == 0) o->no_decay[i] = true, found++;
    return found;
}

bool rg_param_takes_decay(const rg_tensor *p) {
    return p->ndim >= 2;
}

int rg_optim_exclude_decay_1d(rg_optim *o, const rg_param_list *params) {
    RG_CHECK(o && params, "rg_optim_exclude_decay_1d: NULL optimizer or parameters");
    int excluded = 0;
    for (int i = 0; i < params->n; i++) {
        const rg_named_tensor *p = &params->items[i];
        if (p->is_buffer || rg_param_takes_decay(p->tensor)) continue;
        excluded += rg_optim_exclude_decay(o, p->name) > 0;
    }
    return excluded;
}

bool rg_optim_decays(const rg_optim *o, const char *name) {
    RG_CHECK(o && name, "rg_optim_decays: NULL optimizer or name");
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->params[i].name, name) == 0) return !o->no_decay[i];
    return false;
}

const rg_param_list *rg_optim_state(rg_optim *o) {
    return &o->state;
}

size_t rg_optim_state_bytes(const rg_optim *o) {
    size_t bytes = 0;
    for (int b = 0; b < o->n_bufs; b++)
        for (int i = 0; i < o->n; i++) bytes += (size_t)o->bufs[b][i]->numel * sizeof(float);
    return bytes;
}
