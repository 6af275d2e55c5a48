/* nn_ref.h — reading the PyTorch reference files under tests/data/nn/ (made by
 * scripts/make_reference_nn.py) in the layers, optim and models tests. */
#ifndef RG_TEST_NN_REF_H
#define RG_TEST_NN_REF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgtest.h"

static inline rg_safetensors *nn_ref_open(const char *file) {
    char name[256];
    snprintf(name, sizeof name, "nn/%s", file);
    rg_safetensors *f = NULL;
    rg_status s = rg_safetensors_open(rgt_data_path(name), &f);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    return f;
}

/* A malloc'ed copy of reference tensor `name`, which must have dtype `dtype` and numel elements. */
static inline void *nn_ref_read(rg_safetensors *f, const char *name, const char *dtype,
                                int64_t numel) {
    const rg_safetensors_entry *e = rg_safetensors_find(f, name);
    cr_assert_not_null(e, "reference tensor %s is missing from %s", name, rg_safetensors_path(f));
    cr_assert_str_eq(e->dtype, dtype, "%s", name);
    cr_assert_eq(e->numel, numel, "%s: %lld elements, want %lld", name, (long long)e->numel,
                 (long long)numel);
    void *buf = malloc(e->end - e->begin + 1);
    cr_assert_eq(rg_safetensors_read(f, e, buf), RG_OK, "%s", rg_last_error());
    return buf;
}

#endif
