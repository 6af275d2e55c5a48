/* checkpoint.c — a training checkpoint is one safetensors file: the model's state_dict, the
 * optimizer's state under "optim." and a few metadata strings.
 *
 * What it teaches: resuming exactly means saving every number the next step depends on — the
 * weights, the optimizer's buffers and step counts, the learning rate and the position of every
 * random stream — and loading means checking all of it before touching the model. */
#include "ringgrad/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/safetensors.h"
#include "ringgrad/version.h"

#define OPTIM_PREFIX "optim."
#define KV_KEY_MAX 192
#define KV_VALUE_MAX 256 /* the longest value is the model's name (checked on save) */
#define STREAM_NAME_MAX (KV_KEY_MAX - sizeof "rng..offset") /* bytes of a stream's name, NUL too   \
                                                             */

typedef struct {
    char key[KV_KEY_MAX], value[KV_VALUE_MAX];
} kv_store;

static bool is_optim_name(const char *name) {
    return strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) == 0;
}

/* ---- saving ---- */

/* The metadata: fixed keys, the optimizer's kind and lr, two keys per random stream. */
#define FIXED_KEYS 11 /* every PUT below */
static int build_meta(kv_store *kv, const rg_model *model, rg_optim *optim,
                      const rg_checkpoint_meta *meta) {
    int n = 0;
#define PUT(k, ...)                                                                                \
    do {                                                                                           \
        RG_CHECK(n < FIXED_KEYS, "checkpoint: more fixed metadata keys than FIXED_KEYS (%d)",      \
                 FIXED_KEYS);                                                                      \
        snprintf(kv[n].key, KV_KEY_MAX, "%s", k);                                                  \
        snprintf(kv[n++].value, KV_VALUE_MAX, __VA_ARGS__);                                        \
    } while (0)
    PUT("format", "pt");
    PUT("ringgrad.format_version", "%d", RG_CHECKPOINT_FORMAT_VERSION);
    PUT("ringgrad.version", "%s", rg_version()); /* who wrote it; not checked on load */
    PUT("model", "%s", rg_model_name(model));
    PUT("step", "%" PRId64, meta->step);
    PUT("epoch", "%" PRId64, meta->epoch);
    PUT("seed", "%" PRIu64, meta->seed);
    if (meta->global_batch > 0) PUT("global_batch", "%" PRId64, meta->global_batch);
    if (meta->steps_per_epoch > 0) PUT("steps_per_epoch", "%" PRId64, meta->steps_per_epoch);
    if (optim) {
        PUT("optim", "%s", rg_optim_kind(optim));
        PUT("optim.lr", "%.9g", (double)rg_optim_get_lr(optim)); /* 9 digits: exact for float */
    }
#undef PUT
    int ns;
    const rg_named_stream *st = rg_model_streams(model, &ns);
    for (int i = 0; i < ns; i++) {
        snprintf(kv[n].key, KV_KEY_MAX, "rng.%s.seed", st[i].name);
        snprintf(kv[n++].value, KV_VALUE_MAX, "%" PRIu64, st[i].stream->seed);
        snprintf(kv[n].key, KV_KEY_MAX, "rng.%s.offset", st[i].name);
        snprintf(kv[n++].value, KV_VALUE_MAX, "%" PRIu64, st[i].stream->offset);
    }
    return n;
}

rg_status rg_checkpoint_save(const char *path, const rg_model *model, rg_optim *optim,
                             const rg_checkpoint_meta *meta) {
    RG_CHECK(path && model, "rg_checkpoint_save: NULL path or model");
    /* Longer names were cut to fit the metadata, and the checkpoint then named another model
     * (RG_EMISMATCH when loaded into the same one): refused instead. */
    if (strlen(rg_model_name(model)) >= KV_VALUE_MAX)
        return rg_error(RG_EINVAL, "%s: the model's name has %zu characters; a checkpoint keeps %d",
                        path, strlen(rg_model_name(model)), KV_VALUE_MAX - 1);
    int n_streams;
    const rg_named_stream *streams = rg_model_streams(model, &n_streams);
    for (int i = 0; i < n_streams; i++)
        if (strlen(streams[i].name) >= STREAM_NAME_MAX)
            return rg_error(RG_EINVAL,
                            "%s: random stream '%.40s...' has a name of %zu characters; "
                            "a checkpoint keeps %zu",
                            path, streams[i].name, strlen(streams[i].name), STREAM_NAME_MAX - 1);
    rg_checkpoint_meta zero = {0};
    const rg_param_list *params = rg_model_params(model);
    const rg_param_list *state = optim ? rg_optim_state(optim) : NULL;
    int n = params->n + (state ? state->n : 0), ns;
    rg_model_streams(model, &ns);
    rg_named_tensor *all = malloc(((size_t)n + 1) * sizeof *all);
    size_t cap = FIXED_KEYS + 2 * (size_t)ns;
    kv_store *kv = malloc(cap * sizeof *kv);
    rg_safetensors_kv *pairs = malloc(cap * sizeof *pairs);
    rg_status s = RG_ENOMEM;
    if (all && kv && pairs) {
        memcpy(all, params->items, (size_t)params->n * sizeof *all);
        if (state) memcpy(all + params->n, state->items, (size_t)state->n * sizeof *all);
        int n_meta = build_meta(kv, model, optim, meta ? meta : &zero);
        for (int i = 0; i < n_meta; i++) pairs[i] = (rg_safetensors_kv){kv[i].key, kv[i].value};
        s = rg_safetensors_save(path, all, n, pairs, n_meta);
    } else {
        rg_error(s, "%s: out of memory for the checkpoint's index", path);
    }
    free(all), free(kv), free(pairs);
    return s;
}

/* ---- checking ---- */

/* Every tensor of `list` is in the file with its dtype and shape. */
RG_NODISCARD
static rg_status match_list(const rg_safetensors *f, const rg_param_list *list, const char *what) {
    for (int i = 0; i < list->n; i++) {
        const rg_named_tensor *t = &list->items[i];
        const rg_safetensors_entry *e = rg_safetensors_find(f, t->name);
        if (!e)
            return rg_error(RG_EMISMATCH, "%s: no tensor '%s', which the %s has",
                            rg_safetensors_path(f), t->name, what);
        RG_TRY(rg_safetensors_check_entry(f, e, t->tensor));
    }
    return RG_OK;
}

/* Every tensor of the file belongs to the model or, under "optim.", to the optimizer (any
 * "optim." tensor is accepted when state is NULL: it is not being loaded). */
RG_NODISCARD static rg_status check_extras(const rg_safetensors *f, const rg_model *model,
                              const rg_param_list *state) {
    for (int i = 0; i < rg_safetensors_count(f); i++) {
        const char *name = rg_safetensors_entry_at(f, i)->name;
        bool optim = is_optim_name(name);
        if (optim && (!state || rg_param_list_find(state, name))) continue;
        if (!optim && rg_param_list_find(rg_model_params(model), name)) continue;
        return rg_error(RG_EMISMATCH, "%s: tensor '%.200s' has no counterpart in the %s '%s'",
                        rg_safetensors_path(f), name, optim ? "optimizer of model" : "model",
                        rg_model_name(model));
    }
    return RG_OK;
}

/* The format version and the model name, when present; `required` makes them mandatory. */
RG_NODISCARD
static rg_status check_identity(const rg_safetensors *f, const rg_model *model, bool required) {
    const char *path = rg_safetensors_path(f);
    const char *version = rg_safetensors_meta(f, "ringgrad.format_version");
    const char *name = rg_safetensors_meta(f, "model");
    if (required && (!version || !name))
        return rg_error(
            RG_EMISMATCH,
            "%s: not a ringgrad checkpoint (no format version or model in its metadata); "
            "use --init to load only its weights",
            path);
    char want[16];
    snprintf(want, sizeof want, "%d", RG_CHECKPOINT_FORMAT_VERSION);
    if (version && strcmp(version, want) != 0)
        return rg_error(RG_ENOTSUP, "%s: checkpoint format version '%.40s'; this build reads %s",
                        path, version, want);
    if (name && strcmp(name, rg_model_name(model)) != 0)
        return rg_error(RG_EMISMATCH, "%s: a checkpoint of model '%.60s', not of '%s'", path, name,
                        rg_model_name(model));
    return RG_OK;
}

/* Metadata key `key` as an unsigned decimal integer (no sign, no spaces). */
RG_NODISCARD static rg_status meta_u64(const rg_safetensors *f, const char *key, uint64_t *out) {
    const char *v = rg_safetensors_meta(f, key);
    uint64_t x = 0;
    bool ok = v && *v;
    for (const char *c = v; ok && *c; c++) {
        ok = *c >= '0' && *c <= '9' && x <= (UINT64_MAX - (uint64_t)(*c - '0')) / 10;
        x = x * 10 + (uint64_t)(*c - '0');
    }
    if (!ok)
        return rg_error(RG_ECORRUPT, "%s: metadata '%s' is %s%.40s%s, not an unsigned integer",
                        rg_safetensors_path(f), key, v ? "'" : "", v ? v : "missing", v ? "'" : "");
    *out = x;
    return RG_OK;
}

RG_NODISCARD static rg_status meta_i64(const rg_safetensors *f, const char *key, int64_t *out) {
    uint64_t x;
    RG_TRY(meta_u64(f, key, &x));
    if (x > INT64_MAX)
        return rg_error(RG_ECORRUPT, "%s: metadata '%s' is out of range", rg_safetensors_path(f),
                        key);
    *out = (int64_t)x;
    return RG_OK;
}

/* The optimizer's kind must match; its learning rate is returned in *lr. */
RG_NODISCARD
static rg_status check_optim_meta(const rg_safetensors *f, rg_optim *optim, float *lr) {
    const char *path = rg_safetensors_path(f), *kind = rg_safetensors_meta(f, "optim");
    if (!kind)
        return rg_error(RG_EMISMATCH,
                        "%s: holds no optimizer state to resume the %s optimizer from (a "
                        "weights-only file, such as ps-async's --save-every ones: start from its "
                        "weights with ringgrad-train --init, or rg_checkpoint_load_weights)",
                        path, rg_optim_kind(optim));
    if (strcmp(kind, rg_optim_kind(optim)) != 0)
        return rg_error(RG_EMISMATCH, "%s: holds the state of a '%.40s' optimizer, not of '%s'",
                        path, kind, rg_optim_kind(optim));
    const char *v = rg_safetensors_meta(f, "optim.lr");
    char *end = NULL;
    double x = v ? strtod(v, &end) : NAN;
    if (!v || end == v || *end || !isfinite(x) || x < 0.0 || x > 3.4e38)
        return rg_error(RG_ECORRUPT, "%s: metadata 'optim.lr' is %s%.40s%s, not a learning rate",
                        path, v ? "'" : "", v ? v : "missing", v ? "'" : "");
    *lr = (float)x;
    return RG_OK;
}

/* The saved position of every random stream of the model, into out[0, n). */
RG_NODISCARD
static rg_status read_streams(const rg_safetensors *f, const rg_model *model, rg_rng_stream *out) {
    int n;
    const rg_named_stream *st = rg_model_streams(model, &n);
    for (int i = 0; i < n; i++) {
        char key[KV_KEY_MAX];
        snprintf(key, sizeof key, "rng.%s.seed", st[i].name);
        RG_TRY(meta_u64(f, key, &out[i].seed));
        snprintf(key, sizeof key, "rng.%s.offset", st[i].name);
        RG_TRY(meta_u64(f, key, &out[i].offset));
    }
    return RG_OK;
}

RG_NODISCARD static rg_status read_list(rg_safetensors *f, const rg_param_list *list) {
    for (int i = 0; i < list->n; i++)
        RG_TRY(rg_safetensors_read_tensor(f, rg_safetensors_find(f, list->items[i].name),
                                          list->items[i].tensor));
    return RG_OK;
}

/* Every float tensor of `list` in the file is finite: a NaN or Inf weight would load silently
 * and train into a model that reports plausible numbers (ReLU used to turn NaN into 0). Reads
 * each tensor once more into a scratch buffer, before anything is changed. */
RG_NODISCARD static rg_status check_finite(rg_safetensors *f, const rg_param_list *list) {
    size_t cap = 0;
    float *buf = NULL;
    rg_status s = RG_OK;
    for (int i = 0; i < list->n && s == RG_OK; i++) {
        const rg_safetensors_entry *e = rg_safetensors_find(f, list->items[i].name);
        if (list->items[i].tensor->dtype != RG_F32 || e->numel == 0) continue;
        size_t bytes = (size_t)(e->end - e->begin);
        if (bytes > cap) {
            free(buf);
            cap = bytes;
            if (!(buf = malloc(cap)))
                return rg_error(RG_ENOMEM, "%s: out of memory checking '%.200s'",
                                rg_safetensors_path(f), e->name);
        }
        s = rg_safetensors_read(f, e, buf);
        for (int64_t k = 0; s == RG_OK && k < e->numel; k++)
            if (!isfinite(buf[k]))
                s = rg_error(RG_ECORRUPT,
                             "%s: tensor '%.200s' holds a non-finite value (%g at element %lld); "
                             "a checkpoint with NaN or Inf is not loaded",
                             rg_safetensors_path(f), e->name, (double)buf[k], (long long)k);
    }
    free(buf);
    return s;
}

/* Checks the whole file against model and optim, then loads it. */
RG_NODISCARD static rg_status load_checked(rg_safetensors *f, rg_model *model, rg_optim *optim,
                              rg_checkpoint_meta *meta, rg_rng_stream *streams) {
    const rg_param_list *state = optim ? rg_optim_state(optim) : NULL;
    float lr = 0.0f;
    RG_TRY(check_identity(f, model, true));
    if (optim) RG_TRY(check_optim_meta(f, optim, &lr));
    RG_TRY(match_list(f, rg_model_params(model), "model"));
    if (state) RG_TRY(match_list(f, state, "optimizer"));
    RG_TRY(check_extras(f, model, state));
    rg_checkpoint_meta m = {0};
    RG_TRY(meta_i64(f, "step", &m.step));
    RG_TRY(meta_i64(f, "epoch", &m.epoch));
    RG_TRY(meta_u64(f, "seed", &m.seed));
    if (rg_safetensors_meta(f, "global_batch")) RG_TRY(meta_i64(f, "global_batch", &m.global_batch));
    if (rg_safetensors_meta(f, "steps_per_epoch"))
        RG_TRY(meta_i64(f, "steps_per_epoch", &m.steps_per_epoch));
    snprintf(m.model, sizeof m.model, "%s", rg_safetensors_meta(f, "model"));
    RG_TRY(read_streams(f, model, streams));
    RG_TRY(check_finite(f, rg_model_params(model)));
    if (state) RG_TRY(check_finite(f, state));

    /* Everything checked: now change the model and the optimizer. */
    RG_TRY(read_list(f, rg_model_params(model)));
    if (state) RG_TRY(read_list(f, state));
    int ns;
    const rg_named_stream *st = rg_model_streams(model, &ns);
    for (int i = 0; i < ns; i++) *st[i].stream = streams[i];
    if (optim) rg_optim_set_lr(optim, lr);
    if (meta) *meta = m;
    return RG_OK;
}

rg_status rg_checkpoint_load(const char *path, rg_model *model, rg_optim *optim,
                             rg_checkpoint_meta *meta) {
    RG_CHECK(path && model, "rg_checkpoint_load: NULL path or model");
    rg_safetensors *f;
    RG_TRY(rg_safetensors_open(path, &f));
    int ns;
    rg_model_streams(model, &ns);
    rg_rng_stream *streams = malloc(((size_t)ns + 1) * sizeof *streams);
    rg_status s = streams ? load_checked(f, model, optim, meta, streams)
                          : rg_error(RG_ENOMEM, "%s: out of memory", path);
    free(streams);
    rg_safetensors_close(f);
    return s;
}

rg_status rg_checkpoint_load_weights(const char *path, rg_model *model) {
    RG_CHECK(path && model, "rg_checkpoint_load_weights: NULL path or model");
    rg_safetensors *f;
    RG_TRY(rg_safetensors_open(path, &f));
    rg_status s = check_identity(f, model, false);
    if (s == RG_OK) s = match_list(f, rg_model_params(model), "model");
    if (s == RG_OK) s = check_extras(f, model, NULL);
    if (s == RG_OK) s = check_finite(f, rg_model_params(model));
    if (s == RG_OK) s = read_list(f, rg_model_params(model));
    rg_safetensors_close(f);
    return s;
}
