/* rgtest.c — see rgtest.h. */
#include "rgtest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

rg_tensor *rgt_uniform(int ndim, const int64_t *shape, float lo, float hi, uint64_t seed) {
    rg_tensor *t = rg_tensor_new(RG_F32, ndim, shape, RG_CPU);
    cr_assert(t, "rg_tensor_new failed: %s", rg_last_error());
    uint64_t off = 0;
    rg_tensor_uniform_(t, lo, hi, seed, &off);
    return t;
}

rg_tensor *rgt_param(int ndim, const int64_t *shape, float lo, float hi, uint64_t seed) {
    rg_tensor *t = rgt_uniform(ndim, shape, lo, hi, seed);
    rg_tensor_set_requires_grad(t, true);
    return t;
}

void rgt_assert_close(const float *got, const float *want, int64_t n, double atol, double rtol,
                      const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= atol + rtol * fabs((double)want[i])))
            cr_assert_fail("%s: element %lld of %lld: got %.8g, want %.8g (|diff| %.3g)", what,
                           (long long)i, (long long)n, (double)got[i], (double)want[i], d);
    }
}

void rgt_assert_gradcheck(rg_gradcheck_fn f, void *ctx, int n, rg_tensor *const *inputs,
                          const rg_gradcheck_opts *opts) {
    rg_status s = rg_gradcheck(f, ctx, n, inputs, opts);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
}

void rgt_free_all(int n, rg_tensor **ts) {
    for (int i = 0; i < n; i++) rg_tensor_free(ts[i]);
}

const char *rgt_data_path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/data/%s", RG_SOURCE_DIR, name);
    return buf;
}

const char *rgt_tmpdir(const char *test_name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/tmp/%s-%d", RG_BINARY_DIR, test_name, (int)getpid());
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    cr_assert_eq(system(cmd), 0, "cannot create %s", buf);
    return buf;
}
