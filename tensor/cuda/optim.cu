/* optim.cu — fused optimizer updates on the GPU (pairs with tensor/cpu/optim.c).
 *
 * Each thread reads p, g and the state of its element, applies the update rule from
 * core/kernels.h (torch.optim's, shared with the CPU) and writes them back. Unfused, Adam would be
 * about ten elementwise launches, each a full pass over memory. The hyper-parameters travel by
 * value in the kernel's parameter space: no host-to-device copy.
 *
 * SGD runs multi-tensor (sgd_step_many, what the optimizer calls): one launch updates up to
 * SGD_MANY tensors, as PyTorch's foreach/multi_tensor_apply does. A model's parameters are mostly
 * small (ResNet-50: 161 tensors, 106 of them BatchNorm vectors of 64-2048 floats), so one launch
 * per tensor left the step launch-bound: on the H100 the 161 launches took 1.0-1.4 ms against
 * 0.7 ms of kernel time (docs/PERFORMANCE.md, fifteenth session). */
#include "tensor/cuda/cuda_impl.h"

/* A launch of sgd_step_many: tensor i's chunks of SGD_CHUNK floats are blocks [first[i],
 * first[i+1]). 48 tensors make 48 * 56 + 49 * 4 + 4 = 2,888 bytes, inside the 4 KB every CUDA
 * version gives a kernel's parameters. */
#define SGD_MANY 48
#define SGD_CHUNK 16384
struct sgd_many_args {
    int count;
    int first[SGD_MANY + 1];
    rg_sgd_tensor t[SGD_MANY];
};
static_assert(sizeof(sgd_many_args) <= 4096, "a kernel's parameters are at most 4 KB");

__global__ void sgd_many_kernel(const __grid_constant__ sgd_many_args a) {
    int b = (int)blockIdx.x, lo = rg_cuda_list_owner(a.first, a.count, b);
    const rg_sgd_hparams h = a.t[lo].h;
    float *param = a.t[lo].param, *buf = a.t[lo].momentum_buf;
    const float *grad = a.t[lo].grad;
    int64_t start = (int64_t)(b - a.first[lo]) * SGD_CHUNK;
    int64_t end = start + SGD_CHUNK < a.t[lo].n ? start + SGD_CHUNK : a.t[lo].n;
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x)
        rg_sgd_update(&h, &param[i], grad[i], buf ? &buf[i] : NULL);
}

void rg_cuda_sgd_step_many(int count, const rg_sgd_tensor *t) {
    cudaStream_t st = rg_cuda_compute(rg_cuda_ctx_current());
    sgd_many_args a;
    rg_cuda_list_launches(
        a, count, SGD_CHUNK, [&](int i) { return t[i].n; },
        [&](sgd_many_args &b, int slot, int i) { b.t[slot] = t[i]; },
        [&](const sgd_many_args &b) {
            sgd_many_kernel<<<(unsigned)b.first[b.count], RG_CUDA_BLOCK, 0, st>>>(b);
            RG_CUDA_CHECK_LAUNCH();
        });
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
