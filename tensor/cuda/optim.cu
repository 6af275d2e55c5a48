/* optim.cu — fused optimizer updates on the GPU (pairs with tensor/cpu/optim.c).
 *
 * One kernel per step per parameter: each thread reads p, g and the state of its element, applies
 * the update rule from core/kernels.h (torch.optim's, shared with the CPU) and writes them back.
 * Unfused, Adam would be about ten elementwise launches, each a full pass over memory. The
 * hyper-parameters travel by value in the kernel's parameter space: no host-to-device copy. */
#include "tensor/cuda/cuda_impl.h"

/* param, grad, momentum_buf (n); momentum_buf is NULL when momentum is 0 */
__global__ void sgd_step_kernel(int64_t n, rg_sgd_hparams h, float *param, const float *grad,
                                float *momentum_buf) {
    RG_CUDA_FOR(i, n) rg_sgd_update(&h, &param[i], grad[i], momentum_buf ? &momentum_buf[i] : NULL);
}

void rg_cuda_sgd_step(int64_t n, const rg_sgd_hparams *h, float *param, const float *grad,
                      float *momentum_buf) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    sgd_step_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(
        n, *h, param, grad, momentum_buf);
    RG_CUDA_CHECK_LAUNCH();
}

/* param, grad, m, v (n) */
__global__ void adam_step_kernel(int64_t n, rg_adam_hparams h, float *param, const float *grad,
                                 float *m, float *v) {
    RG_CUDA_FOR(i, n) rg_adam_update(&h, &param[i], grad[i], &m[i], &v[i]);
}

void rg_cuda_adam_step(int64_t n, const rg_adam_hparams *h, float *param, const float *grad,
                       float *m, float *v) {
    if (n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    adam_step_kernel<<<rg_cuda_grid(ctx, n), RG_CUDA_BLOCK, 0, rg_cuda_compute(ctx)>>>(n, *h, param,
                                                                                       grad, m, v);
    RG_CUDA_CHECK_LAUNCH();
}
