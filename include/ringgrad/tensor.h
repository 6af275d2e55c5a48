/* tensor.h — the tensor: dtype, shape, device and a pointer to contiguous row-major storage.
 *
 * Two lifetimes, and nothing in between:
 *   - long-lived tensors (parameters, optimizer state, datasets) come from rg_tensor_new() or
 *     rg_tensor_wrap() and are freed with rg_tensor_free();
 *   - every tensor an op makes during a step belongs to the current step scope (ringgrad/scope.h)
 *     and is freed by rg_scope_end(). A training loop never frees tensors one by one.
 *
 * The struct is public so that kernels and readers can see the fields; treat them as read-only
 * and change them only through these functions. Layouts follow PyTorch: images NCHW, conv
 * weights OIHW, linear weights [out, in]. */
#ifndef RG_TENSOR_H
#define RG_TENSOR_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_MAX_DIMS 6

typedef enum { RG_F32, RG_I32, RG_I64, RG_U8, RG_DTYPE_COUNT } rg_dtype;

typedef enum { RG_DEV_CPU, RG_DEV_CUDA, RG_DEVICE_TYPE_COUNT } rg_device_type;

typedef struct {
    rg_device_type type;
    int index; /* cuda:N; 0 for the CPU */
} rg_device;

#define RG_CPU ((rg_device){RG_DEV_CPU, 0})
#define RG_CUDA_DEVICE(i) ((rg_device){RG_DEV_CUDA, (i)})

/* Shape literals: rg_tensor_new(RG_F32, RG_SHAPE(2, 3), RG_CPU) */
#define RG_SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

enum {
    RG_TENSOR_SCOPED = 1u << 0,        /* freed by rg_scope_end */
    RG_TENSOR_OWNS_DATA = 1u << 1,     /* data was allocated for this tensor (else a view) */
    RG_TENSOR_REQUIRES_GRAD = 1u << 2, /* backward computes a gradient for it */
};

struct rg_node;

/* State that a higher layer keeps per tensor (autograd's hook list). The tensor layer only frees
 * it, through the function it carries, so that tensor/ never depends on what lies above it. */
typedef struct rg_tensor_ext {
    void (*free)(struct rg_tensor_ext *ext);
} rg_tensor_ext;

typedef struct rg_tensor {
    /* read-only: set by the constructors, changed only through the functions below */
    rg_dtype dtype;
    rg_device device;
    int ndim;
    int64_t shape[RG_MAX_DIMS];
    int64_t numel;
    void *data; /* numel elements, contiguous, row-major, on `device`; the contents are public */
    unsigned flags;

    /* public: the gradient, same shape and device; NULL until the first backward. Read it after
     * rg_backward; optimizers and DDP read and write it. */
    struct rg_tensor *grad;

    /* private */
    struct rg_node *grad_fn;      /* the tape node that produced this tensor; NULL for a leaf */
    rg_tensor_ext *ext;           /* a higher layer's state (autograd's hooks), or NULL */
    struct rg_tensor *scope_next; /* the owning scope's list */
} rg_tensor;

/* ---- dtypes and devices ---- */
RG_API size_t rg_dtype_size(rg_dtype dt);
RG_API const char *rg_dtype_name(rg_dtype dt);
/* "cpu" or "cuda:N", written into buf (at least 16 bytes); returns buf. */
RG_API const char *rg_device_str(rg_device dev, char *buf, size_t n);
RG_API bool rg_device_eq(rg_device a, rg_device b);
/* Parses "cpu", "cuda" or "cuda:N". */
RG_API RG_NODISCARD rg_status rg_device_parse(const char *s, rg_device *out);

/* ---- long-lived tensors (the caller frees) ---- */

/* A zero-filled tensor. Stops (RG_CHECK) on a bad shape; returns NULL with rg_last_error() set
 * when memory runs out. */
RG_API rg_tensor *rg_tensor_new(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev);
/* A tensor over memory the caller owns and keeps alive (a bucket slice, a pinned batch). */
RG_API
rg_tensor *rg_tensor_wrap(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev, void *data);
/* Frees t, its data if it owns it, its gradient and its hooks. NULL is a no-op. A scoped tensor
 * may not be freed this way (RG_CHECK). */
RG_API void rg_tensor_free(rg_tensor *t);
/* Takes t out of its scope: it becomes long-lived and detached from the tape. Returns t. */
RG_API rg_tensor *rg_tensor_keep(rg_tensor *t);

/* ---- scoped tensors (freed by rg_scope_end) ---- */

/* Uninitialised tensor in the current scope. */
RG_API rg_tensor *rg_tensor_empty(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev);
RG_API rg_tensor *rg_tensor_zeros(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev);
RG_API rg_tensor *rg_tensor_empty_like(const rg_tensor *t);
/* A scoped tensor that shares t's data with another shape of the same element count. */
RG_API rg_tensor *rg_tensor_view(const rg_tensor *t, int ndim, const int64_t *shape);
/* A scoped copy of t on dev. */
RG_API rg_tensor *rg_tensor_to(const rg_tensor *t, rg_device dev);
/* A scoped float32 tensor holding host data (n = product of shape). */
RG_API
rg_tensor *rg_tensor_from_f32(int ndim, const int64_t *shape, const float *host, rg_device dev);

/* ---- contents ---- */
RG_API size_t rg_tensor_nbytes(const rg_tensor *t);
RG_API
void rg_tensor_copy_(rg_tensor *dst, const rg_tensor *src); /* same shape and dtype, any devices */
RG_API void rg_tensor_copy_from_host(rg_tensor *t, const void *src); /* rg_tensor_nbytes(t) bytes */
RG_API void rg_tensor_copy_to_host(const rg_tensor *t, void *dst);
RG_API void rg_tensor_zero_(rg_tensor *t);
RG_API void rg_tensor_fill_(rg_tensor *t, float v); /* float32 */
/* Counter-based random fills. A (seed, offset) pair names a position in an endless stream of
 * uniform numbers (core/kernels.h); element i of t uses stream element *offset + i (two of them
 * per normal). *offset advances past what was used, so consecutive calls give fresh numbers. */
RG_API void rg_tensor_uniform_(rg_tensor *t, float lo, float hi, uint64_t seed, uint64_t *offset);
RG_API void rg_tensor_normal_(rg_tensor *t, float mean, float std, uint64_t seed, uint64_t *offset);
/* The value of a one-element float32 tensor, copied to the host. */
RG_API float rg_tensor_item(const rg_tensor *t);
/* Host pointer to a float32 CPU tensor's data (RG_CHECK otherwise). */
RG_API float *rg_tensor_f32(const rg_tensor *t);

/* ---- shapes ---- */
RG_API bool rg_tensor_same_shape(const rg_tensor *a, const rg_tensor *b);
/* "(128,1,28,28)" into buf; returns buf. */
RG_API const char *rg_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
RG_API int64_t rg_shape_numel(int ndim, const int64_t *shape);

/* ---- autograd flags ---- */
RG_API void rg_tensor_set_requires_grad(rg_tensor *t, bool on);
static inline bool rg_tensor_requires_grad(const rg_tensor *t) {
    return (t->flags & RG_TENSOR_REQUIRES_GRAD) != 0;
}

#ifdef __cplusplus
}
#endif

#endif
