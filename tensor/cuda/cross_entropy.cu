/* cross_entropy.cu — fused log-softmax + negative log-likelihood on the GPU (pairs with
 * tensor/cpu/cross_entropy.c; the formulas are in ops/cross_entropy.c).
 *
 * One warp per row: classifier rows are short (10 classes for Fashion-MNIST, 1000 for ImageNet),
 * so a warp covers a row in a few strided passes and its max and sum are register shuffles, with
 * no shared memory and no __syncthreads. The mean over rows is a deterministic two-level sum of
 * the per-row losses (reduce.cu), so the loss has the same bits on every run.
 *
 * Labels live on the device; checking them on the host would cost a synchronisation every step.
 * A label outside [0, C) is never used as an index: its row's loss is NaN, so the mean loss is
 * NaN and the error is visible at the next rg_tensor_item. */
#include "tensor/cuda/cuda_impl.h"

/* probs (N,C) = softmax(logits (N,C)) per row; row_loss (N) = -log softmax(logits)[n, label_n] */
__global__ void cross_entropy_forward_kernel(int64_t n, int64_t c, const float *logits,
                                             const int64_t *labels, float smoothing, float *probs,
                                             float *row_loss) {
    int lane = threadIdx.x & 31;
    RG_CUDA_FOR_WARP(r, n) {
        const float *z = logits + r * c;
        float *pr = probs + r * c;
        float m = -INFINITY;
        for (int64_t j = lane; j < c; j += 32) m = fmaxf(m, z[j]);
        m = rg_warp_max(m); /* subtracted so that exp() cannot overflow */
        float s = 0.0f, zsum = 0.0f;
        for (int64_t j = lane; j < c; j += 32) {
            float e = expf(z[j] - m);
            pr[j] = e;
            s += e;
            zsum += z[j];
        }
        s = rg_warp_sum(s);
        zsum = rg_warp_sum(zsum);
        float inv = 1.0f / s;
        for (int64_t j = lane; j < c; j += 32) pr[j] *= inv; /* each lane rescales its own writes */
        if (lane == 0) {
            int64_t y = labels[r];
            float lse = m + logf(s), nll = lse - z[y < 0 || y >= c ? 0 : y];
            float smooth = lse - zsum / (float)c; /* mean_k -log softmax(z)[k] */
            row_loss[r] = (y >= 0 && y < c) ? (1.0f - smoothing) * nll + smoothing * smooth : NAN;
        }
    }
}

void rg_cuda_cross_entropy_forward(int64_t n, int64_t c, const float *logits, const int64_t *labels,
                                   float smoothing, float *probs, float *loss) {
    RG_CHECK(n > 0 && c > 0, "cuda cross_entropy: empty logits (%lld,%lld)", (long long)n,
             (long long)c);
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    float *row_loss = (float *)rg_cuda_scratch(ctx, (size_t)n * sizeof(float)); /* (N) */
    cross_entropy_forward_kernel<<<rg_cuda_warp_grid(ctx, n), RG_CUDA_BLOCK, 0,
                                   rg_cuda_compute(ctx)>>>(n, c, logits, labels, smoothing, probs,
                                                            row_loss);
    RG_CUDA_CHECK_LAUNCH();
    rg_cuda_sum_scaled(ctx, n, row_loss, 1.0f / (float)n, loss); /* loss = mean over rows */
    rg_cuda_scratch_free(ctx, row_loss);
}

/* dlogits (N,C) = beta*dlogits + (*dloss / N) * (probs - onehot(labels)); probs (N,C), labels (N),
 * dloss one element on the device (read by every thread: no copy to the host) */
__global__ void cross_entropy_backward_kernel(int64_t n, int64_t c, const float *probs,
                                              const int64_t *labels, float smoothing,
                                              const float *dloss, float beta, float *dlogits) {
    int lane = threadIdx.x & 31;
    float g = *dloss / (float)n, on = 1.0f - smoothing, off = smoothing / (float)c;
    RG_CUDA_FOR_WARP(r, n) {
        const float *pr = probs + r * c;
        float *d = dlogits + r * c;
        int64_t y = labels[r];
        for (int64_t j = lane; j < c; j += 32) {
            float v = g * (pr[j] - (j == y ? on : 0.0f) - off);
            d[j] = beta == 0.0f ? v : v + beta * d[j];
        }
    }
}

void rg_cuda_cross_entropy_backward(int64_t n, int64_t c, const float *probs, const int64_t *labels,
                                    float smoothing, const float *dloss, float beta,
                                    float *dlogits) {
    if (n <= 0 || c <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    cross_entropy_backward_kernel<<<rg_cuda_warp_grid(ctx, n), RG_CUDA_BLOCK, 0,
                                    rg_cuda_compute(ctx)>>>(n, c, probs, labels, smoothing, dloss,
                                                            beta, dlogits);
    RG_CUDA_CHECK_LAUNCH();
}
