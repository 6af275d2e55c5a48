/* shard_state.c — see shard_state.h. */
#include "dist/shard_state.h"

#include <stdio.h>
#include <string.h>

rg_status rg_shard_kinds(const char *optim, const char *options, char kinds[RG_SHARD_MAX_KINDS][32],
                         int *n) {
    int64_t one = 1;
    float w = 0.0f;
    rg_tensor *t = rg_tensor_wrap(RG_F32, 1, &one, RG_CPU, &w);
    if (!t) return rg_error(RG_ENOMEM, "optimizer state: out of host memory");
    rg_tensor_set_requires_grad(t, true);
    rg_named_tensor item = {.name = "x", .tensor = t};
    rg_optim *o = rg_optim_new(optim, &(rg_param_list){&item, 1}, options);
    if (!o) return rg_tensor_free(t), RG_EINVAL; /* its message stands */
    const rg_param_list *st = rg_optim_state(o);
    *n = 0;
    for (int i = 0; i < st->n; i++) {
        const char *name = st->items[i].name, *prefix = "optim.state.x.";
        if (strncmp(name, prefix, strlen(prefix)) != 0 || st->items[i].tensor->dtype != RG_F32)
            continue;
        RG_CHECK(*n < RG_SHARD_MAX_KINDS, "%s: more than %d optimizer buffers", optim,
                 RG_SHARD_MAX_KINDS);
        snprintf(kinds[(*n)++], 32, "%s", name + strlen(prefix));
    }
    rg_optim_free(o);
    rg_tensor_free(t);
    return RG_OK;
}

rg_tensor *rg_shard_state_of(rg_optim *o, const char *param, const char *kind) {
    char name[512];
    snprintf(name, sizeof name, "optim.state.%s.%s", param, kind);
    const rg_named_tensor *t = rg_param_list_find(rg_optim_state(o), name);
    RG_CHECK(t, "the optimizer has no state %s", name);
    return t->tensor;
}

void rg_shard_position(rg_optim *o, int64_t v[2]) {
    float lr = rg_optim_get_lr(o);
    v[0] = rg_optim_num_steps(o), v[1] = 0;
    memcpy(&v[1], &lr, sizeof lr);
}

void rg_shard_set_position(rg_optim *o, const int64_t v[2]) {
    const rg_param_list *st = rg_optim_state(o);
    for (int i = 0; i < st->n; i++) {
        const char *name = st->items[i].name;
        size_t len = strlen(name);
        bool counter =
            strcmp(name, "optim.step") == 0 || (len > 5 && !strcmp(name + len - 5, ".step"));
        if (counter && st->items[i].tensor->dtype == RG_I64)
            *(int64_t *)st->items[i].tensor->data = v[0];
    }
    float lr;
    memcpy(&lr, &v[1], sizeof lr);
    rg_optim_set_lr(o, lr);
}
