/* fuzz_idx.c — libFuzzer target for the IDX reader (data/idx.c) and the IDX dataset pairing
 * (rg_dataset_idx): any bytes, as an images file (3 dimensions) and as a labels file (1), must
 * give RG_OK or an error status, never a crash, a sanitizer report or a huge allocation.
 * Seeds: tests/fuzz/idx/; inputs that once failed: tests/fuzz/idx/regressions/ (replayed by the
 * normal test suite through tests/fuzz/replay.c). */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "ringgrad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("idx", data, size);
    for (int ndim = 1; ndim <= 3; ndim += 2) {
        rg_idx a;
        if (rg_idx_read(path, ndim, &a) == RG_OK) {
            /* the promise was kept: dims multiply to the bytes read */
            int64_t n = 1;
            for (int i = 0; i < a.ndim; i++) n *= a.dims[i];
            if ((size_t)n != a.nbytes) abort();
            rg_idx_deinit(&a);
        }
    }
    /* the same file as both halves of a data set: lengths or shapes will not fit; no crash */
    rg_dataset *ds = NULL;
    if (rg_dataset_idx(path, path, 10, &ds) == RG_OK) rg_dataset_free(ds);
    unlink(path);
    return 0;
}
