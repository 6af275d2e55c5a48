/* broadcast.cu — binary ops with NumPy broadcasting, and the reduction that is their gradient
 * (pairs with the broadcast half of tensor/cpu/elementwise.c).
 *
 * The op layer (rg_bcast_plan) has already collapsed the shapes: at most RG_MAX_DIMS dimensions,
 * alternating between ones where b is broadcast (stride 0) and ones where it is not. A kernel then
 * finds b's element for output index i by decomposing i over those dimensions (dims_offset, in
 * per_thread.h). Integer division is the cost of that, and 64-bit division is several times slower
 * than 32-bit on a GPU, so every kernel here is a template on the index type: uint32_t whenever
 * the tensor has fewer than 2^31 elements, int64_t otherwise.
 *
 * The gradient db = sum of dy over the broadcast dimensions is computed output-stationary: each
 * element of db is summed by one thread (when there are many of them) or one block (when there
 * are few and each sums many values), always in the same order, so the result is deterministic —
 * no atomics. */
#include "tensor/cuda/cuda_impl.h"

/* The index maps (tensor/cuda/per_thread.h, tested on the CPU), by index type. */
static __device__ __forceinline__ uint32_t dims_offset(const rg_cuda_dims &d, uint32_t i) {
    return rg_dims_offset_u32(&d, i);
}
static __device__ __forceinline__ int64_t dims_offset(const rg_cuda_dims &d, int64_t i) {
    return rg_dims_offset_i64(&d, i);
}

/* ---- binary: out = a (op) b ---------------------------------------------------------------- */

/* out (n) = a (n) op b[dims_offset(bd, i)]; out may be a */
template <typename I, rg_binary_op OP>
__global__ void binary_kernel(I n, rg_cuda_dims bd, const float *a, const float *b, float *out) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) {
        float bv = b[dims_offset(bd, i)];
        out[i] = OP == RG_BINARY_ADD ? a[i] + bv : a[i] * bv;
    }
}
static_assert(RG_BINARY_COUNT == 2, "binary_launch handles every op");

template <typename I>
static void binary_launch(rg_cuda_ctx *ctx, rg_binary_op op, int64_t n, const rg_cuda_dims &bd,
                          const float *a, const float *b, float *out) {
    unsigned grid = rg_cuda_grid(ctx, n);
    cudaStream_t s = rg_cuda_compute(ctx);
    if (op == RG_BINARY_ADD)
        binary_kernel<I, RG_BINARY_ADD><<<grid, RG_CUDA_BLOCK, 0, s>>>((I)n, bd, a, b, out);
    else
        binary_kernel<I, RG_BINARY_MUL><<<grid, RG_CUDA_BLOCK, 0, s>>>((I)n, bd, a, b, out);
    RG_CUDA_CHECK_LAUNCH();
}

void rg_cuda_binary(rg_binary_op op, const rg_bcast *bc, const float *a, const float *b,
                    float *out) {
    RG_CHECK((unsigned)op < RG_BINARY_COUNT, "cuda binary: bad op %d", (int)op);
    if (bc->n <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    rg_cuda_dims bd = rg_bcast_b_dims(bc);
    if (bc->n <= INT32_MAX)
        binary_launch<uint32_t>(ctx, op, bc->n, bd, a, b, out);
    else
        binary_launch<int64_t>(ctx, op, bc->n, bd, a, b, out);
}

/* ---- reduce_bcast: db = beta*db + sum over the broadcast dims of dy (times x) ---------------
 * rg_bcast_split: `kept` walks dy over the dimensions b has (db's elements), `red` over the
 * dimensions b is broadcast along (m = n / nb terms per element of db). */

/* db (nb) = beta*db + sum_r dy[o] (* x[o]), o = kept(j) + red(r); one thread per element j */
template <typename I>
__global__ void reduce_bcast_thread_kernel(I nb, I m, rg_cuda_dims kept, rg_cuda_dims red,
                                           const float *dy, const float *x, float beta, float *db) {
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < nb; j += (I)blockDim.x * gridDim.x) {
        I base = dims_offset(kept, j);
        float s = 0.0f;
        for (I r = 0; r < m; r++) {
            I o = base + dims_offset(red, r);
            s += x ? dy[o] * x[o] : dy[o];
        }
        db[j] = beta == 0.0f ? s : s + beta * db[j];
    }
}

/* Same, one block per element j: its threads split the m terms, then a block tree sum. */
template <typename I>
__global__ void reduce_bcast_block_kernel(I nb, I m, rg_cuda_dims kept, rg_cuda_dims red,
                                          const float *dy, const float *x, float beta, float *db) {
    for (I j = blockIdx.x; j < nb; j += gridDim.x) { /* uniform per block: no divergent sync */
        I base = dims_offset(kept, j);
        float s = 0.0f;
        for (I r = threadIdx.x; r < m; r += blockDim.x) {
            I o = base + dims_offset(red, r);
            s += x ? dy[o] * x[o] : dy[o];
        }
        s = rg_block_sum(s);
        if (threadIdx.x == 0) db[j] = beta == 0.0f ? s : s + beta * db[j];
    }
}

template <typename I>
static void reduce_bcast_launch(rg_cuda_ctx *ctx, int64_t nb, int64_t m, const rg_cuda_dims &kept,
                                const rg_cuda_dims &red, const float *dy, const float *x,
                                float beta, float *db) {
    cudaStream_t s = rg_cuda_compute(ctx);
    /* A thread per element of db fills the GPU once there are enough of them, and keeps reads
     * coalesced when b's innermost dimension is dy's (a bias); few elements that each sum many
     * terms (a per-channel sum) get a block each instead. */
    if (m <= 32 || nb >= (int64_t)ctx->sm_count * 256) {
        reduce_bcast_thread_kernel<I><<<rg_cuda_grid(ctx, nb), RG_CUDA_BLOCK, 0, s>>>(
            (I)nb, (I)m, kept, red, dy, x, beta, db);
    } else {
        unsigned grid = (unsigned)(nb < (int64_t)ctx->sm_count * 32 ? nb : ctx->sm_count * 32);
        reduce_bcast_block_kernel<I>
            <<<grid, RG_CUDA_BLOCK, 0, s>>>((I)nb, (I)m, kept, red, dy, x, beta, db);
    }
    RG_CUDA_CHECK_LAUNCH();
}

void rg_cuda_reduce_bcast(const rg_bcast *bc, const float *dy, const float *x, float beta,
                          float *db) {
    if (bc->nb <= 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    if (bc->n == 0) return rg_cuda_scale(ctx, bc->nb, beta, db); /* an empty sum */
    rg_cuda_dims kept, red;
    rg_bcast_split(bc, &kept, &red);
    int64_t m = bc->n / bc->nb;
    if (bc->n <= INT32_MAX)
        reduce_bcast_launch<uint32_t>(ctx, bc->nb, m, kept, red, dy, x, beta, db);
    else
        reduce_bcast_launch<int64_t>(ctx, bc->nb, m, kept, red, dy, x, beta, db);
}
