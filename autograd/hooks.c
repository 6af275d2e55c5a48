/* hooks.c — the per-parameter list of gradient-ready hooks. */
#include "autograd/hooks.h"

#include <stdlib.h>

typedef struct {
    rg_grad_hook_fn fn;
    void *ctx;
    int id;
} hook;

struct rg_grad_hooks {
    hook *items;
    int n, cap, next_id;
};

int rg_grad_hook_add(rg_tensor *param, rg_grad_hook_fn fn, void *ctx) {
    RG_CHECK(param && fn, "rg_grad_hook_add: NULL parameter or function");
    RG_CHECK(!param->grad_fn && (param->flags & RG_TENSOR_REQUIRES_GRAD),
             "rg_grad_hook_add: hooks go on leaf tensors that require a gradient (parameters)");
    struct rg_grad_hooks *h = param->hooks;
    if (!h) {
        h = param->hooks = calloc(1, sizeof *h);
        RG_CHECK(h, "rg_grad_hook_add: out of host memory");
    }
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 2;
        hook *items = realloc(h->items, (size_t)cap * sizeof *items);
        RG_CHECK(items, "rg_grad_hook_add: out of host memory");
        h->items = items, h->cap = cap;
    }
    h->items[h->n] = (hook){fn, ctx, ++h->next_id};
    return h->items[h->n++].id;
}

void rg_grad_hook_remove(rg_tensor *param, int id) {
    struct rg_grad_hooks *h = param->hooks;
    if (!h) return;
    for (int i = 0; i < h->n; i++) {
        if (h->items[i].id != id) continue;
        for (int j = i + 1; j < h->n; j++) h->items[j - 1] = h->items[j];
        h->n--;
        return;
    }
}

void rg_grad_hooks_fire(rg_tensor *param) {
    struct rg_grad_hooks *h = param->hooks;
    if (!h) return;
    for (int i = 0; i < h->n; i++) h->items[i].fn(param, h->items[i].ctx);
}

void rg_grad_hooks_free(struct rg_grad_hooks *h) {
    if (!h) return;
    free(h->items);
    free(h);
}
