/* tensor.c — creation, lifetimes, copies and fills of tensors.
 *
 * A tensor header is small and the data is one contiguous block from the device's backend.
 * Scoped headers live in the scope's arena; long-lived headers come from malloc. */
#include "ringgrad/tensor.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/backend_impl.h"
#include "tensor/scope_impl.h"
#include "core/alloc.h"

#define RG_MAX_NUMEL (INT64_C(1) << 40) /* elements of one tensor, and of one dimension */

static const size_t dtype_sizes[] = {4, 4, 8, 1};
static const char *const dtype_names[] = {"float32", "int32", "int64", "uint8"};
_Static_assert(sizeof dtype_sizes / sizeof dtype_sizes[0] == RG_DTYPE_COUNT, "dtype sizes");
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == RG_DTYPE_COUNT, "dtype names");

size_t rg_dtype_size(rg_dtype dt) {
    RG_CHECK((unsigned)dt < RG_DTYPE_COUNT, "bad dtype %d", (int)dt);
    return dtype_sizes[dt];
}

const char *rg_dtype_name(rg_dtype dt) {
    return (unsigned)dt < RG_DTYPE_COUNT ? dtype_names[dt] : "<bad dtype>";
}

const char *rg_device_str(rg_device dev, char *buf, size_t n) {
    if (dev.type == RG_DEV_CPU) snprintf(buf, n, "cpu");
    else snprintf(buf, n, "cuda:%d", dev.index);
    return buf;
}

bool rg_device_eq(rg_device a, rg_device b) { return a.type == b.type && a.index == b.index; }

rg_status rg_device_parse(const char *s, rg_device *out) {
    if (!s) return rg_error(RG_EINVAL, "device: missing name");
    if (strcmp(s, "cpu") == 0) return *out = RG_CPU, RG_OK;
    if (strcmp(s, "cuda") == 0) return *out = RG_CUDA_DEVICE(0), RG_OK;
    /* "cuda:" then digits only: strtol alone would take a sign or spaces; errno catches overflow */
    if (strncmp(s, "cuda:", 5) == 0 && s[5] >= '0' && s[5] <= '9') {
        char *end;
        errno = 0;
        long idx = strtol(s + 5, &end, 10);
        if (*end == '\0' && errno == 0 && idx <= INT_MAX)
            return *out = RG_CUDA_DEVICE((int)idx), RG_OK;
    }
    return rg_error(RG_EINVAL, "device '%s': expected cpu, cuda or cuda:N", s);
}

int64_t rg_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

const char *rg_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, i ? "," : "", shape[i]);
    if (used < n) snprintf(buf + used, n - used, ")");
    return buf;
}

bool rg_tensor_same_shape(const rg_tensor *a, const rg_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

size_t rg_tensor_nbytes(const rg_tensor *t) { return (size_t)t->numel * rg_dtype_size(t->dtype); }

static void init_header(rg_tensor *t, rg_dtype dt, int ndim, const int64_t *shape, rg_device dev) {
    RG_CHECK((unsigned)dt < RG_DTYPE_COUNT, "tensor: bad dtype %d", (int)dt);
    RG_CHECK(ndim >= 0 && ndim <= RG_MAX_DIMS, "tensor: %d dimensions (at most %d)", ndim,
             RG_MAX_DIMS);
    RG_CHECK(ndim == 0 || shape, "tensor: NULL shape for %d dimensions", ndim);
    int64_t nonzero = 1; /* product of the non-zero sizes, kept from overflowing int64 */
    for (int i = 0; i < ndim; i++) {
        RG_CHECK(shape[i] >= 0 && shape[i] <= RG_MAX_NUMEL, "tensor: bad size %" PRId64
                 " in dimension %d", shape[i], i);
        if (shape[i] == 0) continue;
        RG_CHECK(nonzero <= RG_MAX_NUMEL / shape[i], "tensor: shape %s has too many elements "
                 "(at most 2^40)", rg_shape_str(ndim, shape, (char[160]){0}, 160));
        nonzero *= shape[i];
    }
    t->dtype = dt;
    t->device = dev;
    t->ndim = ndim;
    if (ndim > 0) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape); /* shape may be NULL */
    t->numel = rg_shape_numel(ndim, shape);
}

/* Allocates t's data from its backend; false when memory runs out. */
/* "812 kB", "4.72 MB", "5.19 GB" (powers of 1000, three significant digits or so). */
static const char *size_str(size_t bytes, char *buf, size_t cap) {
    const char *unit[] = {"bytes", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, u++;
    snprintf(buf, cap,
             u == 0    ? "%.0f %s"
             : v < 10  ? "%.2f %s"
             : v < 100 ? "%.1f %s"
                       : "%.0f %s",
             v, unit[u]);
    return buf;
}

static bool alloc_data(rg_tensor *t) {
    size_t bytes = rg_tensor_nbytes(t);
    t->data = rg_backend_for(t->device)->alloc(bytes);
    if (!t->data && bytes) {
        char d[16], sh[96], want[24], used[24], cached[24], cap[24], why[64] = "";
        rg_mem_stats m = rg_mem_stats_get(t->device);
        size_t limit = SIZE_MAX; /* the cap that refused it, when there is one */
        if (t->device.type == RG_DEV_CPU && rg_env_cpu_mem_limit(&limit) == RG_OK &&
            limit != SIZE_MAX)
            snprintf(why, sizeof why, "; RG_CPU_MEM_LIMIT caps them at %s",
                     size_str(limit, cap, sizeof cap));
        rg_error(RG_ENOMEM,
                 "out of memory allocating %s for a %s tensor %s on %s, with %s already in use by "
                 "tensors (%s more cached)%s",
                 size_str(bytes, want, sizeof want), rg_dtype_name(t->dtype),
                 rg_shape_str(t->ndim, t->shape, sh, sizeof sh),
                 rg_device_str(t->device, d, sizeof d), size_str(m.in_use, used, sizeof used),
                 size_str(m.cached, cached, sizeof cached), why);
        return false;
    }
    t->flags |= RG_TENSOR_OWNS_DATA;
    return true;
}

rg_tensor *rg_tensor_new(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev) {
    rg_tensor *t = calloc(1, sizeof *t);
    if (!t) return rg_error(RG_ENOMEM, "out of host memory for a tensor header"), NULL;
    init_header(t, dt, ndim, shape, dev);
    if (!alloc_data(t)) return free(t), NULL;
    rg_backend_for(dev)->memset0(t->data, rg_tensor_nbytes(t));
    return t;
}

rg_tensor *rg_tensor_wrap(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev, void *data) {
    rg_tensor *t = rg_xcalloc(1, sizeof *t, "rg_tensor_wrap: a tensor header");
    init_header(t, dt, ndim, shape, dev);
    t->data = data;
    return t;
}

void rg_tensor_free(rg_tensor *t) {
    if (!t) return;
    RG_CHECK(!(t->flags & RG_TENSOR_SCOPED),
             "rg_tensor_free: tensor belongs to a step scope; rg_scope_end() frees it");
    if (t->flags & RG_TENSOR_OWNS_DATA) rg_backend_for(t->device)->free(t->data, rg_tensor_nbytes(t));
    rg_tensor_free(t->grad);
    if (t->ext) t->ext->free(t->ext);
    free(t);
}

rg_tensor *rg_tensor_keep(rg_tensor *t) {
    RG_CHECK(t, "rg_tensor_keep: NULL tensor");
    if (!(t->flags & RG_TENSOR_SCOPED)) return t;
    RG_CHECK(t->flags & RG_TENSOR_OWNS_DATA, "rg_tensor_keep: a view cannot outlive its scope");
    rg_tensor *k = rg_xcalloc(1, sizeof *k, "rg_tensor_keep: a tensor header");
    init_header(k, t->dtype, t->ndim, t->shape, t->device);
    k->data = t->data;
    k->flags = RG_TENSOR_OWNS_DATA;
    t->flags &= ~(unsigned)RG_TENSOR_OWNS_DATA; /* the scoped header no longer frees the data */
    return k;
}

rg_tensor *rg_tensor_empty(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev) {
    rg_tensor *t = rg_scope_alloc(sizeof *t);
    init_header(t, dt, ndim, shape, dev);
    if (!alloc_data(t)) {
        /* Running out of memory mid-step is not recoverable inside an op: say what and stop. */
        rg_fatal_oom(__FILE__, __LINE__, "%s", rg_last_error());
    }
    rg_scope_adopt(t);
    return t;
}

rg_tensor *rg_tensor_zeros(rg_dtype dt, int ndim, const int64_t *shape, rg_device dev) {
    rg_tensor *t = rg_tensor_empty(dt, ndim, shape, dev);
    rg_backend_for(dev)->memset0(t->data, rg_tensor_nbytes(t));
    return t;
}

rg_tensor *rg_tensor_empty_like(const rg_tensor *t) {
    return rg_tensor_empty(t->dtype, t->ndim, t->shape, t->device);
}

rg_tensor *rg_tensor_view(const rg_tensor *t, int ndim, const int64_t *shape) {
    rg_tensor *v = rg_scope_alloc(sizeof *v);
    init_header(v, t->dtype, ndim, shape, t->device);
    char a[96], b[96];
    RG_CHECK(v->numel == t->numel, "view: cannot view %s as %s",
             rg_shape_str(t->ndim, t->shape, a, sizeof a), rg_shape_str(ndim, shape, b, sizeof b));
    v->data = t->data;
    rg_scope_adopt(v);
    return v;
}

static rg_copy_kind copy_kind(rg_device dst, rg_device src) {
    bool d = dst.type != RG_DEV_CPU, s = src.type != RG_DEV_CPU;
    return d ? (s ? RG_COPY_D2D : RG_COPY_H2D) : (s ? RG_COPY_D2H : RG_COPY_H2H);
}

/* The backend that performs a copy: the device side's, if either side is a device. */
static const rg_backend *copy_backend(rg_device dst, rg_device src) {
    return rg_backend_for(dst.type != RG_DEV_CPU ? dst : src);
}

void rg_tensor_copy_(rg_tensor *dst, const rg_tensor *src) {
    char a[96], b[96];
    RG_CHECK(dst->dtype == src->dtype && rg_tensor_same_shape(dst, src),
             "copy: %s %s into %s %s", rg_dtype_name(src->dtype),
             rg_shape_str(src->ndim, src->shape, a, sizeof a), rg_dtype_name(dst->dtype),
             rg_shape_str(dst->ndim, dst->shape, b, sizeof b));
    if (dst->data == src->data) return;
    copy_backend(dst->device, src->device)
        ->copy(dst->data, src->data, rg_tensor_nbytes(src), copy_kind(dst->device, src->device));
}

void rg_tensor_copy_from_host(rg_tensor *t, const void *src) {
    RG_CHECK(t && (src || rg_tensor_nbytes(t) == 0), "rg_tensor_copy_from_host: NULL argument");
    rg_backend_for(t->device)->copy(t->data, src, rg_tensor_nbytes(t), copy_kind(t->device, RG_CPU));
}

void rg_tensor_copy_to_host(const rg_tensor *t, void *dst) {
    RG_CHECK(t && (dst || rg_tensor_nbytes(t) == 0), "rg_tensor_copy_to_host: NULL argument");
    rg_backend_for(t->device)->copy(dst, t->data, rg_tensor_nbytes(t), copy_kind(RG_CPU, t->device));
}

rg_tensor *rg_tensor_to(const rg_tensor *t, rg_device dev) {
    rg_tensor *out = rg_tensor_empty(t->dtype, t->ndim, t->shape, dev);
    rg_tensor_copy_(out, t);
    return out;
}

rg_tensor *rg_tensor_from_f32(int ndim, const int64_t *shape, const float *host, rg_device dev) {
    rg_tensor *t = rg_tensor_empty(RG_F32, ndim, shape, dev);
    RG_CHECK(host || rg_tensor_nbytes(t) == 0, "rg_tensor_from_f32: NULL data");
    rg_tensor_copy_from_host(t, host);
    return t;
}

void rg_tensor_zero_(rg_tensor *t) { rg_backend_for(t->device)->memset0(t->data, rg_tensor_nbytes(t)); }

static void check_f32(const rg_tensor *t, const char *op) {
    RG_CHECK(t->dtype == RG_F32, "%s: needs a float32 tensor, got %s", op, rg_dtype_name(t->dtype));
}

void rg_tensor_fill_(rg_tensor *t, float v) {
    check_f32(t, "fill");
    rg_backend_for(t->device)->fill(t->numel, v, t->data);
}

void rg_tensor_uniform_(rg_tensor *t, float lo, float hi, uint64_t seed, uint64_t *offset) {
    check_f32(t, "uniform");
    rg_backend_for(t->device)->uniform(t->numel, lo, hi, seed, *offset, t->data);
    *offset += ((uint64_t)t->numel + 3) & ~(uint64_t)3; /* whole Philox counters */
}

void rg_tensor_normal_(rg_tensor *t, float mean, float std, uint64_t seed, uint64_t *offset) {
    check_f32(t, "normal");
    /* Normals take uniforms in pairs (2k, 2k+1): start on an even element, so that an odd
     * offset skips one number instead of reusing the one before it. */
    uint64_t start = (*offset + 1) & ~(uint64_t)1;
    rg_backend_for(t->device)->normal(t->numel, mean, std, seed, start, t->data);
    *offset = start + ((2 * (uint64_t)t->numel + 3) & ~(uint64_t)3); /* two uniforms per normal */
}

float rg_tensor_item(const rg_tensor *t) {
    check_f32(t, "item");
    RG_CHECK(t->numel == 1, "item: tensor has %" PRId64 " elements, not 1", t->numel);
    float v;
    rg_tensor_copy_to_host(t, &v);
    return v;
}

float *rg_tensor_f32(const rg_tensor *t) {
    check_f32(t, "rg_tensor_f32");
    RG_CHECK(t->device.type == RG_DEV_CPU, "rg_tensor_f32: tensor is not on the CPU");
    return (float *)t->data;
}

void rg_tensor_set_requires_grad(rg_tensor *t, bool on) {
    RG_CHECK(!on || t->dtype == RG_F32, "requires_grad: only float32 tensors have gradients");
    if (on) t->flags |= RG_TENSOR_REQUIRES_GRAD;
    else t->flags &= ~(unsigned)RG_TENSOR_REQUIRES_GRAD;
}
