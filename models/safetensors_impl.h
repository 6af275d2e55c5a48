/* safetensors_impl.h — the format's dtype table, shared by the reader and the writer. Private to
 * models/. */
#ifndef RG_SAFETENSORS_IMPL_H
#define RG_SAFETENSORS_IMPL_H

#include <stddef.h>

#include "ringgrad/tensor.h"

typedef struct {
    const char *name; /* "F32" */
    size_t size;      /* bytes per element */
    int rg;           /* the rg_dtype with this layout, or -1 when ringgrad has none */
} rg_st_dtype;

/* The format's dtype called `name`, or NULL when the format has none. */
const rg_st_dtype *rg_st_dtype_find(const char *name);

#endif
