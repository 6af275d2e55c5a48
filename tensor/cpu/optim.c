/* optim.c — fused optimizer updates on the CPU; the formulas are rg_sgd_update and rg_adam_update
 * in core/kernels.h, the code the CUDA kernels run too.
 *
 * Compiled once per instruction set (cmake/isa.cmake, isa_impl.h). The loops vectorise: the
 * arrays are restrict (one update reads and writes only its own element), and every switch the
 * formula tests (weight decay, momentum, the first step, Nesterov, AdamW) is fixed before the
 * loop, one loop per combination in which the switch is a constant, so no loop holds a branch.
 * Division and square root stay IEEE ones (vdivps, vsqrtps), and cmake/isa.cmake compiles this
 * file without fused multiply-adds (-ffp-contract=off), so every copy gives the scalar formula's
 * results bit for bit (the CUDA kernels may fuse, and round once where these round twice). */
#include "tensor/cpu/cpu.h"

#define CHUNK 8192 /* floats per parallel work item (a multiple of every vector width) */

#define FOR_CHUNKS(n)                                                                              \
    int64_t nchunks_ = ((n) + CHUNK - 1) / CHUNK;                                                  \
    _Pragma("omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)") for (int64_t c_ = 0;      \
                                                                              c_ < nchunks_; c_++)

/* Elements [lo, hi) with the switches given as constants; momentum buffer b unused when
 * !momentum. Always inlined, so that each call site is its own branch-free loop. */
static inline __attribute__((always_inline)) void
sgd_range(rg_sgd_hparams hp, bool wd, bool momentum, bool first, bool nesterov, int64_t lo,
          int64_t hi, float *restrict p, const float *restrict g, float *restrict b) {
    if (!wd) hp.weight_decay = 0.0f;
    if (!momentum) hp.momentum = 0.0f;
    hp.first_step = first, hp.nesterov = nesterov;
    if (momentum)
        for (int64_t i = lo; i < hi; i++) rg_sgd_update(&hp, &p[i], g[i], &b[i]);
    else
        for (int64_t i = lo; i < hi; i++) rg_sgd_update(&hp, &p[i], g[i], NULL);
}

static void sgd_step(int64_t n, const rg_sgd_hparams *h, float *param, const float *grad,
                     float *momentum_buf) {
    const rg_sgd_hparams hp = *h;
    const bool wd = hp.weight_decay != 0.0f, mom = hp.momentum != 0.0f;
    FOR_CHUNKS(n) {
        int64_t lo = c_ * CHUNK, hi = n - lo < CHUNK ? n : lo + CHUNK;
        float *b = momentum_buf;
        if (!mom)
            sgd_range(hp, wd, false, false, false, lo, hi, param, grad, b);
        else if (hp.first_step && hp.nesterov)
            sgd_range(hp, wd, true, true, true, lo, hi, param, grad, b);
        else if (hp.first_step)
            sgd_range(hp, wd, true, true, false, lo, hi, param, grad, b);
        else if (hp.nesterov)
            sgd_range(hp, wd, true, false, true, lo, hi, param, grad, b);
        else
            sgd_range(hp, wd, true, false, false, lo, hi, param, grad, b);
    }
}

/* One tensor after another: each is already split across the threads, and a step over many small
 * tensors costs the CPU no launches. */
void rg_cpu_sgd_step_many(int count, const rg_sgd_tensor *t) {
    for (int i = 0; i < count; i++)
        sgd_step(t[i].n, &t[i].h, t[i].param, t[i].grad, t[i].momentum_buf);
}

static inline __attribute__((always_inline)) void
adam_range(rg_adam_hparams hp, bool wd, bool decoupled, int64_t lo, int64_t hi, float *restrict p,
           const float *restrict g, float *restrict m, float *restrict v) {
    if (!wd) hp.weight_decay = 0.0f;
    hp.decoupled = decoupled;
    for (int64_t i = lo; i < hi; i++) rg_adam_update(&hp, &p[i], g[i], &m[i], &v[i]);
}

void rg_cpu_adam_step(int64_t n, const rg_adam_hparams *h, float *param, const float *grad,
                      float *m, float *v) {
    const rg_adam_hparams hp = *h;
    const bool wd = hp.weight_decay != 0.0f;
    FOR_CHUNKS(n) {
        int64_t lo = c_ * CHUNK, hi = n - lo < CHUNK ? n : lo + CHUNK;
        if (!wd)
            adam_range(hp, false, false, lo, hi, param, grad, m, v);
        else if (hp.decoupled)
            adam_range(hp, true, true, lo, hi, param, grad, m, v);
        else
            adam_range(hp, true, false, lo, hi, param, grad, m, v);
    }
}
