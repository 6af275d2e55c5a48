/* rgtest.h — helpers shared by the Criterion tests: random inputs, comparisons with a tolerance
 * that name the first bad element, and paths to test data. */
#ifndef RG_TEST_H
#define RG_TEST_H

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>

#include "ringgrad.h"
#include "autograd/autograd_impl.h"
#include "tensor/backend_impl.h"
#include "tensor/scope_impl.h"

/* A long-lived CPU float32 tensor with uniform values in [lo, hi) from Philox stream `seed`. */
rg_tensor *rgt_uniform(int ndim, const int64_t *shape, float lo, float hi, uint64_t seed);
/* Same, as a parameter that requires a gradient. */
rg_tensor *rgt_param(int ndim, const int64_t *shape, float lo, float hi, uint64_t seed);

/* Asserts |got[i] - want[i]| <= atol + rtol |want[i]| for every i; the message names `what`,
 * the first failing index and both values. */
void rgt_assert_close(const float *got, const float *want, int64_t n, double atol, double rtol,
                      const char *what);

/* Asserts rg_gradcheck passes with default options (or `opts`). */
void rgt_assert_gradcheck(rg_gradcheck_fn f, void *ctx, int n, rg_tensor *const *inputs,
                          const rg_gradcheck_opts *opts);

/* Frees a list of long-lived tensors. */
void rgt_free_all(int n, rg_tensor **ts);

/* A long-lived CPU float32 tensor holding a copy of host data. */
rg_tensor *rgt_tensor(int ndim, const int64_t *shape, const float *host);
/* A long-lived tensor's float32 data as a malloc'ed host copy (the caller frees). */
float *rgt_copy_out(const rg_tensor *t);

/* Flat index into a tensor of shape bshape (bnd dims) that NumPy broadcasting pairs with flat
 * index i of a tensor of shape oshape (ond >= bnd dims, aligned on the right). The naive
 * reference that broadcasting kernels are tested against. */
int64_t rgt_bcast_index(int ond, const int64_t *oshape, int bnd, const int64_t *bshape, int64_t i);

/* Deterministic test randomness: a uniform integer in [lo, hi] from (seed, i) through Philox. */
int64_t rgt_randint(int64_t lo, int64_t hi, uint64_t seed, uint64_t i);

/* For API-misuse tests (.signal = SIGABRT): from now on stderr goes to a temporary file, and the
 * next fatal error aborts (SIGABRT, the test passes) only if its message contains `needle`;
 * otherwise the test process exits with status 97 after printing both, and the test fails. */
void rgt_expect_fatal(const char *needle);

/* The fused op against the ops it replaces, bit for bit, on dev (tests/common/bn_fused.c):
 * output, every gradient and the running statistics, in training and evaluation, with and without
 * affine parameters, on planes of 30 (one vector and a tail) and 81 (the CPU's four-vector sums)
 * floats. add: rg_batch_norm2d_add_relu against rg_relu(rg_add(rg_batch_norm2d(...), res)), res's
 * gradient compared too (res has a second use, so that its gradient is added to); else
 * rg_batch_norm2d_relu against rg_relu(rg_batch_norm2d(...)). */
void rgt_bn_fused_matches_unfused(rg_device dev, bool add);

/* Absolute path of a file under tests/data. Static buffer. */
const char *rgt_data_path(const char *name);
/* A fresh empty directory for this test (under the build tree); static buffer. */
const char *rgt_tmpdir(const char *test_name);

#endif
