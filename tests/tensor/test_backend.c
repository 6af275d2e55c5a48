/* Tests for the backend tables (tensor/backend_impl.h): every entry of the kernel list is filled in
 * every table this build has, the CPU's and each CUDA device's (no GPU needed to look). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "rgtest.h"

/* Each entry's name and place in the struct, from the kernel list itself. */
static const struct {
    const char *name;
    size_t offset;
} entries[] = {
#define ENTRY(ret, fn, params) {#fn, offsetof(rg_backend, fn)},
    RG_BACKEND_KERNELS(ENTRY)
#undef ENTRY
};

static void assert_complete(const rg_backend *be, const char *which) {
    cr_assert(be->name && be->name[0], "%s: the table has no name", which);
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)be + entries[i].offset, sizeof fn);
        cr_assert(fn != NULL, "%s: entry %s is NULL", which, entries[i].name);
    }
}

Test(tensor_backend, every_entry_of_the_cpu_table_is_filled) {
    cr_assert_gt(sizeof entries / sizeof entries[0], 30, "the kernel list looks truncated");
    assert_complete(rg_backend_table(RG_DEV_CPU, 0), "cpu");
    cr_assert_eq(rg_backend_table(RG_DEV_CPU, 0), rg_backend_for(RG_CPU));
}

Test(tensor_backend, every_entry_of_every_cuda_table_is_filled_when_cuda_is_built) {
    if (!rg_cuda_compiled()) {
        cr_assert_null(rg_backend_table(RG_DEV_CUDA, 0), "no CUDA backend, yet a table");
        return;
    }
    int tables = 0;
    char which[16];
    for (int d = 0; rg_backend_table(RG_DEV_CUDA, d); d++, tables++) {
        snprintf(which, sizeof which, "cuda:%d", d);
        assert_complete(rg_backend_table(RG_DEV_CUDA, d), which);
    }
    cr_assert_gt(tables, 0, "a CUDA build with no CUDA table");
}

Test(tensor_backend, the_struct_holds_exactly_the_listed_entries) {
    /* a field added by hand outside the list would be missed by the generated tables */
    size_t n = sizeof entries / sizeof entries[0];
    cr_assert_eq(sizeof(rg_backend), sizeof(const char *) + n * sizeof(void (*)(void)));
}
