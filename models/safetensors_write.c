/* safetensors_write.c — writing a safetensors file atomically.
 *
 * What it teaches: a file that must survive a crash is never written in place. Write a temporary
 * file in the same directory, flush it and fsync it (the data is on disk), rename it over the
 * target (atomic on POSIX), then fsync the directory (the rename is on disk). A reader sees the
 * old file or the new one, never half of one. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringgrad/safetensors.h"
#include "models/safetensors_impl.h"
#include "core/path.h"
#include "core/strbuf.h"

/* ---- the JSON header, built in a growing buffer ---- */

/* {"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...} padded with
 * spaces to a multiple of 8 bytes, so that the data section starts aligned. */
static void build_header(rg_strbuf *b, const rg_named_tensor *ts, int n, const rg_safetensors_kv *meta,
                         int n_meta) {
    rg_strbuf_put(b, "{", 1);
    if (n_meta > 0) {
        rg_strbuf_put(b, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta; i++) {
            if (i) rg_strbuf_put(b, ",", 1);
            rg_strbuf_json_string(b, meta[i].key);
            rg_strbuf_put(b, ":", 1);
            rg_strbuf_json_string(b, meta[i].value);
        }
        rg_strbuf_put(b, "}", 1);
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const rg_tensor *t = ts[i].tensor;
        rg_strbuf_put(b, i || n_meta > 0 ? "," : "", i || n_meta > 0 ? 1 : 0);
        rg_strbuf_json_string(b, ts[i].name);
        rg_strbuf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", rg_safetensors_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) rg_strbuf_printf(b, "%s%" PRId64, d ? "," : "", t->shape[d]);
        uint64_t end = at + rg_tensor_nbytes(t);
        rg_strbuf_printf(b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at, end);
        at = end;
    }
    rg_strbuf_put(b, "}", 1);
    while (b->len % 8) rg_strbuf_put(b, " ", 1);
}

/* ---- writing ---- */

RG_NODISCARD static rg_status write_failed(const char *path, const char *what) {
    return rg_error(RG_EIO, "%s: %s: %s", path, what, strerror(errno ? errno : EIO));
}

/* Writes the length, the header and every tensor's bytes to fp. */
RG_NODISCARD static rg_status write_body(FILE *fp, const char *path, const rg_strbuf *hdr,
                            const rg_named_tensor *ts, int n) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    if (fwrite(len, 1, 8, fp) != 8 || fwrite(hdr->s, 1, hdr->len, fp) != hdr->len)
        return write_failed(path, "write");
    for (int i = 0; i < n; i++) {
        const rg_tensor *t = ts[i].tensor;
        size_t bytes = rg_tensor_nbytes(t);
        const void *src = t->data;
        void *staged = NULL;
        if (t->device.type != RG_DEV_CPU) { /* stage device tensors through host memory */
            if (!(staged = malloc(bytes + 1)))
                return rg_error(RG_ENOMEM, "%s: out of memory staging '%s'", path, ts[i].name);
            rg_tensor_copy_to_host(t, staged);
            src = staged;
        }
        size_t put = bytes ? fwrite(src, 1, bytes, fp) : 0;
        free(staged);
        if (put != bytes) return write_failed(path, "write");
    }
    return RG_OK;
}

/* fsync of the directory holding path, so that the rename itself is durable. */
RG_NODISCARD static rg_status sync_dir(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return write_failed(dir, "open directory");
    int rc = fsync(fd);
    close(fd);
    return rc == 0 ? RG_OK : write_failed(dir, "fsync directory");
}

static void check_names(const rg_named_tensor *ts, int n, const rg_safetensors_kv *meta,
                        int n_meta) {
    for (int i = 0; i < n; i++) {
        RG_CHECK(ts[i].name && ts[i].tensor, "safetensors: tensor %d has no name or no tensor", i);
        RG_CHECK(strcmp(ts[i].name, "__metadata__") != 0, "safetensors: reserved name");
        for (int j = 0; j < i; j++) /* n is small (parameters + state); O(n^2) is fine */
            RG_CHECK(strcmp(ts[i].name, ts[j].name) != 0, "safetensors: tensor '%s' given twice",
                     ts[i].name);
    }
    for (int i = 0; i < n_meta; i++)
        RG_CHECK(meta[i].key && meta[i].value, "safetensors: metadata %d is NULL", i);
}

rg_status rg_safetensors_save(const char *path, const rg_named_tensor *ts, int n,
                              const rg_safetensors_kv *meta, int n_meta) {
    RG_CHECK(path && (ts || n == 0) && (meta || n_meta == 0), "rg_safetensors_save: NULL argument");
    check_names(ts, n, meta, n_meta);
    char target[4096];
    const char *what = rg_path_not_regular(path, target, sizeof target); /* see core/path.h */
    if (what)
        return rg_error(RG_EINVAL,
                        "%s: is %s%s%s; saving would replace it by a regular file: give the path "
                        "of a regular file (or a new one)",
                        path, what, target[0] ? " to " : "", target);
    rg_strbuf hdr = {0};
    build_header(&hdr, ts, n, meta, n_meta);
    if (hdr.oom) return free(hdr.s), rg_error(RG_ENOMEM, "%s: out of memory for the header", path);

    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= sizeof tmp)
        return free(hdr.s), rg_error(RG_EINVAL, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return free(hdr.s), write_failed(tmp, "create");
    fchmod(fd, 0644); /* mkstemp makes it 0600; a checkpoint is an ordinary file */
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        unlink(tmp);
        return free(hdr.s), write_failed(tmp, "fdopen");
    }
    rg_status s = write_body(fp, tmp, &hdr, ts, n);
    free(hdr.s);
    if (s == RG_OK && fflush(fp) != 0) s = write_failed(tmp, "flush");
    if (s == RG_OK && fsync(fileno(fp)) != 0) s = write_failed(tmp, "fsync");
    if (fclose(fp) != 0 && s == RG_OK) s = write_failed(tmp, "close");
    if (s == RG_OK && rename(tmp, path) != 0) s = write_failed(path, "rename");
    if (s != RG_OK) {
        unlink(tmp);
        return s;
    }
    return sync_dir(path);
}
