/* fixtures.h — small IDX files written by the tests at run time (nothing is committed).
 *
 * The encoder here is written independently of data/idx.c, byte by byte from the format
 * description, so a round trip checks the reader against the format and not against itself. */
#ifndef RG_TEST_DATASET_FIXTURES_H
#define RG_TEST_DATASET_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "rgtest.h"

/* A growable byte buffer. */
typedef struct {
    uint8_t *p;
    size_t n;
} fx_bytes;

static inline void fx_append(fx_bytes *b, const void *src, size_t n) {
    b->p = realloc(b->p, b->n + n + 1);
    cr_assert(b->p);
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void fx_append_be32(fx_bytes *b, uint32_t v) {
    uint8_t q[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fx_append(b, q, 4);
}

/* An IDX file image: magic, dims (big-endian), then the payload. */
static inline fx_bytes fx_idx(uint32_t magic, int ndim, const uint32_t *dims, const uint8_t *data,
                              size_t nbytes) {
    fx_bytes b = {0};
    fx_append_be32(&b, magic);
    for (int i = 0; i < ndim; i++) fx_append_be32(&b, dims[i]);
    fx_append(&b, data, nbytes);
    return b;
}

/* Writes n bytes to path, gzipped when gz is true. */
static inline void fx_write(const char *path, const void *p, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert(f, "cannot create %s", path);
        if (n) cr_assert_eq(gzwrite(f, p, (unsigned)n), (int)n, "gzwrite %s", path);
        cr_assert_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert(f, "cannot create %s", path);
        if (n) cr_assert_eq(fwrite(p, 1, n, f), n);
        cr_assert_eq(fclose(f), 0);
    }
}

/* The whole raw content of a file. */
static inline fx_bytes fx_read(const char *path) {
    fx_bytes b = {0};
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    uint8_t buf[4096];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) fx_append(&b, buf, r);
    fclose(f);
    return b;
}

/* The pixel and label patterns of the fixture datasets: item i, byte p. */
static inline uint8_t fx_pixel(int64_t i, int64_t p) {
    return (uint8_t)(i * 7 + p * 3 + 1);
}
static inline uint8_t fx_label(int64_t i) {
    return (uint8_t)((i * 3) % 10);
}

/* Writes <dir>/<prefix>-images-idx3-ubyte[.gz] and -labels-idx1-ubyte[.gz] with n items of h x w
 * following the fixture patterns. */
static inline void fx_write_pair(const char *dir, const char *prefix, uint32_t n, uint32_t h,
                                 uint32_t w, bool gz) {
    size_t size = (size_t)h * w;
    uint8_t *px = malloc((size_t)n * size), *lb = malloc(n);
    for (uint32_t i = 0; i < n; i++) {
        for (size_t p = 0; p < size; p++) px[i * size + p] = fx_pixel(i, (int64_t)p);
        lb[i] = fx_label(i);
    }
    char path[4200];
    fx_bytes img = fx_idx(0x00000803, 3, (uint32_t[]){n, h, w}, px, (size_t)n * size);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    fx_write(path, img.p, img.n, gz);
    fx_bytes lab = fx_idx(0x00000801, 1, (uint32_t[]){n}, lb, n);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    fx_write(path, lab.p, lab.n, gz);
    free(img.p), free(lab.p), free(px), free(lb);
}

/* Asserts status s == want and that rg_last_error() contains every given substring. */
#define fx_assert_error(s, want, ...)                                                              \
    do {                                                                                           \
        rg_status fx_s_ = (s);                                                                     \
        cr_assert_eq(fx_s_, (want), "got %s, want %s: %s", rg_status_name(fx_s_),                  \
                     rg_status_name(want), rg_last_error());                                       \
        const char *fx_subs_[] = {__VA_ARGS__};                                                    \
        for (size_t fx_i_ = 0; fx_i_ < sizeof fx_subs_ / sizeof fx_subs_[0]; fx_i_++)              \
            cr_assert(strstr(rg_last_error(), fx_subs_[fx_i_]), "message \"%s\" lacks \"%s\"",     \
                      rg_last_error(), fx_subs_[fx_i_]);                                           \
    } while (0)

#endif
