/* maxpool2d.c — max pooling on the CPU, one (n, c) plane per iteration.
 *
 * Each output remembers the flat index (h*W + w) of its maximum within the plane, so backward
 * sends dy there. The comparison is `v > best || v != v`: ties keep the first maximum in row-major
 * window order (as PyTorch does) and a NaN in the window wins, so it propagates.
 *
 * The common 2x2 window with stride 2 gets a loop without bounds checks whose comparisons the
 * compiler turns into SIMD selects; other windows clip their row and column ranges once per
 * output instead of testing every tap. */
#include "tensor/cpu/cpu.h"

/* Output rows are short (12 outputs in the CNN), shorter than one AVX-512 vector of 16 floats,
 * so the compiler's widest vectors would leave every row to the scalar remainder; 4 floats per
 * vector keep the loop vectorised whatever the instruction set. */
#define RG_POOL_SIMD _Pragma("omp simd simdlen(4)")

/* Whether v replaces the current best (see above). */
static inline bool takes_over(float v, float best) {
    return v > best || v != v;
}

/* One output row of a 2x2, stride-2, unpadded pooling: rows r0 and r1 = r0 + w of the input. */
static void pool2x2_row(int64_t q_count, const float *restrict r0, int64_t w, int32_t base,
                        float *restrict y, int32_t *restrict am) {
    const float *r1 = r0 + w;
    RG_POOL_SIMD
    for (int64_t q = 0; q < q_count; q++) {
        float best = r0[2 * q], v;
        int32_t at = base + (int32_t)(2 * q);
        v = r0[2 * q + 1];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(2 * q + 1);
        v = r1[2 * q];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(w + 2 * q);
        v = r1[2 * q + 1];
        if (takes_over(v, best)) best = v, at = base + (int32_t)(w + 2 * q + 1);
        y[q] = best, am[q] = at;
    }
}

/* One plane, any window: clip the window to the input, then scan it. */
static void pool_plane(const rg_pool2d_shape *s, const float *xp, float *yp, int32_t *ap) {
    for (int64_t p = 0; p < s->p; p++) {
        int64_t h0 = p * s->stride_h - s->pad_h;
        int64_t r_lo = h0 < 0 ? -h0 : 0, r_hi = s->h - h0 < s->kernel_h ? s->h - h0 : s->kernel_h;
        for (int64_t q = 0; q < s->q; q++) {
            int64_t w0 = q * s->stride_w - s->pad_w;
            int64_t t_lo = w0 < 0 ? -w0 : 0;
            int64_t t_hi = s->w - w0 < s->kernel_w ? s->w - w0 : s->kernel_w;
            float best = -INFINITY;
            int32_t at = -1;
            for (int64_t r = r_lo; r < r_hi; r++) {
                const float *row = xp + (h0 + r) * s->w + w0;
                for (int64_t t = t_lo; t < t_hi; t++)
                    if (at < 0 || takes_over(row[t], best))
                        best = row[t], at = (int32_t)((h0 + r) * s->w + w0 + t);
            }
            yp[p * s->q + q] = best;
            ap[p * s->q + q] = at;
        }
    }
}

void rg_cpu_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax) {
    int64_t planes = s->n * s->c, hw = s->h * s->w, pq = s->p * s->q;
    bool two_by_two = s->kernel_h == 2 && s->kernel_w == 2 && s->stride_h == 2 &&
                      s->stride_w == 2 && s->pad_h == 0 && s->pad_w == 0;
#pragma omp parallel for if (planes * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * hw;
        float *yp = y + pl * pq;
        int32_t *ap = argmax + pl * pq;
        if (!two_by_two) {
            pool_plane(s, xp, yp, ap);
            continue;
        }
        for (int64_t p = 0; p < s->p; p++)
            pool2x2_row(s->q, xp + 2 * p * s->w, s->w, (int32_t)(2 * p * s->w), yp + p * s->q,
                        ap + p * s->q);
    }
}

/* Backward of one output row of 2x2, stride 2 pooling: every input of the two rows r0, r1 gets
 * either its window's gradient or 0 in one pass, with no zeroing pass first (beta 0), or has
 * that added to beta times its old value. Branch-free, so the compiler vectorises it. */
static void unpool2x2_row(int64_t q_count, const float *restrict dy, const int32_t *restrict am,
                          int32_t base, int32_t w, float beta, float *restrict r0,
                          float *restrict r1) {
    if (beta == 0.0f) {
        RG_POOL_SIMD
        for (int64_t q = 0; q < q_count; q++) {
            int32_t a = am[q] - base - (int32_t)(2 * q); /* 0, 1, w or w+1 */
            float g = dy[q];
            r0[2 * q] = a == 0 ? g : 0.0f;
            r0[2 * q + 1] = a == 1 ? g : 0.0f;
            r1[2 * q] = a == w ? g : 0.0f;
            r1[2 * q + 1] = a == w + 1 ? g : 0.0f;
        }
        return;
    }
    RG_POOL_SIMD
    for (int64_t q = 0; q < q_count; q++) {
        int32_t a = am[q] - base - (int32_t)(2 * q);
        float g = dy[q];
        r0[2 * q] = (a == 0 ? g : 0.0f) + beta * r0[2 * q];
        r0[2 * q + 1] = (a == 1 ? g : 0.0f) + beta * r0[2 * q + 1];
        r1[2 * q] = (a == w ? g : 0.0f) + beta * r1[2 * q];
        r1[2 * q + 1] = (a == w + 1 ? g : 0.0f) + beta * r1[2 * q + 1];
    }
}

/* Scales (or, for beta 0, zeroes) n floats that no window covers. */
static void scale_uncovered(float *d, int64_t n, float beta) {
    for (int64_t i = 0; i < n; i++) d[i] = beta == 0.0f ? 0.0f : beta * d[i];
}

static void unpool2x2_plane(const rg_pool2d_shape *s, const float *dyp, const int32_t *ap,
                            float beta, float *dxp) {
    for (int64_t p = 0; p < s->p; p++) {
        float *r0 = dxp + 2 * p * s->w;
        unpool2x2_row(s->q, dyp + p * s->q, ap + p * s->q, (int32_t)(2 * p * s->w), (int32_t)s->w,
                      beta, r0, r0 + s->w);
        if (s->w > 2 * s->q) { /* an odd last column */
            scale_uncovered(r0 + 2 * s->q, s->w - 2 * s->q, beta);
            scale_uncovered(r0 + s->w + 2 * s->q, s->w - 2 * s->q, beta);
        }
    }
    scale_uncovered(dxp + 2 * s->p * s->w, (s->h - 2 * s->p) * s->w, beta); /* an odd last row */
}

void rg_cpu_maxpool2d_backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax,
                               float beta, float *dx) {
    int64_t planes = s->n * s->c, hw = s->h * s->w, pq = s->p * s->q;
    bool two_by_two = s->kernel_h == 2 && s->kernel_w == 2 && s->stride_h == 2 &&
                      s->stride_w == 2 && s->pad_h == 0 && s->pad_w == 0;
#pragma omp parallel for if (planes * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * hw;
        const float *dyp = dy + pl * pq;
        const int32_t *ap = argmax + pl * pq;
        if (two_by_two) {
            unpool2x2_plane(s, dyp, ap, beta, dxp);
            continue;
        }
        if (beta != 1.0f) scale_uncovered(dxp, hw, beta); /* windows may overlap: zero, then add */
        for (int64_t i = 0; i < pq; i++) dxp[ap[i]] += dyp[i];
    }
}
