/* fuzz_safetensors.c — libFuzzer target for the checkpoint reader: the JSON parser
 * (models/json.c) on the raw bytes, the safetensors reader (models/safetensors.c: every entry
 * read, every metadata key looked up) and rg_checkpoint_load into an MLP with an SGD optimizer.
 * Any bytes must give a status, never a crash or a sanitizer report.
 * Seeds: tests/fuzz/safetensors/; failures kept in tests/fuzz/safetensors/regressions/. */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "models/json.h"
#include "ringgrad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rg_model *net;
static rg_optim *opt;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    rg_json_free(rg_json_parse((const char *)data, size, err, sizeof err));

    const char *path = fuzz_write_file("safetensors", data, size);
    rg_safetensors *f;
    if (rg_safetensors_open(path, &f) == RG_OK) {
        for (int i = 0; i < rg_safetensors_count(f); i++) {
            const rg_safetensors_entry *e = rg_safetensors_entry_at(f, i);
            if (rg_safetensors_find(f, e->name) != e) abort();
            void *buf = malloc((size_t)(e->end - e->begin) + 1);
            if (!buf) abort();
            RG_IGNORE(rg_safetensors_read(f, e, buf)); /* a status either way; only no crash */
            free(buf);
        }
        (void)rg_safetensors_meta(f, "step");
        rg_safetensors_close(f);
    }
    if (!net) {
        net = rg_model_mlp(1);
        opt = rg_sgd_new(rg_model_params(net), &(rg_sgd_opts){.lr = 0.1f, .momentum = 0.9f});
    }
    rg_checkpoint_meta meta;
    RG_IGNORE(rg_checkpoint_load(path, net, opt, &meta)); /* loads or refuses; no crash */
    RG_IGNORE(rg_checkpoint_load_weights(path, net));
    unlink(path);
    return 0;
}
