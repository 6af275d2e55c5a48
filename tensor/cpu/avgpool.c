/* avgpool.c — global average pooling on the CPU: one pass over x, one plane per iteration. */
#include "tensor/cpu/cpu.h"

void rg_cpu_avgpool_global_forward(int64_t nc, int64_t hw, const float *x, float *y) {
#pragma omp parallel for if (nc * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < nc; i++) {
        const float *p = x + i * hw; /* (HW) */
        float s = 0.0f;
        for (int64_t j = 0; j < hw; j++) s += p[j];
        y[i] = s / (float)hw;
    }
}

void rg_cpu_avgpool_global_backward(int64_t nc, int64_t hw, const float *dy, float beta,
                                    float *dx) {
#pragma omp parallel for if (nc * hw > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < nc; i++) {
        float g = dy[i] / (float)hw;
        float *d = dx + i * hw;
        for (int64_t j = 0; j < hw; j++) d[j] = beta == 0.0f ? g : g + beta * d[j];
    }
}
