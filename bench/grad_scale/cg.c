/* cg.c — drives both versions of the update loops once over 1M floats, for callgrind (run.sh). */
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "kernels_new.h"
void adam_old(int64_t, const rg_adam_hparams *, float *, const float *, float *, float *);
void adam_new(int64_t, const rg_adam_hparams *, float *, const float *, float *, float *);
void sgd_old(int64_t, const rg_sgd_hparams *, float *, const float *, float *);
void sgd_new(int64_t, const rg_sgd_hparams *, float *, const float *, float *);
int main(void) {
    int64_t n = 1 << 20;
    float *p = calloc(n, 4), *g = calloc(n, 4), *m = calloc(n, 4), *v = calloc(n, 4);
    rg_adam_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .bias_correction1 = 0.1f, .bias_correction2 = 0.001f};
    rg_adam_hparams hs = h; hs.grad_scale = 0.5f;
    rg_sgd_hparams s = {.lr = 0.01f, .momentum = 0.9f}, ss = s; ss.grad_scale = 0.5f;
    adam_old(n, &h, p, g, m, v); adam_new(n, &hs, p, g, m, v);
    sgd_old(n, &s, p, g, m); sgd_new(n, &ss, p, g, m);
    return 0;
}
