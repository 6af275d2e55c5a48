/* hooks.c — the per-parameter list of gradient-ready hooks.
 *
 * The list hangs off the tensor's extension slot (rg_tensor.ext). It carries its own free
 * function, so the tensor layer frees it with the tensor without knowing what autograd keeps. */
#include "autograd/autograd_impl.h"
#include "core/alloc.h"

#include <stdlib.h>

typedef struct {
    rg_grad_hook_fn fn;
    void *ctx;
    int id;
} hook;

typedef struct {
    rg_tensor_ext base; /* first: rg_tensor.ext points here */
    hook *items;
    int n, cap, next_id;
} hook_list;

static void hook_list_free(rg_tensor_ext *ext) {
    hook_list *h = (hook_list *)ext;
    free(h->items);
    free(h);
}

static hook_list *hooks_of(const rg_tensor *t) {
    return t->ext && t->ext->free == hook_list_free ? (hook_list *)t->ext : NULL;
}

int rg_grad_hook_add(rg_tensor *param, rg_grad_hook_fn fn, void *ctx) {
    RG_CHECK(param && fn, "rg_grad_hook_add: NULL parameter or function");
    RG_CHECK(!param->grad_fn && (param->flags & RG_TENSOR_REQUIRES_GRAD),
             "rg_grad_hook_add: hooks go on leaf tensors that require a gradient (parameters)");
    RG_CHECK(!(param->flags & RG_TENSOR_SCOPED),
             "rg_grad_hook_add: hooks go on long-lived tensors (parameters), not step-scoped ones");
    hook_list *h = hooks_of(param);
    if (!h) {
        RG_CHECK(!param->ext, "rg_grad_hook_add: the tensor's extension slot holds something else");
        h = rg_xcalloc(1, sizeof *h, "rg_grad_hook_add: a hook list");
        h->base.free = hook_list_free;
        param->ext = &h->base;
    }
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 2;
        hook *items = rg_xrealloc(h->items, (size_t)cap * sizeof *items, "rg_grad_hook_add: hooks");
        h->items = items, h->cap = cap;
    }
    h->items[h->n] = (hook){fn, ctx, ++h->next_id};
    return h->items[h->n++].id;
}

void rg_grad_hook_remove(rg_tensor *param, int id) {
    hook_list *h = hooks_of(param);
    if (!h) return;
    for (int i = 0; i < h->n; i++) {
        if (h->items[i].id != id) continue;
        for (int j = i + 1; j < h->n; j++) h->items[j - 1] = h->items[j];
        h->n--;
        return;
    }
}

bool rg_grad_hooks_any(const rg_tensor *param) {
    const hook_list *h = hooks_of(param);
    return h && h->n > 0;
}

void rg_grad_hooks_fire(rg_tensor *param) {
    hook_list *h = hooks_of(param);
    if (!h) return;
    for (int i = 0; i < h->n; i++) h->items[i].fn(param, h->items[i].ctx);
}
