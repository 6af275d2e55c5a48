/* cpu.h — the CPU backend's kernels, one file each (tensor/cpu/<op>.c), gathered into the
 * rg_cpu_backend table by tensor/cpu/backend.c. Private to the CPU backend. */
#ifndef RG_CPU_H
#define RG_CPU_H

#include "tensor/backend.h"

/* alloc.c: the caching allocator */
void *rg_cpu_alloc(size_t bytes);
void rg_cpu_free(void *p, size_t bytes);
rg_mem_stats rg_cpu_mem_stats(void);
void rg_cpu_mem_release_cached(void);

/* gemm.c */
void rg_cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc);

/* elementwise.c */
void rg_cpu_fill(int64_t n, float v, float *x);
void rg_cpu_axpby(int64_t n, float a, const float *x, float b, float *y);
void rg_cpu_binary(rg_binary_op op, const rg_bcast *bc, const float *a, const float *b, float *out);
void rg_cpu_reduce_bcast(const rg_bcast *bc, const float *dy, const float *x, float beta, float *db);
void rg_cpu_relu_forward(int64_t n, const float *x, float *y);
void rg_cpu_relu_backward(int64_t n, const float *x, const float *dy, float beta, float *dx);
void rg_cpu_sum(int64_t n, const float *x, float *out);
void rg_cpu_argmax(int64_t rows, int64_t cols, const float *x, int64_t *out);
void rg_cpu_uniform(int64_t n, float lo, float hi, uint64_t seed, uint64_t offset, float *x);
void rg_cpu_normal(int64_t n, float mean, float std, uint64_t seed, uint64_t offset, float *x);
void rg_cpu_f32_to_f16(int64_t n, const float *x, uint16_t *y);
void rg_cpu_f16_to_f32(int64_t n, const uint16_t *x, float *y);

/* conv2d.c */
void rg_cpu_conv2d_forward(const rg_conv2d_shape *s, const float *x, const float *w,
                           const float *b, float *y);
void rg_cpu_conv2d_backward_data(const rg_conv2d_shape *s, const float *dy, const float *w,
                                 float beta, float *dx);
void rg_cpu_conv2d_backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy,
                                   float beta, float *dw, float *db);

/* maxpool2d.c */
void rg_cpu_maxpool2d_forward(const rg_pool2d_shape *s, const float *x, float *y, int32_t *argmax);
void rg_cpu_maxpool2d_backward(const rg_pool2d_shape *s, const float *dy, const int32_t *argmax,
                               float beta, float *dx);

/* dropout.c */
void rg_cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                            float *y);
void rg_cpu_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                             float beta, float *dx);

/* cross_entropy.c */
void rg_cpu_cross_entropy_forward(int64_t n, int64_t c, const float *logits,
                                  const int64_t *labels, float *probs, float *loss);
void rg_cpu_cross_entropy_backward(int64_t n, int64_t c, const float *probs,
                                   const int64_t *labels, const float *dloss, float beta,
                                   float *dlogits);

/* optim.c */
void rg_cpu_sgd_step(int64_t n, const rg_sgd_hparams *h, float *param, const float *grad,
                     float *momentum_buf);
void rg_cpu_adam_step(int64_t n, const rg_adam_hparams *h, float *param, const float *grad,
                      float *m, float *v);

/* OpenMP chunking: parallelise only loops worth a thread wake-up. */
#define RG_CPU_PAR_MIN 32768

#endif
