/* dropout.c — inverted dropout on the CPU; the mask comes from rg_dropout_keep (kernels.h). */
#include "tensor/cpu/cpu.h"

static float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

void rg_cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                            float *y) {
    float scale = keep_scale(p);
#pragma omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)
    for (int64_t i = 0; i < n; i++)
        y[i] = rg_dropout_keep(p, seed, offset + (uint64_t)i) ? x[i] * scale : 0.0f;
}

void rg_cpu_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                             float beta, float *dx) {
    float scale = keep_scale(p);
#pragma omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = rg_dropout_keep(p, seed, offset + (uint64_t)i) ? dy[i] * scale : 0.0f;
        dx[i] = beta == 0.0f ? g : g + beta * dx[i];
    }
}
