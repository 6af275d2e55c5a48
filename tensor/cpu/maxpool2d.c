/* maxpool2d.c — max pooling on the CPU, one (n, c) plane per iteration. */
#include <float.h>

#include "tensor/cpu/cpu.h"

void rg_cpu_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax) {
    int64_t planes = s->n * s->c;
#pragma omp parallel for if (planes * s->h * s->w > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * s->h * s->w;
        float *yp = y + pl * s->p * s->q;
        int32_t *ap = argmax + pl * s->p * s->q;
        for (int64_t p = 0; p < s->p; p++)
            for (int64_t q = 0; q < s->q; q++) {
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
                yp[p * s->q + q] = best;
                ap[p * s->q + q] = at;
            }
    }
}

void rg_cpu_maxpool2d_backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax,
                               float beta, float *dx) {
    int64_t planes = s->n * s->c, hw = s->h * s->w, pq = s->p * s->q;
#pragma omp parallel for if (planes * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * hw;
        if (beta == 0.0f) for (int64_t i = 0; i < hw; i++) dxp[i] = 0.0f;
        else if (beta != 1.0f) for (int64_t i = 0; i < hw; i++) dxp[i] *= beta;
        for (int64_t i = 0; i < pq; i++) dxp[argmax[pl * pq + i]] += dy[pl * pq + i];
    }
}
