/* safetensors.c — opening and validating a safetensors file, and reading its tensors.
 *
 * What it teaches: how to read an untrusted binary format. Every number from the file is checked
 * against what it must describe (the header length against the file size, each shape against its
 * byte range, the byte ranges against the data section and against each other) before anything
 * is read on the strength of it. Only then are entries handed out. The writer is in
 * safetensors_write.c. */
#include "ringgrad/safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/json.h"
#include "models/safetensors_impl.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian; this reader copies it as is");

struct rg_safetensors {
    char *path;
    FILE *fp;
    uint64_t data_start, data_size; /* the data section: file bytes [data_start, +data_size) */
    rg_json *header;
    rg_safetensors_entry *entries; /* sorted by name */
    int n;
    const rg_json **meta; /* the __metadata__ members, sorted by key */
    int n_meta;
};

/* Records "<path>: <message>" and returns s. */
static rg_status fail(rg_status s, const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rg_error(s, "%s: %s", path, msg);
}

/* ---- one entry: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} ---- */

RG_NODISCARD static rg_status parse_shape(const char *path, const char *name, const rg_json *v,
                             rg_safetensors_entry *e) {
    if (v->kind != RG_JSON_ARRAY || v->count > RG_SAFETENSORS_MAX_DIMS)
        return fail(RG_ECORRUPT, path,
                    "tensor '%.200s': shape must be an array of at most %d sizes", name,
                    RG_SAFETENSORS_MAX_DIMS);
    e->ndim = (int)v->count;
    e->numel = 1;
    int i = 0;
    for (const rg_json *d = v->child; d; d = d->next, i++) {
        if (d->kind != RG_JSON_NUMBER || !d->is_int || d->integer < 0)
            return fail(RG_ECORRUPT, path,
                        "tensor '%.200s': shape[%d] is not a non-negative integer", name, i);
        e->shape[i] = d->integer;
        if (d->integer && e->numel > INT64_MAX / d->integer)
            return fail(RG_ECORRUPT, path, "tensor '%.200s': shape overflows", name);
        e->numel *= d->integer;
    }
    return RG_OK;
}

RG_NODISCARD static rg_status parse_offsets(const char *path, const char *name, const rg_json *v,
                               rg_safetensors_entry *e) {
    const rg_json *b = v->kind == RG_JSON_ARRAY && v->count == 2 ? v->child : NULL;
    const rg_json *end = b ? b->next : NULL;
    if (!b || b->kind != RG_JSON_NUMBER || !b->is_int || b->integer < 0 ||
        end->kind != RG_JSON_NUMBER || !end->is_int || end->integer < b->integer)
        return fail(RG_ECORRUPT, path,
                    "tensor '%.200s': data_offsets must be [begin, end] with 0 <= begin <= end",
                    name);
    e->begin = (uint64_t)b->integer, e->end = (uint64_t)end->integer;
    return RG_OK;
}

RG_NODISCARD static rg_status parse_entry(const char *path, const rg_json *m, uint64_t data_size,
                             rg_safetensors_entry *e) {
    const char *name = m->key;
    e->name = name;
    if (m->kind != RG_JSON_OBJECT)
        return fail(RG_ECORRUPT, path, "tensor '%.200s': expected an object, got %s", name,
                    rg_json_kind_name(m->kind));
    const rg_json *dtype = rg_json_get(m, "dtype"), *shape = rg_json_get(m, "shape");
    const rg_json *offsets = rg_json_get(m, "data_offsets");
    if (m->count != 3 || !dtype || !shape || !offsets)
        return fail(RG_ECORRUPT, path,
                    "tensor '%.200s': needs exactly the fields dtype, shape and data_offsets",
                    name);
    const rg_st_dtype *dt = dtype->kind == RG_JSON_STRING ? rg_st_dtype_find(dtype->str) : NULL;
    if (!dt)
        return fail(RG_ECORRUPT, path, "tensor '%.200s': unknown dtype %.40s", name,
                    dtype->kind == RG_JSON_STRING ? dtype->str : "(not a string)");
    e->dtype = dt->name;
    e->elem_size = dt->size;
    RG_TRY(parse_shape(path, name, shape, e));
    RG_TRY(parse_offsets(path, name, offsets, e));
    uint64_t bytes = (uint64_t)e->numel * e->elem_size; /* checked for overflow just below */
    if ((uint64_t)e->numel > UINT64_MAX / e->elem_size || e->end - e->begin != bytes)
        return fail(RG_ECORRUPT, path,
                    "tensor '%.200s': %lld %s elements need %llu bytes, data_offsets [%llu, %llu] "
                    "hold %llu",
                    name, (long long)e->numel, e->dtype, (unsigned long long)bytes,
                    (unsigned long long)e->begin, (unsigned long long)e->end,
                    (unsigned long long)(e->end - e->begin));
    if (e->end > data_size) /* what a file cut short looks like: say so first */
        return fail(
            RG_ECORRUPT, path,
            "truncated: tensor '%.200s' needs data_offsets [%llu, %llu] but the data section "
            "has only %llu bytes (the file is cut short, or its header is wrong)",
            name, (unsigned long long)e->begin, (unsigned long long)e->end,
            (unsigned long long)data_size);
    return RG_OK;
}

/* ---- the whole header ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(((const rg_safetensors_entry *)a)->name, ((const rg_safetensors_entry *)b)->name);
}

static int by_range(const void *a, const void *b) {
    const rg_safetensors_entry *x = *(rg_safetensors_entry *const *)a;
    const rg_safetensors_entry *y = *(rg_safetensors_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int by_key(const void *a, const void *b) {
    return strcmp((*(const rg_json *const *)a)->key, (*(const rg_json *const *)b)->key);
}

/* The data section must be covered exactly once: sorted by range, each tensor starts where the
 * previous one ended, and the last ends at the end of the section. */
RG_NODISCARD static rg_status check_coverage(rg_safetensors *f) {
    rg_safetensors_entry **order = malloc(((size_t)f->n + 1) * sizeof *order);
    if (!order) return fail(RG_ENOMEM, f->path, "out of memory");
    for (int i = 0; i < f->n; i++) order[i] = &f->entries[i];
    qsort(order, (size_t)f->n, sizeof *order, by_range);
    uint64_t at = 0;
    rg_status s = RG_OK;
    for (int i = 0; i < f->n && s == RG_OK; i++) {
        const rg_safetensors_entry *e = order[i];
        if (e->begin != at)
            s = fail(RG_ECORRUPT, f->path,
                     "tensor '%.200s' at data_offsets [%llu, %llu] %s the tensor ending at %llu",
                     e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                     e->begin < at ? "overlaps" : "leaves a gap after", (unsigned long long)at);
        at = e->end;
    }
    if (s == RG_OK && at != f->data_size)
        s = fail(RG_ECORRUPT, f->path, "the data section has %llu bytes but the tensors cover %llu",
                 (unsigned long long)f->data_size, (unsigned long long)at);
    free(order);
    return s;
}

RG_NODISCARD static rg_status parse_metadata(rg_safetensors *f, const rg_json *m) {
    if (f->meta) return fail(RG_ECORRUPT, f->path, "__metadata__ appears twice");
    if (m->kind != RG_JSON_OBJECT)
        return fail(RG_ECORRUPT, f->path, "__metadata__ must be an object");
    f->meta = malloc(((size_t)m->count + 1) * sizeof *f->meta);
    if (!f->meta) return fail(RG_ENOMEM, f->path, "out of memory");
    for (const rg_json *kv = m->child; kv; kv = kv->next) {
        if (kv->kind != RG_JSON_STRING)
            return fail(RG_ECORRUPT, f->path,
                        "__metadata__ value of '%.200s' is a %s, not a string", kv->key,
                        rg_json_kind_name(kv->kind));
        f->meta[f->n_meta++] = kv;
    }
    qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, by_key);
    for (int i = 1; i < f->n_meta; i++)
        if (strcmp(f->meta[i - 1]->key, f->meta[i]->key) == 0)
            return fail(RG_ECORRUPT, f->path, "__metadata__ key '%.200s' appears twice",
                        f->meta[i]->key);
    return RG_OK;
}

RG_NODISCARD static rg_status parse_header(rg_safetensors *f, const char *text, size_t len) {
    char err[256];
    f->header = rg_json_parse(text, len, err, sizeof err);
    if (!f->header) return fail(RG_ECORRUPT, f->path, "header: %s", err);
    if (f->header->kind != RG_JSON_OBJECT)
        return fail(RG_ECORRUPT, f->path, "header must be a JSON object");
    f->entries = calloc((size_t)f->header->count + 1, sizeof *f->entries);
    if (!f->entries) return fail(RG_ENOMEM, f->path, "out of memory");
    for (const rg_json *m = f->header->child; m; m = m->next) {
        if (strcmp(m->key, "__metadata__") == 0)
            RG_TRY(parse_metadata(f, m));
        else
            RG_TRY(parse_entry(f->path, m, f->data_size, &f->entries[f->n++]));
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->entries[i - 1].name, f->entries[i].name) == 0)
            return fail(RG_ECORRUPT, f->path, "tensor '%.200s' appears twice", f->entries[i].name);
    return check_coverage(f);
}

/* ---- opening ---- */

static const rg_st_dtype st_dtypes[] = {
    {"BOOL", 1, -1}, {"U8", 1, RG_U8},   {"I8", 1, -1},  {"F8_E5M2", 1, -1}, {"F8_E4M3", 1, -1},
    {"I16", 2, -1},  {"U16", 2, -1},     {"F16", 2, -1}, {"BF16", 2, -1},    {"I32", 4, RG_I32},
    {"U32", 4, -1},  {"F32", 4, RG_F32}, {"F64", 8, -1}, {"I64", 8, RG_I64}, {"U64", 8, -1},
};

const rg_st_dtype *rg_st_dtype_find(const char *name) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
    return NULL;
}

const char *rg_safetensors_dtype_name(rg_dtype dt) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].rg == (int)dt) return st_dtypes[i].name;
    rg_fatal(__FILE__, __LINE__, "safetensors: no name for dtype %d", (int)dt);
}

/* Reads the 8-byte length and the header text (malloc'ed into *text) after checking the length
 * against the file size. */
RG_NODISCARD
static rg_status read_header(rg_safetensors *f, uint64_t file_size, char **text, uint64_t *len) {
    unsigned char b[8];
    if (file_size < 8)
        return fail(
            RG_ECORRUPT, f->path,
            "%llu bytes: too short for a safetensors file (it starts with an 8-byte header length)",
            (unsigned long long)file_size);
    if (fread(b, 1, 8, f->fp) != 8)
        return fail(RG_EIO, f->path, "cannot read: %s", strerror(errno));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i]; /* little-endian */
    if (n > RG_SAFETENSORS_MAX_HEADER)
        return fail(RG_ECORRUPT, f->path, "header length %llu exceeds the limit of %d bytes",
                    (unsigned long long)n, RG_SAFETENSORS_MAX_HEADER);
    if (n > file_size - 8)
        return fail(RG_ECORRUPT, f->path,
                    "truncated, or a bad header length: the header length %llu exceeds the %llu "
                    "bytes after the length field",
                    (unsigned long long)n, (unsigned long long)(file_size - 8));
    *text = malloc(n + 1);
    if (!*text)
        return fail(RG_ENOMEM, f->path, "out of memory for a %llu-byte header",
                    (unsigned long long)n);
    if (fread(*text, 1, n, f->fp) != n) return fail(RG_EIO, f->path, "cannot read the header");
    *len = n;
    return RG_OK;
}

RG_NODISCARD static rg_status open_checked(rg_safetensors *f) {
    struct stat st;
    if (fstat(fileno(f->fp), &st) != 0) return fail(RG_EIO, f->path, "%s", strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail(RG_EIO, f->path, "not a regular file");
    char *text = NULL;
    uint64_t len = 0;
    rg_status s = read_header(f, (uint64_t)st.st_size, &text, &len);
    if (s == RG_OK) {
        f->data_start = 8 + len;
        f->data_size = (uint64_t)st.st_size - f->data_start;
        s = parse_header(f, text, len);
    }
    free(text);
    return s;
}

rg_status rg_safetensors_open(const char *path, rg_safetensors **out) {
    RG_CHECK(path && out, "rg_safetensors_open: NULL argument");
    *out = NULL;
    rg_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = malloc(strlen(path) + 1))) {
        free(f);
        return fail(RG_ENOMEM, path, "out of memory");
    }
    strcpy(f->path, path);
    f->fp = fopen(path, "rb");
    if (!f->fp) {
        rg_status s = errno == ENOENT ? RG_ENOENT : RG_EIO;
        fail(s, path, "cannot open: %s", strerror(errno));
        rg_safetensors_close(f);
        return s;
    }
    rg_status s = open_checked(f);
    if (s != RG_OK) return rg_safetensors_close(f), s;
    *out = f;
    return RG_OK;
}

void rg_safetensors_close(rg_safetensors *f) {
    if (!f) return;
    if (f->fp) fclose(f->fp);
    rg_json_free(f->header);
    free(f->entries);
    free(f->meta);
    free(f->path);
    free(f);
}

/* ---- looking up and reading ---- */

const char *rg_safetensors_path(const rg_safetensors *f) {
    return f->path;
}
int rg_safetensors_count(const rg_safetensors *f) {
    return f->n;
}

const rg_safetensors_entry *rg_safetensors_entry_at(const rg_safetensors *f, int i) {
    RG_CHECK(i >= 0 && i < f->n, "safetensors %s: entry %d of %d", f->path, i, f->n);
    return &f->entries[i];
}

const rg_safetensors_entry *rg_safetensors_find(const rg_safetensors *f, const char *name) {
    rg_safetensors_entry key = {.name = name};
    return bsearch(&key, f->entries, (size_t)f->n, sizeof key, by_name);
}

const char *rg_safetensors_meta(const rg_safetensors *f, const char *key) {
    if (f->n_meta == 0) return NULL; /* meta is NULL then, and bsearch wants a real array */
    rg_json k = {.key = (char *)key};
    const rg_json *kp = &k;
    const rg_json **hit = bsearch(&kp, f->meta, (size_t)f->n_meta, sizeof kp, by_key);
    return hit ? (*hit)->str : NULL;
}

/* The arguments of the entry functions: e is NULL when rg_safetensors_find found no such name,
 * which is said, rather than a crash; `third` names the last argument, given when third_ok. */
static void check_args(const char *fn, const rg_safetensors *f, const rg_safetensors_entry *e,
                       const char *third, bool third_ok) {
    RG_CHECK(f && e && third_ok, "%s: NULL %s", fn,
             !e   ? "entry (rg_safetensors_find returns NULL for a missing name)"
             : !f ? "file"
                  : third);
}

rg_status rg_safetensors_read(rg_safetensors *f, const rg_safetensors_entry *e, void *dst) {
    check_args("rg_safetensors_read", f, e, "destination", dst || !e || e->end == e->begin);
    size_t bytes = (size_t)(e->end - e->begin);
    if (bytes == 0) return RG_OK;
    if (fseeko(f->fp, (off_t)(f->data_start + e->begin), SEEK_SET) != 0 ||
        fread(dst, 1, bytes, f->fp) != bytes)
        return fail(
            RG_EIO, f->path,
            "cannot read tensor '%.200s' (%zu bytes): the file is shorter than it was when opened",
            e->name, bytes);
    return RG_OK;
}

rg_status rg_safetensors_check_entry(const rg_safetensors *f, const rg_safetensors_entry *e,
                                     const rg_tensor *t) {
    check_args("rg_safetensors_check_entry", f, e, "tensor", t != NULL);
    const rg_st_dtype *dt = rg_st_dtype_find(e->dtype);
    bool same = dt && dt->rg == (int)t->dtype && e->ndim == t->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = e->shape[i] == t->shape[i];
    if (same) return RG_OK;
    char want[96], got[128];
    rg_shape_str(t->ndim, t->shape, want, sizeof want);
    rg_shape_str(e->ndim, e->shape, got, sizeof got);
    return fail(RG_EMISMATCH, f->path, "tensor '%.200s': the file has %s %s, expected %s %s",
                e->name, e->dtype, got, rg_safetensors_dtype_name(t->dtype), want);
}

rg_status rg_safetensors_read_tensor(rg_safetensors *f, const rg_safetensors_entry *e,
                                     rg_tensor *t) {
    RG_TRY(rg_safetensors_check_entry(f, e, t));
    if (t->device.type == RG_DEV_CPU) return rg_safetensors_read(f, e, t->data);
    void *host = malloc(rg_tensor_nbytes(t) + 1);
    if (!host) return fail(RG_ENOMEM, f->path, "out of memory staging '%.200s'", e->name);
    rg_status s = rg_safetensors_read(f, e, host);
    if (s == RG_OK) rg_tensor_copy_from_host(t, host);
    free(host);
    return s;
}
