/* registry.c — optimizers by name: rg_optim_new("sgd", params, "lr=0.1,momentum=0.9").
 *
 * What it teaches: a program that picks its optimizer from a flag (ringgrad-train's --optim)
 * needs no strcmp chain and no struct that knows every rule. Each rule describes itself (its name,
 * its options struct, the names and offsets of its fields, its defaults and constructor) in its own
 * file; this table lists the descriptors, and the parser below fills any rule's options from
 * "key=value" pairs. A new optimizer is its own file plus one line in `registry`. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_impl.h"

static const rg_optim_desc *const registry[] = {
    &rg_sgd_desc,
    &rg_adam_desc,
    &rg_adamw_desc,
};
enum { N_REGISTERED = sizeof registry / sizeof registry[0] };

const char *rg_optim_names(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_REGISTERED; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     registry[i]->name);
    return names;
}

static const rg_optim_desc *find(const char *name) {
    for (int i = 0; i < N_REGISTERED; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

static void key_list(const rg_optim_desc *d, char *buf, size_t cap) {
    buf[0] = 0;
    for (int k = 0; k < d->n_keys; k++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", k ? ", " : "", d->keys[k].key);
}

/* Sets one "key=value" (len chars at kv) in the options; RG_EINVAL naming the problem. */
/* kv (len bytes, "key=value") into opts; *given marks the keys set so far, by index. */
static rg_status set_key(const rg_optim_desc *d, void *opts, const char *kv, size_t len,
                         uint64_t *given) {
    char item[128], keys[256];
    if (len >= sizeof item)
        return rg_error(RG_EINVAL, "%s: option '%.40s...' too long", d->name, kv);
    memcpy(item, kv, len);
    item[len] = 0;
    char *eq = strchr(item, '=');
    if (!eq) return rg_error(RG_EINVAL, "%s: option '%s' is not key=value", d->name, item);
    *eq = 0;
    const char *val = eq + 1;
    const rg_optim_key *key = NULL;
    int index = -1;
    for (int k = 0; k < d->n_keys; k++)
        if (strcmp(d->keys[k].key, item) == 0) key = &d->keys[k], index = k;
    if (!key) {
        key_list(d, keys, sizeof keys);
        return rg_error(RG_EINVAL, "%s has no option '%s' (its options: %s)", d->name, item, keys);
    }
    if (index < 64 && (*given >> index & 1)) /* the last one won, silently */
        return rg_error(RG_EINVAL, "%s: option '%s' given twice", d->name, item);
    if (index < 64) *given |= (uint64_t)1 << index;
    char *field = (char *)opts + key->offset, *end = NULL;
    if (key->type == RG_OPTKEY_BOOL) {
        bool v = strcmp(val, "1") == 0 || strcmp(val, "true") == 0;
        if (!v && strcmp(val, "0") != 0 && strcmp(val, "false") != 0)
            return rg_error(RG_EINVAL, "%s: %s=%s: not a boolean (0, 1, false, true)", d->name,
                            item, val);
        *(bool *)field = v;
        return RG_OK;
    }
    errno = 0;
    double x = strtod(val, &end);
    if (end == val || *end || errno || !isfinite(x))
        return rg_error(RG_EINVAL, "%s: %s=%s: not a number", d->name, item, val);
    *(float *)field = (float)x;
    return RG_OK;
}

rg_optim *rg_optim_new(const char *name, const rg_param_list *params, const char *options) {
    RG_CHECK(name && params, "rg_optim_new: NULL name or parameters");
    const rg_optim_desc *d = find(name);
    if (!d) {
        rg_error(RG_EINVAL, "no optimizer named '%s' (known: %s)", name, rg_optim_names());
        return NULL;
    }
    _Alignas(max_align_t) unsigned char opts[256];
    RG_CHECK(d->opts_size <= sizeof opts, "optimizer %s: options struct too large", d->name);
    d->defaults(opts);
    uint64_t given = 0;
    for (const char *s = options ? options : ""; *s;) {
        size_t len = strcspn(s, ",");
        if (!len) { /* ",," or a leading comma; a trailing one ends the list */
            rg_error(RG_EINVAL, "%s: an empty option in '%s'", d->name, options);
            return NULL;
        }
        if (set_key(d, opts, s, len, &given) != RG_OK) return NULL;
        s += len + (s[len] == ',');
    }
    return d->create(params, opts);
}
