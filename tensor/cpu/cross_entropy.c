/* cross_entropy.c — fused log-softmax + NLL on the CPU, one row per iteration. */
#include <math.h>

#include "tensor/cpu/cpu.h"

void rg_cpu_cross_entropy_forward(int64_t n, int64_t c, const float *logits,
                                  const int64_t *labels, float *probs, float *loss) {
    double total = 0.0;
#pragma omp parallel for if (n * c > RG_CPU_PAR_MIN) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; i++) {
        const float *z = logits + i * c;
        float *pr = probs + i * c;
        float m = z[0];
        for (int64_t j = 1; j < c; j++) m = z[j] > m ? z[j] : m;
        double s = 0.0;
        for (int64_t j = 0; j < c; j++) {
            pr[j] = expf(z[j] - m);
            s += pr[j];
        }
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < c; j++) pr[j] *= inv;
        total += -((double)z[labels[i]] - m - log(s)); /* -log softmax(z)[label] */
    }
    *loss = (float)(total / (double)n);
}

void rg_cpu_cross_entropy_backward(int64_t n, int64_t c, const float *probs,
                                   const int64_t *labels, const float *dloss, float beta,
                                   float *dlogits) {
    float g = *dloss / (float)n;
#pragma omp parallel for if (n * c > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *pr = probs + i * c;
        float *d = dlogits + i * c;
        for (int64_t j = 0; j < c; j++) {
            float v = g * (pr[j] - (j == labels[i] ? 1.0f : 0.0f));
            d[j] = beta == 0.0f ? v : v + beta * d[j];
        }
    }
}
