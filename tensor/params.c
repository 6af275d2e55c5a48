/* params.c — lookups over a named tensor list, and moving a model's tensors to a device. */
#include "ringgrad/params.h"

#include <string.h>

const rg_named_tensor *rg_param_list_find(const rg_param_list *list, const char *name) {
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->items[i].name, name) == 0) return &list->items[i];
    return NULL;
}

int64_t rg_param_list_numel(const rg_param_list *list) {
    int64_t n = 0;
    for (int i = 0; i < list->n; i++)
        if (!list->items[i].is_buffer) n += list->items[i].tensor->numel;
    return n;
}

rg_status rg_param_list_to_device(const rg_param_list *list, rg_device dev) {
    for (int i = 0; i < list->n; i++) {
        rg_tensor *t = list->items[i].tensor;
        if (rg_device_eq(t->device, dev)) continue;
        rg_tensor *moved = rg_tensor_new(t->dtype, t->ndim, t->shape, dev);
        if (!moved)
            return rg_error(RG_ENOMEM, "moving %s: %s", list->items[i].name, rg_last_error());
        rg_tensor_copy_(moved, t);
        /* Swap storage, so that t keeps its identity and `moved` frees the old block (only if
         * t owned it: a wrapped tensor's memory belongs to someone else). */
        void *data = t->data;
        rg_device old = t->device;
        unsigned owned = t->flags & RG_TENSOR_OWNS_DATA;
        t->data = moved->data, t->device = moved->device;
        t->flags |= RG_TENSOR_OWNS_DATA;
        moved->data = data, moved->device = old;
        moved->flags = (moved->flags & ~(unsigned)RG_TENSOR_OWNS_DATA) | owned;
        rg_tensor_free(moved);
        rg_tensor_free(t->grad);
        t->grad = NULL;
    }
    return RG_OK;
}
