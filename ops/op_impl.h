/* op.h — what every op file uses: argument checks that name the op and the shapes, and the
 * backend lookup. Private to ops/. */
#ifndef RG_OP_H
#define RG_OP_H

#include "autograd/autograd_impl.h"
#include "tensor/backend_impl.h"
#include "ringgrad/ops.h"
#include "ringgrad/scope.h"

/* "(128,1,28,28)" as a temporary string, for error messages. */
#define RG_SHAPE_STR(t) rg_shape_str((t)->ndim, (t)->shape, (char[96]){0}, 96)

/* Stops unless t is a float32 tensor. */
static inline void rg_op_check_f32(const char *op, const char *arg, const rg_tensor *t) {
    RG_CHECK(t, "%s: %s is NULL", op, arg);
    RG_CHECK(t->dtype == RG_F32, "%s: %s must be float32, got %s %s", op, arg,
             rg_dtype_name(t->dtype), RG_SHAPE_STR(t));
}

/* Stops unless t has ndim dimensions. */
static inline void rg_op_check_ndim(const char *op, const char *arg, const rg_tensor *t, int ndim) {
    RG_CHECK(t->ndim == ndim, "%s: %s must have %d dimensions, got %s", op, arg, ndim,
             RG_SHAPE_STR(t));
}

/* The backend of a's device, after checking that b (if not NULL) is on the same device. */
static inline const rg_backend *rg_op_backend(const char *op, const rg_tensor *a,
                                              const rg_tensor *b) {
    if (b && !rg_device_eq(a->device, b->device)) {
        char da[16], db[16];
        rg_fatal(__FILE__, __LINE__, "%s: inputs on different devices (%s and %s)", op,
                 rg_device_str(a->device, da, sizeof da), rg_device_str(b->device, db, sizeof db));
    }
    return rg_backend_for(a->device);
}

/* How `small` broadcasts against `big` (NumPy rules, aligned on the right); false if it does not. */
bool rg_bcast_plan(const rg_tensor *big, const rg_tensor *small, rg_bcast *bc);

#endif
