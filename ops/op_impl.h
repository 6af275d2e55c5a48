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

/* A square max-pool window (kernel, stride, padding) over (n, c, h, w) planes, after checking it
 * (the padding at most half the kernel, as PyTorch; the window within the padded plane); the
 * output size as PyTorch's. `op` names the caller in the message. */
static inline rg_pool2d_shape rg_op_pool_shape(const char *op, int64_t n, int64_t c, int64_t h,
                                               int64_t w, int kernel, int stride, int pad) {
    RG_CHECK(kernel >= 1 && stride >= 1 && pad >= 0 && 2 * pad <= kernel,
             "%s: pool kernel %d, stride %d, padding %d (padding may be at most half the kernel)",
             op, kernel, stride, pad);
    RG_CHECK(h + 2 * pad >= kernel && w + 2 * pad >= kernel,
             "%s: pool kernel %d larger than the padded input plane (%lld, %lld)", op, kernel,
             (long long)h, (long long)w);
    rg_pool2d_shape s = {.n = n, .c = c, .h = h, .w = w};
    s.kernel_h = s.kernel_w = kernel, s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
    s.p = (h + 2 * pad - kernel) / stride + 1;
    s.q = (w + 2 * pad - kernel) / stride + 1;
    return s;
}

/* How `small` broadcasts against `big` (NumPy rules, aligned on the right); false if it does not. */
bool rg_bcast_plan(const rg_tensor *big, const rg_tensor *small, rg_bcast *bc);

#endif
