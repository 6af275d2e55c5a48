/* cross_entropy.c — fused log-softmax + NLL on the CPU, one row per iteration. */
#include <math.h>

#include "tensor/cpu/cpu.h"

void rg_cpu_cross_entropy_forward(int64_t n, int64_t c, const float *logits,
                                  const int64_t *labels, float smoothing, float *probs,
                                  float *loss) {
    double total = 0.0;
#pragma omp parallel for if (n * c > RG_CPU_PAR_MIN) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; i++) {
        const float *z = logits + i * c;
        float *pr = probs + i * c;
        float m = z[0];
        for (int64_t j = 1; j < c; j++) m = z[j] > m ? z[j] : m;
        double s = 0.0, zsum = 0.0;
        for (int64_t j = 0; j < c; j++) {
            pr[j] = expf(z[j] - m);
            s += pr[j];
            zsum += z[j];
        }
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < c; j++) pr[j] *= inv;
        double lse = m + log(s);
        double nll = lse - z[labels[i]];           /* -log softmax(z)[label] */
        double smooth = lse - zsum / (double)c;    /* mean_k -log softmax(z)[k] */
        total += (1.0 - smoothing) * nll + (smoothing != 0.0f ? smoothing * smooth : 0.0);
    }
    *loss = (float)(total / (double)n);
}

void rg_cpu_cross_entropy_backward(int64_t n, int64_t c, const float *probs,
                                   const int64_t *labels, float smoothing, const float *dloss,
                                   float beta, float *dlogits) {
    float g = *dloss / (float)n, on = 1.0f - smoothing, off = smoothing / (float)c;
#pragma omp parallel for if (n * c > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float *pr = probs + i * c;
        float *d = dlogits + i * c;
        for (int64_t j = 0; j < c; j++) {
            float v = g * (pr[j] - (j == labels[i] ? on : 0.0f) - off);
            d[j] = beta == 0.0f ? v : v + beta * d[j];
        }
    }
}
