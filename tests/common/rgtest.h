/* rgtest.h — helpers shared by the Criterion tests: random inputs, comparisons with a tolerance
 * that name the first bad element, and paths to test data. */
#ifndef RG_TEST_H
#define RG_TEST_H

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>

#include "ringgrad.h"
#include "autograd/gradcheck.h"

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

/* Absolute path of a file under tests/data. Static buffer. */
const char *rgt_data_path(const char *name);
/* A fresh empty directory for this test (under the build tree); static buffer. */
const char *rgt_tmpdir(const char *test_name);

#endif
