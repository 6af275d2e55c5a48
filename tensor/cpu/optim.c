/* optim.c — fused optimizer updates on the CPU; the formulas are in core/kernels.h. */
#include "tensor/cpu/cpu.h"

void rg_cpu_sgd_step(int64_t n, const rg_sgd_hparams *h, float *param, const float *grad,
                     float *momentum_buf) {
    rg_sgd_hparams hp = *h;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) rg_sgd_update(&hp, &param[i], grad[i], momentum_buf ? &momentum_buf[i] : NULL);
}

void rg_cpu_adam_step(int64_t n, const rg_adam_hparams *h, float *param, const float *grad,
                      float *m, float *v) {
    rg_adam_hparams hp = *h;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) rg_adam_update(&hp, &param[i], grad[i], &m[i], &v[i]);
}
