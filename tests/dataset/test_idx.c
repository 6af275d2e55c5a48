/* Tests for the IDX reader and IDX image/label pairs: round trips on gzipped and plain files the
 * test writes, then every kind of damage (truncation at every offset, bad magic, absurd
 * dimensions, garbage, empty files, mismatched pairs, bad labels), each with its status and a
 * message that names the file. Run under ASan/UBSan these also show that no input reads out of
 * bounds. */
#include <sys/stat.h>

#include "fixtures.h"

#define N 37
#define H 5
#define W 4

static uint8_t pixels[N * H * W], labels[N];

static void make_payloads(void) {
    for (int i = 0; i < N; i++) {
        for (int p = 0; p < H * W; p++) pixels[i * H * W + p] = fx_pixel(i, p);
        labels[i] = fx_label(i);
    }
}

static fx_bytes images_file(void) {
    make_payloads();
    return fx_idx(0x00000803, 3, (uint32_t[]){N, H, W}, pixels, sizeof pixels);
}

static fx_bytes labels_file(void) {
    make_payloads();
    return fx_idx(0x00000801, 1, (uint32_t[]){N}, labels, sizeof labels);
}

/* Writes bytes to dir/name and reads it back as an IDX file of ndim dimensions. */
RG_NODISCARD
static rg_status read_bytes(const char *dir, const char *name, const void *p, size_t n, bool gz,
                            int ndim, rg_idx *out, char *path, size_t path_len) {
    snprintf(path, path_len, "%s/%s", dir, name);
    fx_write(path, p, n, gz);
    return rg_idx_read(path, ndim, out);
}

Test(dataset_idx, round_trip_gzipped_and_plain) {
    const char *dir = rgt_tmpdir("idx_round_trip");
    fx_bytes img = images_file(), lab = labels_file();
    for (int gz = 0; gz < 2; gz++) {
        char path[4200];
        rg_idx a;
        rg_status s =
            read_bytes(dir, gz ? "i.gz" : "i", img.p, img.n, gz, 3, &a, path, sizeof path);
        cr_assert_eq(s, RG_OK, "%s", rg_last_error());
        cr_assert_eq(a.ndim, 3);
        cr_assert(a.dims[0] == N && a.dims[1] == H && a.dims[2] == W);
        cr_assert_eq(a.nbytes, sizeof pixels);
        cr_assert_arr_eq(a.data, pixels, sizeof pixels);
        rg_idx_deinit(&a);
        cr_assert_null(a.data);
        s = read_bytes(dir, gz ? "l.gz" : "l", lab.p, lab.n, gz, 1, &a, path, sizeof path);
        cr_assert_eq(s, RG_OK, "%s", rg_last_error());
        cr_assert(a.ndim == 1 && a.dims[0] == N && a.nbytes == N);
        cr_assert_arr_eq(a.data, labels, sizeof labels);
        rg_idx_deinit(&a);
    }
    rg_idx_deinit(NULL);
    free(img.p), free(lab.p);
}

Test(dataset_idx, truncation_at_every_offset_is_reported) {
    const char *dir = rgt_tmpdir("idx_truncated");
    fx_bytes img = images_file();
    for (int gz = 0; gz < 2; gz++)
        for (size_t cut = 0; cut < img.n; cut++) {
            char path[4200], want[128];
            rg_idx a;
            rg_status s = read_bytes(dir, "t", img.p, cut, gz, 3, &a, path, sizeof path);
            if (cut == 0)
                fx_assert_error(s, RG_ECORRUPT, path, "empty file");
            else if (cut < 16)
                fx_assert_error(s, RG_ECORRUPT, path, "truncated");
            else {
                snprintf(want, sizeof want, "truncated: expected %zu bytes of pixels, got %zu",
                         sizeof pixels, cut - 16);
                fx_assert_error(s, RG_ECORRUPT, path, want);
            }
            cr_assert_null(a.data, "a failed read leaves no data behind");
        }
    free(img.p);
}

Test(dataset_idx, cut_gzip_streams_are_errors_not_crashes) {
    const char *dir = rgt_tmpdir("idx_cut_gzip");
    fx_bytes img = images_file();
    char path[4200];
    snprintf(path, sizeof path, "%s/full.gz", dir);
    fx_write(path, img.p, img.n, true);
    fx_bytes gz = fx_read(path);
    for (size_t cut = 1; cut < gz.n; cut++) {
        rg_idx a;
        rg_status s = read_bytes(dir, "cut.gz", gz.p, cut, false, 3, &a, path, sizeof path);
        cr_assert_eq(s, RG_ECORRUPT, "cut at %zu of %zu: %s", cut, gz.n, rg_last_error());
        cr_assert(strstr(rg_last_error(), path), "message names the file: %s", rg_last_error());
    }
    /* a flipped byte inside the compressed data: zlib's checks catch it */
    gz.p[gz.n / 2] ^= 0x55;
    rg_idx a;
    rg_status s = read_bytes(dir, "flipped.gz", gz.p, gz.n, false, 3, &a, path, sizeof path);
    fx_assert_error(s, RG_ECORRUPT, path);
    free(img.p), free(gz.p);
}

Test(dataset_idx, wrong_magic_numbers_are_rejected) {
    const char *dir = rgt_tmpdir("idx_magic");
    make_payloads();
    uint32_t magics[] = {0x00000801, 0x00000802, 0x00000D03, 0x12345678, 0x08030000};
    for (size_t m = 0; m < sizeof magics / sizeof magics[0]; m++) {
        fx_bytes b = fx_idx(magics[m], 3, (uint32_t[]){N, H, W}, pixels, sizeof pixels);
        char path[4200], want[64];
        rg_idx a;
        rg_status s = read_bytes(dir, "m.gz", b.p, b.n, true, 3, &a, path, sizeof path);
        snprintf(want, sizeof want, "bad magic number 0x%08x", magics[m]);
        fx_assert_error(s, RG_ECORRUPT, path, want, "expected 0x00000803");
        free(b.p);
    }
}

Test(dataset_idx, zero_and_absurd_dimensions_are_rejected) {
    const char *dir = rgt_tmpdir("idx_dims");
    make_payloads();
    struct {
        uint32_t dims[3];
        const char *want;
    } cases[] = {
        {{0, H, W}, "dimension 0 is 0"},
        {{N, 0, W}, "dimension 1 is 0"},
        {{N, H, 0}, "dimension 2 is 0"},
        {{0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, "absurd header"},
        {{60000, 1000, 1000}, "absurd header: 60000 x 1000 x 1000 bytes of pixels"},
        {{1, 65536, 65537}, "absurd header"},
        /* issue 10: the message blamed "dimension 1 is 28"; the absurd part is the count */
        {{0x80000000u, 28, 28}, "absurd header: 2147483648 x 28 x 28 bytes of pixels would exceed"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fx_bytes b = fx_idx(0x00000803, 3, cases[c].dims, pixels, sizeof pixels);
        char path[4200];
        rg_idx a;
        rg_status s = read_bytes(dir, "d", b.p, b.n, false, 3, &a, path, sizeof path);
        fx_assert_error(s, RG_ECORRUPT, path, cases[c].want);
        free(b.p);
    }
}

Test(dataset_idx, huge_promise_with_little_data_is_truncated) {
    /* 1 GiB promised, 740 bytes present: an error, not a 1 GiB allocation filled from nowhere */
    const char *dir = rgt_tmpdir("idx_promise");
    make_payloads();
    fx_bytes b = fx_idx(0x00000803, 3, (uint32_t[]){1024, 1024, 1024}, pixels, sizeof pixels);
    char path[4200];
    rg_idx a;
    rg_status s = read_bytes(dir, "p.gz", b.p, b.n, true, 3, &a, path, sizeof path);
    fx_assert_error(s, RG_ECORRUPT, path,
                    "truncated: expected 1073741824 bytes of pixels, got 740");
    free(b.p);
}

Test(dataset_idx, trailing_garbage_is_rejected) {
    const char *dir = rgt_tmpdir("idx_trailing");
    fx_bytes lab = labels_file();
    fx_append(&lab, "junk", 4);
    for (int gz = 0; gz < 2; gz++) {
        char path[4200];
        rg_idx a;
        rg_status s = read_bytes(dir, "l", lab.p, lab.n, gz, 1, &a, path, sizeof path);
        fx_assert_error(s, RG_ECORRUPT, path,
                        "trailing garbage: 4 unexpected bytes after the 37 "
                        "bytes of labels");
    }
    free(lab.p);
}

Test(dataset_idx, garbage_files_are_rejected) {
    const char *dir = rgt_tmpdir("idx_garbage");
    uint8_t junk[3000];
    uint64_t x = 12345;
    for (int trial = 0; trial < 50; trial++) {
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
        if (trial % 2) junk[0] = 0x1f, junk[1] = 0x8b, junk[2] = 8; /* looks like gzip */
        size_t n = 1 + (size_t)trial * 59;
        char path[4200];
        rg_idx a;
        rg_status s = read_bytes(dir, "g", junk, n, false, 3, &a, path, sizeof path);
        cr_assert_eq(s, RG_ECORRUPT, "trial %d: %s", trial, rg_last_error());
        cr_assert(strstr(rg_last_error(), path));
    }
}

Test(dataset_idx, empty_missing_and_unreadable_files) {
    const char *dir = rgt_tmpdir("idx_missing");
    char path[4200];
    rg_idx a;
    for (int gz = 0; gz < 2; gz++) {
        rg_status s = read_bytes(dir, "empty", "", 0, gz, 1, &a, path, sizeof path);
        fx_assert_error(s, RG_ECORRUPT, path, "empty file");
    }
    snprintf(path, sizeof path, "%s/does-not-exist.gz", dir);
    fx_assert_error(rg_idx_read(path, 1, &a), RG_ENOENT, path, "no such file");
    fx_assert_error(rg_idx_read(dir, 1, &a), RG_EIO, dir, "not a regular file (a folder)");
}

/* Opening a FIFO for reading blocks until a writer comes: the reader must refuse it at once. */
Test(dataset_idx, fifos_and_devices_are_refused_without_blocking, .timeout = 10) {
    const char *dir = rgt_tmpdir("idx_fifo");
    char path[4200];
    snprintf(path, sizeof path, "%s/images.fifo", dir);
    cr_assert_eq(mkfifo(path, 0644), 0, "mkfifo %s", path);
    rg_idx a;
    fx_assert_error(rg_idx_read(path, 3, &a), RG_EIO, path, "not a regular file (a FIFO)");
    fx_assert_error(rg_idx_read("/dev/zero", 3, &a), RG_EIO, "/dev/zero", "a device");
}

Test(dataset_idx, misuse_stops, .signal = SIGABRT) {
    rg_idx a;
    RG_IGNORE(rg_idx_read("x", 5, &a)); /* stops: misuse */
}

/* ---- image/label pairs ---------------------------------------------------------------------- */

/* Writes the two files and loads them as a dataset with 10 classes. */
RG_NODISCARD
static rg_status load_pair(const char *dir, fx_bytes img, fx_bytes lab, rg_dataset **ds,
                           char *ipath, char *lpath) {
    sprintf(ipath, "%s/img.gz", dir);
    sprintf(lpath, "%s/lab.gz", dir);
    fx_write(ipath, img.p, img.n, true);
    fx_write(lpath, lab.p, lab.n, true);
    return rg_dataset_idx(ipath, lpath, 10, ds);
}

Test(dataset_idx, pair_loads_into_a_dataset) {
    const char *dir = rgt_tmpdir("idx_pair");
    fx_bytes img = images_file(), lab = labels_file();
    char ip[4200], lp[4200];
    rg_dataset *ds;
    cr_assert_eq(load_pair(dir, img, lab, &ds, ip, lp), RG_OK, "%s", rg_last_error());
    cr_assert(ds->n == N && ds->c == 1 && ds->h == H && ds->w == W && ds->num_classes == 10);
    cr_assert_eq(rg_dataset_image_size(ds), H * W);
    cr_assert_arr_eq(ds->images, pixels, sizeof pixels);
    for (int i = 0; i < N; i++) cr_assert_eq(ds->labels[i], labels[i], "label %d", i);
    cr_assert_null(ds->class_names);
    rg_dataset_free(ds);
    rg_dataset_free(NULL);
    free(img.p), free(lab.p);
}

Test(dataset_idx, pair_count_mismatch_is_rejected) {
    const char *dir = rgt_tmpdir("idx_pair_count");
    make_payloads();
    fx_bytes img = images_file();
    fx_bytes lab = fx_idx(0x00000801, 1, (uint32_t[]){N - 1}, labels, N - 1);
    char ip[4200], lp[4200];
    rg_dataset *ds = (rg_dataset *)1;
    rg_status s = load_pair(dir, img, lab, &ds, ip, lp);
    fx_assert_error(s, RG_ECORRUPT, ip, lp, "holds 37 images", "holds 36 labels");
    cr_assert_null(ds);
    free(img.p), free(lab.p);
}

Test(dataset_idx, pair_out_of_range_label_is_rejected) {
    const char *dir = rgt_tmpdir("idx_pair_label");
    fx_bytes img = images_file();
    labels[5] = 10;
    fx_bytes lab = fx_idx(0x00000801, 1, (uint32_t[]){N}, labels, N);
    char ip[4200], lp[4200];
    rg_dataset *ds;
    rg_status s = load_pair(dir, img, lab, &ds, ip, lp);
    fx_assert_error(s, RG_ECORRUPT, lp,
                    "label 10 of item 5 is out of range (there are 10 classes)");
    cr_assert_null(ds);
    free(img.p), free(lab.p);
}

Test(dataset_idx, pair_with_a_bad_file_names_that_file) {
    const char *dir = rgt_tmpdir("idx_pair_bad");
    fx_bytes img = images_file(), lab = labels_file();
    lab.n -= 3;
    char ip[4200], lp[4200];
    rg_dataset *ds;
    fx_assert_error(load_pair(dir, img, lab, &ds, ip, lp), RG_ECORRUPT, lp, "truncated");
    cr_assert_null(ds);
    free(img.p), free(lab.p);
}
