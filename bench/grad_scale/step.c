/* step.c — the Adam and SGD update loops of tensor/cpu/optim.c, compiled against one version of
 * core/kernels.h (run.sh builds it twice: before and after the grad scale). */
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include KHEADER /* kernels_old.h (before) or kernels_new.h (after), from run.sh */
void NAME(int64_t n, const rg_adam_hparams *h, float *p, const float *g, float *m, float *v) {
    rg_adam_hparams hp = *h;
    for (int64_t i = 0; i < n; i++) rg_adam_update(&hp, &p[i], g[i], &m[i], &v[i]);
}
void NAME2(int64_t n, const rg_sgd_hparams *h, float *p, const float *g, float *b) {
    rg_sgd_hparams hp = *h;
    for (int64_t i = 0; i < n; i++) rg_sgd_update(&hp, &p[i], g[i], &b[i]);
}
