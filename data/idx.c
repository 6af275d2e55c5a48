/* idx.c — a defensive IDX reader (see idx.h for the format).
 *
 * What it teaches: how to read a file format whose header is untrusted. Each header field is
 * checked before it is used to size anything, sizes are multiplied with overflow checks, and the
 * buffer grows with the bytes that really arrive instead of trusting the promised size. Every
 * failure becomes an rg_status with a message that names the file and the problem. */
#include "ringgrad/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* First allocation for the payload; it doubles up to the promised size as data arrives. */
#define IDX_INITIAL_CAPACITY ((size_t)16 << 20)
/* gzread takes an unsigned int length: read in chunks of at most this many bytes. */
#define IDX_MAX_CHUNK ((size_t)1 << 30)

/* What the payload is called in messages: "47040000 bytes of pixels". */
static const char *payload_name(int ndim) {
    return ndim == 1 ? "labels" : "pixels";
}

/* Reads up to n bytes; *got is the count read, short at the end of the file. A gzip stream cut
 * short is not an error here: zlib reports it as a short read, and the caller turns that into
 * "truncated". */
RG_NODISCARD
static rg_status read_some(gzFile f, const char *path, void *buf, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < IDX_MAX_CHUNK ? n - *got : IDX_MAX_CHUNK;
        int r = gzread(f, (char *)buf + *got, (unsigned)want);
        if (r < 0) {
            int err;
            const char *msg = gzerror(f, &err);
            if (err == Z_ERRNO)
                return rg_error(RG_EIO, "%s: read error: %s", path, strerror(errno));
            return rg_error(RG_ECORRUPT, "%s: damaged gzip stream: %s", path, msg);
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return RG_OK;
}

/* Why a read stopped early, for the "truncated" message. */
static const char *short_read_reason(gzFile f) {
    int err;
    gzerror(f, &err);
    return err == Z_BUF_ERROR ? " (the gzip stream is cut short)" : "";
}

static uint32_t load_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads and checks the magic number and the dimensions; fills a->ndim and a->dims and returns
 * the payload size in bytes through *nbytes. */
RG_NODISCARD
static rg_status read_header(gzFile f, const char *path, int ndim, rg_idx *a, int64_t *nbytes) {
    uint8_t head[4 + 4 * RG_IDX_MAX_DIMS];
    size_t head_len = 4 + 4 * (size_t)ndim;
    size_t got;
    RG_TRY(read_some(f, path, head, head_len, &got));
    if (got == 0 && *short_read_reason(f))
        return rg_error(RG_ECORRUPT, "%s: truncated: no data%s", path, short_read_reason(f));
    if (got == 0) return rg_error(RG_ECORRUPT, "%s: empty file (expected an IDX header)", path);
    uint32_t want_magic = (uint32_t)RG_IDX_TYPE_U8 << 8 | (uint32_t)ndim;
    if (got < 4)
        return rg_error(RG_ECORRUPT,
                        "%s: truncated: the file ends inside the magic number (%zu of 4 bytes)%s",
                        path, got, short_read_reason(f));
    uint32_t magic = load_be32(head);
    if (magic != want_magic)
        return rg_error(RG_ECORRUPT,
                        "%s: bad magic number 0x%08" PRIx32 " (expected 0x%08" PRIx32
                        ": IDX unsigned bytes in %d dimension%s)",
                        path, magic, want_magic, ndim, ndim == 1 ? "" : "s");
    if (got < head_len)
        return rg_error(RG_ECORRUPT, "%s: truncated: the header ends after %zu of %zu bytes%s",
                        path, got, head_len, short_read_reason(f));
    int64_t total = 1;
    bool over = false;
    char dims[16 * RG_IDX_MAX_DIMS] = "";
    for (int i = 0; i < ndim; i++) {
        int64_t d = load_be32(head + 4 + 4 * i);
        if (d == 0) return rg_error(RG_ECORRUPT, "%s: dimension %d is 0", path, i);
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%" PRId64, i ? " x " : "", d);
        over = over || total > RG_IDX_MAX_BYTES / d;
        if (!over) total *= d;
        a->dims[i] = d;
    }
    /* the whole shape, not the dimension where the product crossed the limit: a count of 2^31
     * images is the absurd part of 2147483648 x 28 x 28, not the 28 */
    if (over)
        return rg_error(RG_ECORRUPT,
                        "%s: absurd header: %s %s would exceed the %" PRId64 " GiB limit", path,
                        dims, ndim == 1 ? "labels" : "bytes of pixels", RG_IDX_MAX_BYTES >> 30);
    a->ndim = ndim;
    *nbytes = total;
    return RG_OK;
}

/* Reads exactly n payload bytes into a->data, growing the buffer as data arrives. */
RG_NODISCARD static rg_status read_payload(gzFile f, const char *path, rg_idx *a, size_t n) {
    size_t cap = n < IDX_INITIAL_CAPACITY ? n : IDX_INITIAL_CAPACITY, got = 0;
    a->data = malloc(cap);
    if (!a->data) return rg_error(RG_ENOMEM, "%s: out of memory for %zu bytes", path, cap);
    for (;;) {
        size_t r;
        RG_TRY(read_some(f, path, a->data + got, cap - got, &r));
        got += r;
        if (got < cap || cap == n) break; /* end of file, or everything promised is here */
        size_t bigger = cap * 2 < n ? cap * 2 : n;
        uint8_t *p = realloc(a->data, bigger);
        if (!p) return rg_error(RG_ENOMEM, "%s: out of memory for %zu bytes", path, bigger);
        a->data = p, cap = bigger;
    }
    if (got < n)
        return rg_error(RG_ECORRUPT, "%s: truncated: expected %zu bytes of %s, got %zu%s", path, n,
                        payload_name(a->ndim), got, short_read_reason(f));
    a->nbytes = n;
    return RG_OK;
}

/* The payload must end the file: extra bytes mean the header does not describe the data. */
RG_NODISCARD static rg_status check_end(gzFile f, const char *path, const rg_idx *a) {
    uint8_t extra[4096];
    size_t r;
    RG_TRY(read_some(f, path, extra, sizeof extra, &r));
    if (r == 0 && *short_read_reason(f)) /* all data there, but not the gzip checksum */
        return rg_error(RG_ECORRUPT, "%s: truncated after the %zu bytes of %s%s", path, a->nbytes,
                        payload_name(a->ndim), short_read_reason(f));
    if (r > 0)
        return rg_error(RG_ECORRUPT,
                        "%s: trailing garbage: %zu%s unexpected bytes after the "
                        "%zu bytes of %s",
                        path, r, r == sizeof extra ? " or more" : "", a->nbytes,
                        payload_name(a->ndim));
    return RG_OK;
}

rg_status rg_idx_read(const char *path, int ndim, rg_idx *out) {
    RG_CHECK(path && out, "rg_idx_read: NULL path or output");
    RG_CHECK(ndim >= 1 && ndim <= RG_IDX_MAX_DIMS, "rg_idx_read: ndim %d not in [1, %d]", ndim,
             RG_IDX_MAX_DIMS);
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; fstat then
     * refuses anything that is not a regular file (FIFOs, devices, sockets, folders). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return rg_error(RG_ENOENT, "%s: no such file", path);
        return rg_error(RG_EIO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rg_error(RG_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rg_error(RG_EIO, "%s: not a regular file (%s); IDX data must be a file", path,
                        S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO"
                        : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "special");
    }
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return rg_error(RG_ENOMEM, "%s: out of memory opening the file", path);
    }
    gzbuffer(f, 256 * 1024);
    int64_t nbytes = 0;
    rg_status s = read_header(f, path, ndim, out, &nbytes);
    if (s == RG_OK) s = read_payload(f, path, out, (size_t)nbytes);
    if (s == RG_OK) s = check_end(f, path, out);
    gzclose_r(f);
    if (s != RG_OK) rg_idx_deinit(out);
    return s;
}

void rg_idx_deinit(rg_idx *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
