/* cpu.h — the CPU backend's kernels, one file each (tensor/cpu/<op>.c), gathered into the
 * rg_cpu_backend table by tensor/cpu/backend.c. Private to the CPU backend. */
#ifndef RG_CPU_H
#define RG_CPU_H

#include "tensor/backend_impl.h"
#include "tensor/cpu/isa_impl.h" /* renames the kernels of each instruction set's copy */

/* Every kernel of the table, rg_cpu_<name>, each in tensor/cpu/<op>.c (the list and its comments:
 * tensor/backend_impl.h). */
#define RG_CPU_PROTOTYPE(ret, fn, params) ret rg_cpu_##fn params;
RG_BACKEND_KERNELS(RG_CPU_PROTOTYPE)
#undef RG_CPU_PROTOTYPE

/* rg_cpu_gemm's OpenBLAS path (gemm.c), shared by every instruction set's copy. */
void rg_cpu_gemm_blas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc);

/* The 2x2, stride-2, unpadded max-pool (the CNN's), which the pooling kernels (maxpool2d.c) and
 * the convolution's fused pool (conv2d.c, conv2d_backward.c) take on loops of their own. */
static inline bool rg_cpu_pool_is_2x2(const rg_pool2d_shape *p) {
    return p->kernel_h == 2 && p->kernel_w == 2 && p->stride_h == 2 && p->stride_w == 2 &&
           p->pad_h == 0 && p->pad_w == 0;
}

/* maxpool2d_forward and _backward on the calling thread only, for a kernel that pools inside its
 * own OpenMP loop (the convolution's fused pool, conv2d.c). */
void rg_cpu_maxpool2d_forward_serial(const rg_pool2d_shape *s, const float *x, float *y,
                                     int32_t *argmax);
void rg_cpu_maxpool2d_backward_serial(const rg_pool2d_shape *s, const float *dy,
                                      const int32_t *argmax, float beta, float *dx);

/* OpenMP chunking: parallelise only loops worth a thread wake-up. */
#define RG_CPU_PAR_MIN 32768

#endif
