/* rgtest.c — see rgtest.h. */
#include "rgtest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

rg_tensor *rgt_tensor(int ndim, const int64_t *shape, const float *host) {
    rg_tensor *t = rg_tensor_new(RG_F32, ndim, shape, RG_CPU);
    cr_assert(t, "rg_tensor_new failed: %s", rg_last_error());
    rg_tensor_copy_from_host(t, host);
    return t;
}

float *rgt_copy_out(const rg_tensor *t) {
    cr_assert(t && t->dtype == RG_F32, "rgt_copy_out: needs a float32 tensor");
    float *p = malloc(rg_tensor_nbytes(t) + 1);
    cr_assert(p);
    rg_tensor_copy_to_host(t, p);
    return p;
}

int64_t rgt_bcast_index(int ond, const int64_t *oshape, int bnd, const int64_t *bshape, int64_t i) {
    int64_t idx = 0, stride = 1;
    for (int d = ond - 1, e = bnd - 1; d >= 0; d--, e--) {
        int64_t coord = i % oshape[d];
        i /= oshape[d];
        if (e < 0) continue;
        if (bshape[e] != 1) idx += coord * stride;
        stride *= bshape[e];
    }
    return idx;
}

int64_t rgt_randint(int64_t lo, int64_t hi, uint64_t seed, uint64_t i) {
    return lo + (int64_t)(rg_philox(seed, i).v[0] % (uint64_t)(hi - lo + 1));
}

/* ---- expected fatal errors ---- */

static char expected_fatal[256];
static FILE *captured_stderr;
static int saved_stderr_fd = -1;

static void check_fatal_message(void) {
    char msg[4096] = {0};
    fflush(stderr);
    rewind(captured_stderr);
    size_t n = fread(msg, 1, sizeof msg - 1, captured_stderr);
    msg[n] = '\0';
    dup2(saved_stderr_fd, 2); /* the message goes on to the real stderr as well */
    fputs(msg, stderr);
    if (strstr(msg, expected_fatal)) abort();
    fprintf(stderr, "rgt_expect_fatal: the message does not contain \"%s\"\n", expected_fatal);
    fflush(stderr);
    _exit(97);
}

void rgt_expect_fatal(const char *needle) {
    snprintf(expected_fatal, sizeof expected_fatal, "%s", needle);
    fflush(stderr);
    captured_stderr = tmpfile();
    cr_assert(captured_stderr, "rgt_expect_fatal: no temporary file");
    saved_stderr_fd = dup(2);
    dup2(fileno(captured_stderr), 2);
    rg_set_fatal_handler(check_fatal_message);
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
