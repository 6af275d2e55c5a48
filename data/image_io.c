/* image_io.c — one image file, read as hostile input (see image.h).
 *
 * What it teaches: the order of checks that keeps a decoder of untrusted files safe.
 *   1. open without blocking and refuse anything but a regular file (a FIFO would block forever);
 *   2. bound the file size, then read it into memory;
 *   3. read the size the header claims, and refuse it against fixed limits before decoding (a
 *      16-byte PNG header can claim 100000 x 100000 pixels: 30 GB);
 *   4. decode, with every allocation of the decoder capped as well (data/stb_image_config.h);
 *   5. check that the decoder produced the size the header promised.
 * stb_image reports a refused header as "unknown image type" (it tries every format in turn), so
 * step 3 also reads the PNG, BMP and JPEG headers itself to name the claimed size. */
#include "ringgrad/image.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/stb_image_config.h"
#include <stb/stb_image.h>

/* The largest single allocation the decoder may make: 16-bit RGBA at the pixel limit, plus
 * slack for row filters and headers. */
#define STBI_ALLOC_LIMIT ((size_t)RG_IMAGE_MAX_PIXELS * 8 + ((size_t)1 << 20))
/* rg_image_info reads this much first; a JPEG with a bigger EXIF block before its frame header
 * is read whole. */
#define INFO_PREFIX ((size_t)64 << 10)

/* Zeroed: stb_image 2.27 mallocs its JPEG decoder state and reads a Huffman table a damaged file
 * never defined; zeros make that table decode nothing (an error), where garbage indexed out of
 * bounds (found by the fuzz target). */
void *rg_stbi_malloc(size_t bytes) {
    return bytes <= STBI_ALLOC_LIMIT ? calloc(1, bytes) : NULL;
}

void *rg_stbi_realloc(void *p, size_t bytes) {
    return bytes <= STBI_ALLOC_LIMIT ? realloc(p, bytes) : NULL;
}

/* ---- the file ---- */

static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Reads at most `limit` bytes of path into a malloc'd buffer (*data, *n); *whole says whether
 * that is the whole file. */
RG_NODISCARD static rg_status read_file(const char *path, size_t limit, uint8_t **data, size_t *n,
                                        int *whole) {
    *data = NULL, *n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return rg_error(e == ENOENT || e == ENOTDIR ? RG_ENOENT : RG_EIO, "%s: cannot open: %s",
                        path, strerror(e));
    }
    struct stat st;
    rg_status s = RG_OK;
    if (fstat(fd, &st) != 0)
        s = rg_error(RG_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = rg_error(RG_EIO, "%s: is %s, not an image file", path, file_kind(st.st_mode));
    else if (st.st_size == 0)
        s = rg_error(RG_ECORRUPT, "%s: empty file, not an image", path);
    else if (st.st_size > RG_IMAGE_MAX_FILE_BYTES)
        s = rg_error(RG_ECORRUPT, "%s: %" PRId64 " bytes; image files are limited to %" PRId64
                     " MiB", path, (int64_t)st.st_size, RG_IMAGE_MAX_FILE_BYTES >> 20);
    size_t want = s == RG_OK && (size_t)st.st_size < limit ? (size_t)st.st_size : limit;
    if (s == RG_OK && !(*data = malloc(want)))
        s = rg_error(RG_ENOMEM, "%s: out of memory for %zu bytes", path, want);
    while (s == RG_OK && *n < want) {
        ssize_t r = read(fd, *data + *n, want - *n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) s = rg_error(RG_EIO, "%s: read error: %s", path, strerror(errno));
        if (r <= 0) break;
        *n += (size_t)r;
    }
    close(fd);
    if (s == RG_OK && *n == 0) s = rg_error(RG_ECORRUPT, "%s: empty file, not an image", path);
    if (s != RG_OK) free(*data), *data = NULL, *n = 0;
    *whole = s == RG_OK && *n == (size_t)st.st_size;
    return s;
}

/* ---- what the header claims ---- */

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The first three numbers of a PNM header (width, height, maxval), each capped at 10 digits (-1
 * past the end); returns how many were found, or -1 when one has more than 9 digits: stb_image
 * 2.27 parses them into a signed int that overflows (undefined behaviour) there. */
static int pnm_numbers(const uint8_t *b, size_t n, int64_t v[3], size_t *end) {
    size_t p = 2;
    int found = 0;
    for (int k = 0; k < 3; k++) {
        v[k] = -1;
        while (p < n && (b[p] == ' ' || (b[p] >= '\t' && b[p] <= '\r') || b[p] == '#')) {
            if (b[p] == '#')
                while (p < n && b[p] != '\n' && b[p] != '\r') p++;
            else p++;
        }
        int digits = 0;
        int64_t x = 0;
        for (; p < n && b[p] >= '0' && b[p] <= '9'; p++)
            if (++digits <= 10) x = x * 10 + (b[p] - '0');
        if (digits == 0) break;
        if (digits > 9) return -1;
        v[k] = x, found++;
        *end = p;
    }
    return found;
}

/* The format's name and the width and height its header claims, for the formats whose headers
 * stb_image refuses without saying the size (or parses unsafely); NULL name when it is none. */
static const char *sniff(const uint8_t *b, size_t n, int64_t *w, int64_t *h) {
    *w = *h = -1;
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) {
        if (n >= 24 && memcmp(b + 12, "IHDR", 4) == 0) *w = be32(b + 16), *h = be32(b + 20);
        return "PNG";
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') {
        if (n >= 26 && le32(b + 14) >= 40) {
            int32_t sh = (int32_t)le32(b + 22);
            *w = (int32_t)le32(b + 18), *h = sh < 0 ? -(int64_t)sh : sh;
        }
        return "BMP";
    }
    size_t soi = 0; /* stb takes any run of FF bytes before the D8 of the start marker */
    while (soi < n && b[soi] == 0xFF) soi++;
    if (soi > 0 && soi < n && b[soi] == 0xD8) {
        /* walk the segments to the frame header: SOF0..SOF15 except DHT, JPG and DAC */
        for (size_t p = soi + 1; p + 9 <= n && b[p] == 0xFF;) {
            uint8_t m = b[p + 1];
            if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
                *h = be16(b + p + 5), *w = be16(b + p + 7);
                break;
            }
            if (m == 0xFF) { p++; continue; } /* fill byte */
            p += 2 + be16(b + p + 2);
        }
        return "JPEG";
    }
    if (n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) {
        int64_t v[3];
        size_t end;
        if (pnm_numbers(b, n, v, &end) >= 2) *w = v[0], *h = v[1];
        return "PNM";
    }
    return NULL;
}

/* stb_image 2.27 (Debian's libstb) writes past a Huffman table when a JPEG's DHT segment declares
 * more than 256 codes (fixed upstream in 2.28). stb finds markers by skipping bytes, so rather
 * than follow the file's structure (where a damaged file could make us and stb disagree), every
 * FF C4 pair is taken as a DHT and its tables are read the way stb reads them (on past the
 * segment's end while its length says so; zeros past the end of the data). */
RG_NODISCARD static rg_status check_jpeg_tables(const char *name, const uint8_t *b, size_t n) {
    for (size_t p = 0; p + 4 <= n; p++) {
        if (b[p] != 0xFF || b[p + 1] != 0xC4) continue;
        long left = (long)be16(b + p + 2) - 2;
        for (size_t q = p + 4; left > 0;) {
            long codes = 0;
            for (size_t i = 0; i < 16; i++) codes += q + 1 + i < n ? b[q + 1 + i] : 0;
            if (codes > 256)
                return rg_error(RG_ECORRUPT, "%s: cannot decode the image: damaged JPEG (a "
                                "Huffman table with %ld codes, at most 256)", name, codes);
            q += 17 + (size_t)codes;
            left -= 17 + codes;
        }
    }
    return RG_OK;
}

/* stb_image 2.27 passes a NULL buffer to memcpy (undefined, though of 0 bytes) when a PNG's first
 * IDAT chunk is empty. Walks the chunks as stb does (length, type, data, CRC) and refuses that. */
RG_NODISCARD static rg_status check_png_chunks(const char *name, const uint8_t *b, size_t n) {
    for (size_t p = 8; p + 8 <= n;) {
        uint32_t len = be32(b + p);
        if (memcmp(b + p + 4, "IDAT", 4) == 0) {
            if (len == 0)
                return rg_error(RG_ECORRUPT, "%s: cannot decode the image: damaged PNG (its first "
                                "IDAT chunk is empty)", name);
            break; /* data has started: later empty chunks are harmless */
        }
        if (memcmp(b + p + 4, "IEND", 4) == 0 || len > n) break;
        p += 12 + (size_t)len;
    }
    return RG_OK;
}

RG_NODISCARD static rg_status check_size(const char *name, int64_t w, int64_t h) {
    if (w <= 0 || h <= 0)
        return rg_error(RG_ECORRUPT, "%s: the header claims a %" PRId64 "x%" PRId64
                        " image (width x height), which is empty", name, w, h);
    if (w > RG_IMAGE_MAX_SIDE || h > RG_IMAGE_MAX_SIDE || w * h > RG_IMAGE_MAX_PIXELS)
        return rg_error(RG_ECORRUPT,
                        "%s: the header claims %" PRId64 "x%" PRId64 " pixels (width x height); "
                        "images are limited to %d pixels a side and %" PRId64 " Mi pixels",
                        name, w, h, RG_IMAGE_MAX_SIDE, RG_IMAGE_MAX_PIXELS >> 20);
    return RG_OK;
}

/* Steps 3 of the file comment on n bytes: the checked size and channel count. `whole` says
 * whether the bytes are the whole file (otherwise a failure may only mean "read more"). */
RG_NODISCARD static rg_status header_info(const char *name, const uint8_t *b, size_t n, int whole,
                                          int *w, int *h, int *c) {
    int64_t cw, ch;
    const char *fmt = sniff(b, n, &cw, &ch);
    if (fmt && cw >= 0) RG_TRY(check_size(name, cw, ch));
    if (fmt && strcmp(fmt, "JPEG") == 0) RG_TRY(check_jpeg_tables(name, b, n));
    if (fmt && strcmp(fmt, "PNG") == 0) RG_TRY(check_png_chunks(name, b, n));
    int64_t pnm[3];
    size_t pnm_end = 0;
    int pnm_found = fmt && strcmp(fmt, "PNM") == 0 ? pnm_numbers(b, n, pnm, &pnm_end) : 0;
    if (pnm_found < 0)
        return rg_error(RG_ECORRUPT, "%s: cannot decode the image: damaged PNM header (a number "
                        "of more than 9 digits)", name);
    if (whole && pnm_found >= 0 && pnm_found < 3 && fmt && strcmp(fmt, "PNM") == 0)
        return rg_error(RG_ECORRUPT,
                        "%s: cannot decode the image: damaged PNM header (it needs a "
                        "width, a height and a maxval, whole numbers)",
                        name);
    if (pnm_found == 3 && (pnm[0] == 0 || pnm[1] == 0 || pnm[2] == 0))
        return rg_error(RG_ECORRUPT,
                        "%s: cannot decode the image: damaged PNM header (%lldx%lld "
                        "pixels, maxval %lld)",
                        name, (long long)pnm[0], (long long)pnm[1], (long long)pnm[2]);
    /* stb_image 2.27 reads 16-bit PNM (maxval > 255) past its buffer (fixed in 2.28) */
    if (pnm_found == 3 && pnm[2] > 255)
        return rg_error(RG_ECORRUPT, "%s: 16-bit PGM/PPM files (maxval %lld) are not supported "
                        "(convert to 8 bits or PNG)", name, (long long)pnm[2]);
    /* stb_image 2.27 decodes a PGM/PPM whose pixels stop short as if the rest were there: the
     * header's three numbers, one whitespace byte, then W x H x (1 or 3) bytes */
    if (whole && pnm_found == 3 && pnm[0] > 0 && pnm[1] > 0) {
        int64_t need = pnm[0] * pnm[1] * (b[1] == '6' ? 3 : 1),
                have = (int64_t)n - (int64_t)pnm_end - 1;
        if (have < need)
            return rg_error(RG_ECORRUPT,
                            "%s: cannot decode the image: truncated PNM (the header "
                            "claims %lldx%lld pixels, %lld bytes, and %lld follow it)",
                            name, (long long)pnm[0], (long long)pnm[1], (long long)need,
                            (long long)(have > 0 ? have : 0));
    }
    if (n > INT32_MAX) return rg_error(RG_ECORRUPT, "%s: file too large", name);
    if (!stbi_info_from_memory(b, (int)n, w, h, c)) {
        if (!whole) return RG_ENOENT; /* not in the prefix: the caller reads the whole file */
        if (fmt)
            return rg_error(RG_ECORRUPT, "%s: cannot decode the image: damaged %s header (%s)",
                            name, fmt, stbi_failure_reason());
        if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7')
            return rg_error(RG_ECORRUPT,
                            "%s: cannot decode the image: PNM type P%c is not "
                            "supported (binary PGM/PPM, P5/P6, are; or convert to PNG)",
                            name, b[1]);
        return rg_error(RG_ECORRUPT,
                        "%s: cannot decode the image: not a PNG, JPEG, BMP, TGA or "
                        "binary PGM/PPM file",
                        name);
    }
    return check_size(name, *w, *h);
}

rg_status rg_image_info(const char *path, int *w, int *h, int *channels) {
    RG_CHECK(path && w && h && channels, "rg_image_info: NULL argument");
    uint8_t *b;
    size_t n;
    int whole;
    RG_TRY(read_file(path, INFO_PREFIX, &b, &n, &whole));
    rg_status s = header_info(path, b, n, whole, w, h, channels);
    free(b);
    if (s != RG_ENOENT || whole) return s;
    RG_TRY(read_file(path, (size_t)RG_IMAGE_MAX_FILE_BYTES, &b, &n, &whole));
    s = header_info(path, b, n, 1, w, h, channels);
    free(b);
    return s;
}

/* ---- decoding ---- */

rg_status rg_image_decode(const char *name, const void *data, size_t n, int channels,
                          rg_image *out) {
    RG_CHECK(name && out && (data || n == 0), "rg_image_decode: NULL argument");
    RG_CHECK(channels == 1 || channels == 3, "rg_image_decode: %d channels (1 or 3)", channels);
    *out = (rg_image){0};
    if (n == 0) return rg_error(RG_ECORRUPT, "%s: empty file, not an image", name);
    int w, h, fc;
    RG_TRY(header_info(name, data, n, 1, &w, &h, &fc));
    int dw, dh;
    uint8_t *px = stbi_load_from_memory(data, (int)n, &dw, &dh, &fc, channels); /* (H,W,C) */
    if (!px)
        return rg_error(RG_ECORRUPT, "%s: cannot decode the image: %s (truncated or damaged?)",
                        name, stbi_failure_reason());
    if (dw != w || dh != h) {
        stbi_image_free(px);
        return rg_error(RG_ECORRUPT, "%s: decoded %dx%d pixels but the header says %dx%d", name,
                        dw, dh, w, h);
    }
    int64_t plane = (int64_t)w * h;
    uint8_t *planes = malloc((size_t)(plane * channels));
    if (!planes) {
        stbi_image_free(px);
        return rg_error(RG_ENOMEM, "%s: out of memory for %dx%d pixels", name, w, h);
    }
    for (int c = 0; c < channels; c++)
        for (int64_t p = 0; p < plane; p++) planes[c * plane + p] = px[p * channels + c];
    stbi_image_free(px);
    *out = (rg_image){.px = planes, .c = channels, .h = h, .w = w};
    return RG_OK;
}

rg_status rg_image_load(const char *path, int channels, rg_image *out) {
    RG_CHECK(path && out, "rg_image_load: NULL argument");
    *out = (rg_image){0};
    uint8_t *b;
    size_t n;
    int whole;
    RG_TRY(read_file(path, (size_t)RG_IMAGE_MAX_FILE_BYTES, &b, &n, &whole));
    rg_status s = rg_image_decode(path, b, n, channels, out);
    free(b);
    return s;
}

void rg_image_deinit(rg_image *img) {
    if (!img) return;
    free(img->px);
    *img = (rg_image){0};
}
