/* per_thread.h — what one CUDA thread computes, written as plain C (RG_HOSTDEV), so that the CPU
 * tests (tests/cuda/test_cuda_per_thread.c) can run it for every index and compare with the CPU
 * backend on machines without a GPU. The kernels in this folder are grid-stride loops around
 * these functions; what cannot be written this way (warp shuffles, block reductions) is not here.
 *
 * Contents: broadcast index maps (broadcast.cu), the max pooling bodies (maxpool2d.cu), the
 * argmax combine rule (reduce.cu) and the Philox counter-to-element map (dropout.cu,
 * elementwise.cu). Included by .cu files and by C tests; needs no CUDA header. */
#ifndef RG_CUDA_PER_THREAD_H
#define RG_CUDA_PER_THREAD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "tensor/backend_impl.h"
#include "core/hostdev.h"

#ifdef __CUDA_ARCH__ /* the device pass only: the host compiler does not know the pragma */
#define RG_UNROLL _Pragma("unroll")
#else
#define RG_UNROLL
#endif

/* ---- broadcast index maps ----------------------------------------------------------------- */

/* Dimensions as kernels take them, by value: sizes and element strides, outermost first. */
typedef struct {
    int nd;
    int64_t size[RG_MAX_DIMS];
    int64_t stride[RG_MAX_DIMS];
} rg_cuda_dims;

/* The offset of row-major index idx over d->size: sum over k of coordinate_k * d->stride[k].
 * Two versions, because integer division dominates and 32-bit division is several times faster
 * than 64-bit on a GPU. Unrolled over RG_MAX_DIMS so that each d->size[k] has a constant index and
 * a kernel reads it from its parameter space instead of copying d to local (stack) memory. */
#define RG_DEFINE_DIMS_OFFSET(NAME, I)                                                             \
    static RG_HOSTDEV I NAME(const rg_cuda_dims *d, I idx) {                                       \
        I off = 0;                                                                                 \
        RG_UNROLL for (int k = RG_MAX_DIMS - 1; k >= 0; k--) {                                     \
            if (k >= d->nd) continue;                                                              \
            I size = (I)d->size[k];                                                                \
            off += (idx % size) * (I)d->stride[k];                                                 \
            idx /= size;                                                                           \
        }                                                                                          \
        return off;                                                                                \
    }
RG_DEFINE_DIMS_OFFSET(rg_dims_offset_u32, uint32_t)
RG_DEFINE_DIMS_OFFSET(rg_dims_offset_i64, int64_t)

/* b's element for each output index: the collapsed output shape with b's strides. */
static inline rg_cuda_dims rg_bcast_b_dims(const rg_bcast *bc) {
    rg_cuda_dims d = {bc->ndim, {0}, {0}};
    for (int k = 0; k < bc->ndim; k++) d.size[k] = bc->shape[k], d.stride[k] = bc->bstride[k];
    return d;
}

/* Splits the output's dimensions for the gradient reduction: `kept` walks the output over the
 * dimensions b has (index j: b's own row-major layout), `red` over those b is broadcast along
 * (index r: bc->n / bc->nb terms). Output element kept(j) + red(r) maps to b's element j. */
static inline void rg_bcast_split(const rg_bcast *bc, rg_cuda_dims *kept, rg_cuda_dims *red) {
    int64_t ostride[RG_MAX_DIMS], stride = 1; /* the output's row-major strides */
    for (int k = bc->ndim - 1; k >= 0; k--) ostride[k] = stride, stride *= bc->shape[k];
    kept->nd = red->nd = 0;
    for (int k = 0; k < bc->ndim; k++) {
        rg_cuda_dims *t = bc->bstride[k] ? kept : red;
        t->size[t->nd] = bc->shape[k], t->stride[t->nd] = ostride[k], t->nd++;
    }
}

/* ---- max pooling --------------------------------------------------------------------------- */

/* Output i of (N,C,P,Q): the max of its window of x (N,C,H,W) into y[i], and its flat index in the
 * input plane into argmax[i]. The CPU's rules: first maximum wins ties; a NaN wins and sticks. */
static RG_HOSTDEV void rg_maxpool2d_forward_at(const rg_pool2d_shape *s, const float *x, int64_t i,
                                               float *y, int32_t *argmax) {
    int64_t pq = s->p * s->q, plane = i / pq, p = i % pq / s->q, q = i % s->q;
    const float *xp = x + plane * s->h * s->w;
    float best = -INFINITY;
    int32_t at = -1;
    for (int r = 0; r < s->kernel_h; r++) {
        int64_t h = p * s->stride_h - s->pad_h + r;
        if (h < 0 || h >= s->h) continue;
        for (int t = 0; t < s->kernel_w; t++) {
            int64_t w = q * s->stride_w - s->pad_w + t;
            if (w < 0 || w >= s->w) continue;
            float v = xp[h * s->w + w];
            if (v > best || at < 0 || v != v) best = v, at = (int32_t)(h * s->w + w);
        }
    }
    y[i] = best;
    argmax[i] = at;
}

/* First and last output index along one axis whose window covers input index h (lo > hi: none). */
static RG_HOSTDEV void rg_pool_covering(int64_t h, int pad, int kernel, int stride, int64_t outs,
                                        int64_t *lo, int64_t *hi) {
    int64_t first = h + pad - kernel + 1; /* the lowest window start that still reaches h */
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    int64_t last = (h + pad) / stride;
    *hi = last < outs - 1 ? last : outs - 1;
}

/* Input i of (N,C,H,W): dx[i] = beta*dx[i] + the dy of every output whose argmax is i, added in
 * increasing output order — the order of the CPU's scatter loop, so the sums are bit-identical.
 * A gather, not a scatter: no two threads write the same element, so no atomics. */
static RG_HOSTDEV void rg_maxpool2d_backward_at(const rg_pool2d_shape *s, const float *dy,
                                                const int32_t *argmax, float beta, float *dx,
                                                int64_t i) {
    int64_t hw = s->h * s->w, pq = s->p * s->q;
    int64_t plane = i / hw, h = i % hw / s->w, w = i % s->w, p0, p1, q0, q1;
    rg_pool_covering(h, s->pad_h, s->kernel_h, s->stride_h, s->p, &p0, &p1);
    rg_pool_covering(w, s->pad_w, s->kernel_w, s->stride_w, s->q, &q0, &q1);
    const float *dyp = dy + plane * pq;
    const int32_t *ap = argmax + plane * pq;
    float g = beta == 0.0f ? 0.0f : beta * dx[i]; /* beta 0: dx may hold garbage */
    for (int64_t p = p0; p <= p1; p++)
        for (int64_t q = q0; q <= q1; q++)
            if (ap[p * s->q + q] == (int32_t)(h * s->w + w)) g += dyp[p * s->q + q];
    dx[i] = g;
}

/* ---- argmax -------------------------------------------------------------------------------- */

/* Whether candidate (vb, ib) beats (va, ia) for "first maximum, NaNs skipped"; index -1 is no
 * candidate. A total order on candidates, so combining lanes in any tree gives the scan's answer.
 */
static RG_HOSTDEV bool rg_argmax_better(float vb, int64_t ib, float va, int64_t ia) {
    return ib >= 0 && (ia < 0 || vb > va || (vb == va && ib < ia));
}

/* ---- Philox counters ------------------------------------------------------------------------
 * Stream positions [offset, offset + n) for elements 0..n-1. One Philox call covers 2^shift
 * consecutive positions (4 uniforms: shift 2; 8 dropout decisions: shift 3, core/kernels.h), so a
 * thread takes one counter and up to 2^shift elements. */
/* The uniform stream's counters (rg_philox_uniform: four positions a counter); the general count
 * is rg_stream_counters (core/kernels.h). */
static RG_HOSTDEV int64_t rg_philox_counters(int64_t n, uint64_t offset) {
    return rg_stream_counters(n, offset, RG_UNIFORM_SHIFT);
}

/* Position j (0..3) of the g-th covering counter, written (c << 2) | j so that the compiler sees
 * the four share counter c; its element index in *i, and whether it is one of the n elements. */
static RG_HOSTDEV uint64_t rg_philox_position(uint64_t offset, int64_t n, int64_t g, uint64_t j,
                                              int64_t *i, bool *valid) {
    uint64_t pos = (((offset >> RG_UNIFORM_SHIFT) + (uint64_t)g) << RG_UNIFORM_SHIFT) | j;
    *i = (int64_t)(pos - offset);
    *valid = pos >= offset && *i < n;
    return pos;
}

/* ---- dropout: one thread per Philox counter (tensor/cuda/dropout.cu) ----
 * Counter g of a call covers stream positions 8((offset / 8) + g) ... + 7, elements first ...
 * first + 7 with first = that position - offset. Its eight keeps make one byte, bit j for position
 * j, and that byte is byte g % 4 of mask word g / 4 (core/kernels.h's layout): the word a group of
 * four lanes gathers. */

/* Element index of counter g's first position, and whether all eight lie in [0, n). */
static RG_HOSTDEV int64_t rg_dropout_counter_first(uint64_t offset, int64_t g, int64_t n,
                                                   bool *whole) {
    int64_t first =
        (int64_t)((((offset >> RG_DROPOUT_SHIFT) + (uint64_t)g) << RG_DROPOUT_SHIFT) - offset);
    *whole = first >= 0 && first + RG_DROPOUT_PER_COUNTER <= n;
    return first;
}

/* Bit j set where counter g's position j is one of the n elements. */
static RG_HOSTDEV uint32_t rg_dropout_counter_range(uint64_t offset, int64_t g, int64_t n) {
    bool whole;
    int64_t first = rg_dropout_counter_first(offset, g, n, &whole);
    uint32_t bits = 0;
    for (int j = 0; j < RG_DROPOUT_PER_COUNTER; j++)
        bits |= (uint32_t)(first + j >= 0 && first + j < n) << j;
    return bits;
}

/* Counter g's eight keeps (positions outside the elements included), from its one Philox call. */
static RG_HOSTDEV uint32_t rg_dropout_counter_keeps(float p, uint64_t seed, uint64_t offset,
                                                    int64_t g) {
    rg_philox4 draw = rg_philox(seed, (offset >> RG_DROPOUT_SHIFT) + (uint64_t)g);
    uint32_t byte = 0;
    for (uint64_t j = 0; j < RG_DROPOUT_PER_COUNTER; j++)
        byte |= (uint32_t)rg_dropout_keeps(p, rg_dropout_half(draw, j)) << j;
    return byte;
}

#endif
