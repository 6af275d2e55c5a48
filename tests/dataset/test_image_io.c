/* Tests for reading one image file as hostile input (data/image_io.c): headers claiming huge sizes
 * are refused with the claimed size before anything is allocated, truncated and damaged files at
 * every cut are errors naming the file, non-images, empty files, FIFOs and devices are refused
 * without blocking, and good files decode to exact (C,H,W) planes. Fixtures are made here. */
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fixtures.h"
#include "ringgrad/image.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

void *rg_stbi_malloc(size_t bytes); /* data/image_io.c */

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static void put_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

/* A PNG whose IHDR claims w x h RGB pixels, followed by a little IDAT and IEND. */
static fx_bytes png_claiming(uint32_t w, uint32_t h) {
    uint8_t b[8 + 25 + 12 + 12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    put_be32(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put_be32(b + 16, w), put_be32(b + 20, h);
    b[24] = 8, b[25] = 2; /* 8 bits, RGB */
    put_be32(b + 29, (uint32_t)crc32(0, b + 12, 17));
    put_be32(b + 33, 0), memcpy(b + 37, "IDAT", 4), put_be32(b + 41, (uint32_t)crc32(0, b + 37, 4));
    put_be32(b + 45, 0), memcpy(b + 49, "IEND", 4), put_be32(b + 53, (uint32_t)crc32(0, b + 49, 4));
    fx_bytes out = {0};
    fx_append(&out, b, sizeof b);
    return out;
}

/* A BMP (BITMAPINFOHEADER, 24 bits) claiming w x h pixels, with no pixel data. */
static fx_bytes bmp_claiming(uint32_t w, uint32_t h) {
    uint8_t b[54] = {'B', 'M'};
    put_le32(b + 2, 54), put_le32(b + 10, 54), put_le32(b + 14, 40);
    put_le32(b + 18, w), put_le32(b + 22, h);
    b[26] = 1, b[28] = 24;
    fx_bytes out = {0};
    fx_append(&out, b, sizeof b);
    return out;
}

/* A baseline JPEG start whose frame header claims w x h (16-bit fields). */
static fx_bytes jpeg_claiming(uint16_t w, uint16_t h) {
    uint8_t b[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
                   0xFF, 0xC0, 0, 11, 8, (uint8_t)(h >> 8), (uint8_t)h, (uint8_t)(w >> 8),
                   (uint8_t)w, 1, 1, 0x11, 0, 0xFF, 0xD9};
    fx_bytes out = {0};
    fx_append(&out, b, sizeof b);
    return out;
}

static const char *write_tmp(const char *dir, const char *name, fx_bytes b) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fx_write(path, b.p, b.n, false);
    free(b.p);
    return path;
}

/* A good RGB PNG of w x h in memory, pixel (x,y,ch) = x*7 + y*13 + ch*50. */
static fx_bytes good_png(int w, int h) {
    uint8_t *px = malloc((size_t)(w * h * 3));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < 3; ch++) px[(y * w + x) * 3 + ch] = (uint8_t)(x * 7 + y * 13 + ch * 50);
    int n = 0;
    uint8_t *png = stbi_write_png_to_mem(px, w * 3, w, h, 3, &n);
    cr_assert(png);
    fx_bytes out = {0};
    fx_append(&out, png, (size_t)n);
    free(png), free(px);
    return out;
}

Test(dataset_image_io, good_files_decode_to_planes_and_gray) {
    const char *dir = rgt_tmpdir("image_io_good");
    const char *path = write_tmp(dir, "ok.png", good_png(9, 5));
    int w, h, c;
    cr_assert_eq(rg_image_info(path, &w, &h, &c), RG_OK, "%s", rg_last_error());
    cr_assert(w == 9 && h == 5 && c == 3);
    rg_image img;
    cr_assert_eq(rg_image_load(path, 3, &img), RG_OK, "%s", rg_last_error());
    cr_assert(img.c == 3 && img.h == 5 && img.w == 9);
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 9; x++)
                cr_assert_eq(img.px[(ch * 5 + y) * 9 + x], (uint8_t)(x * 7 + y * 13 + ch * 50));
    rg_image_deinit(&img);
    cr_assert_eq(rg_image_load(path, 1, &img), RG_OK, "%s", rg_last_error());
    cr_assert(img.c == 1 && img.px[0] == (uint8_t)((0 * 77 + 50 * 150 + 100 * 29) >> 8),
              "stb's luma of (0,50,100): %d", img.px[0]);
    rg_image_deinit(&img);
    rg_image_deinit(NULL);
}

/* The cases: before, 16384x16384 allocated 2.4 GB and 100000x100000 said "unknown image
 * type". Each is refused from the header, naming the file and the claimed size. */
Test(dataset_image_io, huge_headers_are_refused_with_the_claimed_size) {
    const char *dir = rgt_tmpdir("image_io_huge");
    struct {
        const char *name, *claim;
        fx_bytes b;
    } cases[] = {
        {"a.png", "16384x16384", png_claiming(16384, 16384)},
        {"b.png", "100000x100000", png_claiming(100000, 100000)},
        {"c.png", "16385x1", png_claiming(16385, 1)},
        {"d.png", "4294967295x4294967295", png_claiming(0xFFFFFFFFu, 0xFFFFFFFFu)},
        {"e.bmp", "100000x100000", bmp_claiming(100000, 100000)},
        {"f.jpg", "65000x65000", jpeg_claiming(65000, 65000)},
        {"g.jpg", "9000x8000", jpeg_claiming(9000, 8000)}, /* each side fine, 72 Mpx is not */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_tmp(dir, cases[i].name, cases[i].b);
        int w, h, c;
        fx_assert_error(rg_image_info(path, &w, &h, &c), RG_ECORRUPT, path, cases[i].claim,
                        "limited to 16384 pixels a side and 64 Mi pixels");
        rg_image img;
        fx_assert_error(rg_image_load(path, 3, &img), RG_ECORRUPT, path, cases[i].claim);
        cr_assert_null(img.px);
    }
    /* the second line of defence: the decoder cannot allocate more than the limits need */
    cr_assert_null(rg_stbi_malloc((size_t)RG_IMAGE_MAX_PIXELS * 16));
}

Test(dataset_image_io, zero_sized_headers_are_refused) {
    const char *dir = rgt_tmpdir("image_io_zero");
    const char *path = write_tmp(dir, "z.png", png_claiming(0, 10));
    rg_image img;
    fx_assert_error(rg_image_load(path, 3, &img), RG_ECORRUPT, path);
}

/* Every prefix of a good PNG and of a JPEG is an error naming the file (or, for a prefix that
 * happens to decode, an image of the right size): no crash, no sanitizer report. */
Test(dataset_image_io, truncation_at_every_offset_is_an_error) {
    fx_bytes png = good_png(12, 7);
    for (size_t cut = 0; cut < png.n; cut++) {
        rg_image img;
        rg_status s = rg_image_decode("cut.png", png.p, cut, 3, &img);
        if (s == RG_OK) {
            cr_assert(img.w == 12 && img.h == 7, "cut %zu", cut);
            rg_image_deinit(&img);
            continue;
        }
        cr_assert_eq(s, RG_ECORRUPT, "cut %zu: %s", cut, rg_last_error());
        cr_assert(strstr(rg_last_error(), "cut.png"), "%s", rg_last_error());
        cr_assert_null(img.px);
    }
    free(png.p);
}

Test(dataset_image_io, flipped_bytes_never_crash) {
    fx_bytes png = good_png(16, 16);
    for (size_t i = 0; i < png.n; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            png.p[i] ^= (uint8_t)(1 << bit);
            rg_image img;
            rg_status s = rg_image_decode("flip.png", png.p, png.n, 3, &img);
            cr_assert(s == RG_OK || s == RG_ECORRUPT, "%s", rg_last_error());
            rg_image_deinit(&img);
            png.p[i] ^= (uint8_t)(1 << bit);
        }
    free(png.p);
}

Test(dataset_image_io, non_images_and_empty_files) {
    const char *dir = rgt_tmpdir("image_io_junk");
    fx_bytes text = {0};
    fx_append(&text, "hello, this is not an image at all\n", 35);
    const char *path = write_tmp(dir, "note.png", text);
    rg_image img;
    fx_assert_error(rg_image_load(path, 3, &img), RG_ECORRUPT, path,
                    "not a PNG, JPEG, BMP, TGA or binary PGM/PPM file");
    fx_bytes bad_png = {0};
    fx_append(&bad_png, "\x89PNG\r\n\x1a\n garbage garbage", 25);
    path = write_tmp(dir, "bad.png", bad_png);
    fx_assert_error(rg_image_load(path, 3, &img), RG_ECORRUPT, path, "damaged PNG header");
    path = write_tmp(dir, "empty.jpg", (fx_bytes){0});
    fx_assert_error(rg_image_load(path, 3, &img), RG_ECORRUPT, path, "empty file");
    int w, h, c;
    fx_assert_error(rg_image_info(path, &w, &h, &c), RG_ECORRUPT, path, "empty file");
}

Test(dataset_image_io, fifos_devices_folders_and_missing_files, .timeout = 10) {
    const char *dir = rgt_tmpdir("image_io_special");
    char path[4200];
    snprintf(path, sizeof path, "%s/pipe.png", dir);
    cr_assert_eq(mkfifo(path, 0644), 0);
    rg_image img;
    int w, h, c;
    fx_assert_error(rg_image_load(path, 3, &img), RG_EIO, path, "a FIFO, not an image file");
    fx_assert_error(rg_image_info(path, &w, &h, &c), RG_EIO, path, "a FIFO");
    fx_assert_error(rg_image_load("/dev/zero", 3, &img), RG_EIO, "/dev/zero", "character device");
    fx_assert_error(rg_image_load(dir, 3, &img), RG_EIO, dir, "a folder");
    snprintf(path, sizeof path, "%s/missing.png", dir);
    fx_assert_error(rg_image_load(path, 3, &img), RG_ENOENT, path, "cannot open");
    snprintf(path, sizeof path, "%s/dangling.png", dir);
    cr_assert_eq(symlink("/nonexistent/file.png", path), 0);
    fx_assert_error(rg_image_load(path, 3, &img), RG_ENOENT, path);
    if (geteuid() != 0) { /* root reads anything */
        const char *p = write_tmp(dir, "secret.png", good_png(2, 2));
        cr_assert_eq(chmod(p, 0), 0);
        fx_assert_error(rg_image_load(p, 3, &img), RG_EIO, p, "Permission denied");
    }
}

/* The fuzz corpus of tests/fuzz/fuzz_image.c, in every normal (and ASan) test run: the seeds, one
 * per format variant, decode; the inputs the fuzzer once crashed stb_image 2.27 with (regress-*:
 * a JPEG Huffman table of more than 256 codes, a 16-bit PPM, a PNG whose first IDAT chunk is
 * empty) are refused cleanly. */
#include <dirent.h>
Test(dataset_image_io, fuzz_corpus_and_regressions) {
    const char *dir = RG_SOURCE_DIR "/tests/fuzz/image";
    DIR *d = opendir(dir);
    cr_assert(d, "cannot open %s", dir);
    int seeds = 0, regressions = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bool seed = strncmp(e->d_name, "seed", 4) == 0;
        for (int c = 1; c <= 3; c += 2) {
            rg_image img;
            rg_status s = rg_image_load(path, c, &img);
            if (seed)
                cr_assert_eq(s, RG_OK, "%s: %s", e->d_name, rg_last_error());
            else
                cr_assert(s == RG_OK || s == RG_ECORRUPT, "%s: %s", e->d_name, rg_last_error());
            if (s == RG_OK) cr_assert(img.c == c && img.w > 0 && img.h > 0);
            rg_image_deinit(&img);
        }
        seeds += seed, regressions += !seed;
    }
    closedir(d);
    cr_assert(seeds >= 10 && regressions >= 3, "%d seeds, %d regression files", seeds, regressions);
}

/* PNM files that stb_image 2.27 mishandles: numbers that overflow its int, 16-bit samples it
 * reads past its buffer, pixels that stop short (decoded as if they were all there), headers
 * without their three numbers; a PNM claiming a huge size; and the ASCII and 1-bit types it does
 * not read at all, named rather than called "not an image". n: the bytes given (0: the string and
 * its terminating zero). */
Test(dataset_image_io, pnm_files_stb_mishandles_are_refused) {
    struct {
        const char *bytes;
        size_t n;
        const char *want;
    } cases[] = {
        {"P5\n99999999999 2\n255\n", 0, "more than 9 digits"},
        {"P6\n2 2\n99999999999\n", 0, "more than 9 digits"},
        {"P5\n2 2\n65535\n\1\2\3\4\5\6\7\10", 0, "16-bit PGM/PPM files (maxval 65535)"},
        {"P6 # a comment\n100000 100000\n255\n", 0, "claims 100000x100000 pixels"},
        {"P5\n2 2\n255\n\1\2\3", 14, "truncated PNM (the header claims 2x2 pixels, 4 bytes, and 3"},
        {"P6 2 1 255\n\1\2\3\4\5", 16,
         "truncated PNM (the header claims 2x1 pixels, 6 bytes, and 5"},
        {"P5\n28 28\n255\n", 13, "and 0 follow it"},
        {"P2\n2 1\n255\n16 32\n", 17, "PNM type P2 is not supported"},
        {"P4\n8 1\n\xff", 9, "PNM type P4 is not supported"},
        {"P5 -5 28 255\n", 13, "damaged PNM header (it needs a width, a height and a maxval"},
        {"P5 28x 28 255\n", 14, "damaged PNM header (it needs a width, a height and a maxval"},
        {"P5 1 1 0\n\1", 10, "damaged PNM header (1x1 pixels, maxval 0)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rg_image img;
        size_t n = cases[i].n ? cases[i].n : strlen(cases[i].bytes) + 1;
        fx_assert_error(rg_image_decode("x.pgm", cases[i].bytes, n, 1, &img), RG_ECORRUPT, "x.pgm",
                        cases[i].want);
    }
    const char *ok = "P5\n2 1\n255\n\x10\x20";
    rg_image img;
    cr_assert_eq(rg_image_decode("ok.pgm", ok, 13, 1, &img), RG_OK, "%s", rg_last_error());
    cr_assert(img.w == 2 && img.h == 1 && img.px[0] == 0x10 && img.px[1] == 0x20);
    rg_image_deinit(&img);
    /* one byte more than the pixels (trailing data) still decodes */
    cr_assert_eq(rg_image_decode("ok.ppm", "P6 2 1 255\n\1\2\3\4\5\6\7", 18, 3, &img), RG_OK, "%s",
                 rg_last_error());
    cr_assert(img.w == 2 && img.h == 1 && img.px[0] == 1 && img.px[2] == 2);
    rg_image_deinit(&img);
}
