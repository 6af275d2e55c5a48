/* layer.c — what every layer shares: allocation, naming, parameter registration, containers and
 * the recursive free and visit.
 *
 * What it teaches: a module system needs little more than a vtable and a list. Names are built
 * once, when a tensor is registered, so a container's list is a plain concatenation of its
 * children's and a state_dict is just that list. */
#include "ringgrad/layer.h"
#include "core/alloc.h"
#include "ringgrad/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = rg_xmalloc(n, "layer: a name");
    return memcpy(d, s, n);
}

rg_layer *rg_layer_alloc(size_t size, const rg_layer_vtable *vt, const char *name) {
    RG_CHECK(size >= sizeof(rg_layer) && vt && vt->forward, "rg_layer_alloc: bad layer type");
    rg_layer *l = rg_xcalloc(1, size, "layer: its struct");
    l->vt = vt;
    l->name = dup_str(name ? name : "");
    return l;
}

/* Appends one entry to a list; the list's array grows by doubling (capacity = next power of 2). */
static void list_append(rg_param_list *list, rg_named_tensor item) {
    int n = list->n;
    if ((n & (n - 1)) == 0) { /* n is 0 or a power of two: the array is full */
        size_t cap = n ? 2 * (size_t)n : 4;
        rg_named_tensor *items = rg_xrealloc(list->items, cap * sizeof *items, "layer: its tensor list");
        list->items = items;
    }
    list->items[list->n++] = item;
}

rg_tensor *rg_layer_add_param(rg_layer *l, const char *local, rg_tensor *t, bool is_buffer) {
    RG_CHECK(l && local && t, "rg_layer_add_param: NULL argument");
    RG_CHECK(!l->children, "layer %s: a container holds its children's tensors, not its own",
             l->name);
    size_t n = strlen(l->name) + strlen(local) + 2;
    char *name = rg_xmalloc(n, "layer: a tensor name");
    snprintf(name, n, "%s%s%s", l->name, l->name[0] ? "." : "", local);
    for (int i = 0; i < l->params.n; i++)
        RG_CHECK(strcmp(l->params.items[i].name, name) != 0,
                 "layer %s: a tensor named '%s' twice (a checkpoint could not tell them apart)",
                 l->name, name);
    if (!is_buffer) rg_tensor_set_requires_grad(t, true);
    list_append(&l->params, (rg_named_tensor){.name = name, .tensor = t, .is_buffer = is_buffer});
    return t;
}

rg_layer *rg_layer_add(rg_layer *l, rg_layer *child) {
    RG_CHECK(l && child, "rg_layer_add: NULL layer");
    RG_CHECK(l->children || l->params.n == 0,
             "layer %s: a layer with its own tensors cannot hold children", l->name);
    /* A container owns its children (rg_layer_free frees them): one added twice, or to two
     * containers, was freed twice; nn.Sequential allows that because Python counts references. */
    RG_CHECK(!child->parent,
             "rg_layer_add: layer '%s' is already in '%s'; a layer belongs to one container: make "
             "one for each place (another rg_relu_new, say)",
             child->name, child->parent->name);
    for (const rg_layer *a = l; a; a = a->parent)
        RG_CHECK(a != child, "rg_layer_add: layer '%s' would contain itself", child->name);
    int n = l->n_children;
    if ((n & (n - 1)) == 0) {
        size_t cap = n ? 2 * (size_t)n : 4;
        rg_layer **c = rg_xrealloc(l->children, cap * sizeof *c, "layer: its children");
        l->children = c;
    }
    /* two children of one name (two rg_linear_new("fc", ...)) would give two tensors one name,
     * which a checkpoint cannot tell apart: said here, where the model is built */
    for (int i = 0; i < child->params.n; i++)
        for (int j = 0; j < l->params.n; j++)
            RG_CHECK(strcmp(child->params.items[i].name, l->params.items[j].name) != 0,
                     "rg_layer_add: layer '%s' has a tensor '%s', and so has another layer of '%s' "
                     "(give each layer its own name)",
                     child->name, child->params.items[i].name, l->name[0] ? l->name : "the model");
    l->children[l->n_children++] = child;
    child->parent = l;
    for (int i = 0; i < child->params.n; i++) list_append(&l->params, child->params.items[i]);
    return child;
}

rg_tensor *rg_layer_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    RG_CHECK(l && x, "rg_layer_forward: NULL argument");
    RG_CHECK((unsigned)mode < RG_MODE_COUNT, "layer %s: bad mode %d", l->name, (int)mode);
    if (l->n_children > 0 || !rg_trace_ops_enabled()) return l->vt->forward(l, x, mode);
    /* a leaf's forward as a timeline event named by its kind (rg_trace_set_ops); a container's
     * time is its children's */
    rg_trace_begin(l->vt->kind, "forward op");
    rg_tensor *y = l->vt->forward(l, x, mode);
    rg_trace_end();
    return y;
}

const rg_param_list *rg_layer_params(const rg_layer *l) {
    return &l->params;
}

void rg_layer_free(rg_layer *l) {
    if (!l) return;
    if (l->vt->free) l->vt->free(l);
    if (l->children) {
        for (int i = 0; i < l->n_children; i++) rg_layer_free(l->children[i]);
        free(l->children);
    } else { /* a leaf owns its tensors and their names */
        for (int i = 0; i < l->params.n; i++) {
            rg_tensor_free(l->params.items[i].tensor);
            free((char *)l->params.items[i].name);
        }
    }
    free(l->params.items);
    free(l->name);
    free(l);
}

void rg_layer_visit(rg_layer *l, void (*fn)(rg_layer *layer, void *ctx), void *ctx) {
    fn(l, ctx);
    for (int i = 0; i < l->n_children; i++) rg_layer_visit(l->children[i], fn, ctx);
}
