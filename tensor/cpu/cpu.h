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

/* Whether the AVX-512 copy's convolution products (conv2d_gemm.c) stay on OpenBLAS rather than
 * ringgrad's tile: RG_CONV_BLAS=1 yes, RG_CONV_BLAS=0 no (to compare); otherwise when OpenBLAS runs
 * AVX-512 kernels in this process (its core, which OPENBLAS_CORETYPE or its CPU detection picks
 * when the library loads, is SkylakeX, Cooperlake or SapphireRapids). gemm.c. */
bool rg_cpu_conv_products_on_blas(void);

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

/* What this process's memory cgroup (a container's limit) still allows, in bytes: the tightest
 * of its limit and its ancestors' limits, less their usage, plus the page cache they hold (which
 * the kernel reclaims before it kills, as MemAvailable counts it); SIZE_MAX where no limit is
 * set or no cgroup is found. cgroup v2 (memory.max, memory.current, memory.stat's "file") and v1
 * (memory.stat's hierarchical_memory_limit and total_cache, memory.usage_in_bytes). root is
 * prefixed to /proc/self/cgroup and /sys/fs/cgroup ("" for the real files; a test's folder).
 * tensor/cpu/alloc.c, not a kernel: one copy for every instruction set. */
size_t rg_cpu_cgroup_available(const char *root);

/* OpenMP chunking: parallelise only loops worth a thread wake-up. */
#define RG_CPU_PAR_MIN 32768

#endif
