/* The safetensors reader and writer: a round trip keeps names, dtypes, shapes, bytes and metadata;
 * every corrupt file (garbage, truncation at every byte, huge or oversized header lengths, bad
 * JSON, bad dtypes, shapes and offsets, overlaps, gaps, duplicates) is RG_ECORRUPT with the path
 * in the message, and never a crash or an out-of-bounds read (this test also runs under ASan). */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rgtest.h"

static char path_buf[4200];

static const char *tmp_path(const char *dir, const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", dir, name);
    return path_buf;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp, "%s", path);
    cr_assert_eq(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* A file with the given header text (length field = its length) and data_len zero bytes. */
static void write_with_header(const char *path, const char *header, size_t data_len) {
    size_t h = strlen(header), n = 8 + h + data_len;
    unsigned char *buf = calloc(1, n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    write_bytes(path, buf, n);
    free(buf);
}

static void expect_open_fails(const char *path, rg_status want, const char *needle) {
    rg_safetensors *f = (rg_safetensors *)0x1;
    rg_status s = rg_safetensors_open(path, &f);
    cr_assert_eq(s, want, "%s: got %s (%s), want %s", needle, rg_status_name(s), rg_last_error(),
                 rg_status_name(want));
    cr_assert_null(f);
    cr_assert(strstr(rg_last_error(), path), "message names the file: %s", rg_last_error());
    cr_assert(strstr(rg_last_error(), needle), "message '%s' lacks '%s'", rg_last_error(), needle);
}

static void save_three(const char *path) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1), *b = rgt_uniform(RG_SHAPE(5), -1, 1, 2);
    rg_tensor *c = rg_tensor_new(RG_I64, RG_SHAPE(2), RG_CPU);
    ((int64_t *)c->data)[0] = -7, ((int64_t *)c->data)[1] = INT64_MAX;
    rg_named_tensor ts[] = {{"z.a", a, false}, {"b \"quoted\"\n", b, false}, {"c", c, false}};
    rg_safetensors_kv meta[] = {{"format", "pt"}, {"note", "tab\there \xc3\xa9"}};
    rg_status s = rg_safetensors_save(path, ts, 3, meta, 2);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    rgt_free_all(3, (rg_tensor *[]){a, b, c});
}

Test(models_safetensors, round_trip_keeps_everything_and_leaves_no_temp_file) {
    const char *dir = rgt_tmpdir("st_round_trip");
    char path[4200];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    save_three(path);
    rg_safetensors *f;
    cr_assert_eq(rg_safetensors_open(path, &f), RG_OK, "%s", rg_last_error());
    cr_assert_eq(rg_safetensors_count(f), 3);
    cr_assert_str_eq(rg_safetensors_entry_at(f, 0)->name, "b \"quoted\"\n", "sorted by name");
    const rg_safetensors_entry *a = rg_safetensors_find(f, "z.a"), *c = rg_safetensors_find(f, "c");
    cr_assert(a && c);
    cr_assert_str_eq(a->dtype, "F32");
    cr_assert(a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->numel == 6);
    rg_tensor *want = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1),
              *got = rg_tensor_new(RG_F32, RG_SHAPE(2, 3), RG_CPU);
    cr_assert_eq(rg_safetensors_read_tensor(f, a, got), RG_OK, "%s", rg_last_error());
    cr_assert(memcmp(got->data, want->data, 24) == 0, "bytes survive");
    int64_t cv[2];
    cr_assert_str_eq(c->dtype, "I64");
    cr_assert_eq(rg_safetensors_read(f, c, cv), RG_OK);
    cr_assert(cv[0] == -7 && cv[1] == INT64_MAX);
    cr_assert_str_eq(rg_safetensors_meta(f, "note"), "tab\there \xc3\xa9");
    cr_assert_str_eq(rg_safetensors_meta(f, "format"), "pt");
    cr_assert_null(rg_safetensors_meta(f, "absent"));
    rg_tensor *wrong = rg_tensor_new(RG_F32, RG_SHAPE(3, 2), RG_CPU);
    cr_assert_eq(rg_safetensors_read_tensor(f, a, wrong), RG_EMISMATCH);
    cr_assert(strstr(rg_last_error(), "z.a") && strstr(rg_last_error(), "(2,3)"), "%s",
              rg_last_error());
    rg_safetensors_close(f);
    rgt_free_all(3, (rg_tensor *[]){want, got, wrong});
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 1", dir);
    cr_assert_eq(system(cmd), 0, "only the checkpoint is left in %s", dir);
    FILE *fp = fopen(path, "rb");
    unsigned char len[8];
    cr_assert_eq(fread(len, 1, 8, fp), 8);
    fclose(fp);
    cr_assert_eq(len[0] % 8, 0, "header padded to 8 bytes, so that the data is aligned");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "an ordinary file, not mkstemp's 0600");
}

/* Saves save_three()'s file in a fresh directory for `test` and reads it into buf; other_path
 * receives a second path in that directory. Returns the file's size. */
static size_t saved_bytes(const char *test, unsigned char *buf, size_t cap, char *other_path) {
    const char *dir = rgt_tmpdir(test);
    char path[4200];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    snprintf(other_path, 4200, "%s/other.safetensors", dir);
    save_three(path);
    FILE *fp = fopen(path, "rb");
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    cr_assert(n > 100 && n < cap);
    return n;
}

Test(models_safetensors, truncation_at_every_byte_is_corrupt) {
    char cut[4200];
    unsigned char buf[4096];
    size_t n = saved_bytes("st_truncated", buf, sizeof buf, cut);
    for (size_t len = 0; len < n; len++) {
        write_bytes(cut, buf, len);
        rg_safetensors *f = NULL;
        rg_status s = rg_safetensors_open(cut, &f);
        cr_assert_eq(s, RG_ECORRUPT, "truncated to %zu of %zu bytes: %s", len, n,
                     rg_status_name(s));
        cr_assert_null(f);
        /* issue 10: a half file said "data_offsets run past the data section" */
        if (len >= 8)
            cr_assert(strstr(rg_last_error(), "truncated"), "cut at %zu: %s", len, rg_last_error());
    }
    /* and one byte too many: trailing bytes that belong to no tensor */
    buf[n] = 0;
    write_bytes(cut, buf, n + 1);
    expect_open_fails(cut, RG_ECORRUPT, "cover");
}

Test(models_safetensors, every_single_byte_mutation_is_valid_or_corrupt_never_a_crash) {
    char mutated[4200];
    unsigned char buf[4096];
    size_t n = saved_bytes("st_mutated", buf, sizeof buf, mutated);
    size_t header_end = 8 + (size_t)buf[0] + 256 * (size_t)buf[1];
    const unsigned char values[] = {'{',  '}', '[', ']', '"', ',',  ':',
                                    '\\', '-', '0', '9', 0,   0x80, 0xff};
    int corrupt = 0;
    for (size_t at = 0; at < header_end; at++) {
        for (size_t v = 0; v < sizeof values; v++) {
            unsigned char keep = buf[at];
            buf[at] = values[v];
            write_bytes(mutated, buf, n);
            buf[at] = keep;
            rg_safetensors *f = NULL;
            rg_status s = rg_safetensors_open(mutated, &f);
            cr_assert(s == RG_OK || s == RG_ECORRUPT, "byte %zu set to 0x%02x: %s", at, values[v],
                      rg_status_name(s));
            corrupt += s != RG_OK;
            if (s == RG_OK) { /* still valid (a changed name, say): every entry is readable */
                for (int i = 0; i < rg_safetensors_count(f); i++) {
                    const rg_safetensors_entry *e = rg_safetensors_entry_at(f, i);
                    void *dst = malloc(e->end - e->begin + 1);
                    cr_assert_eq(rg_safetensors_read(f, e, dst), RG_OK);
                    free(dst);
                }
            }
            rg_safetensors_close(f);
        }
    }
    cr_assert_gt(corrupt, (int)header_end, "most mutations are caught");
}

Test(models_safetensors, garbage_and_bad_lengths_are_corrupt) {
    const char *dir = rgt_tmpdir("st_garbage");
    unsigned char junk[1000];
    rg_tensor *r = rgt_uniform(RG_SHAPE(250), 0, 1, 77); /* random bytes from the Philox stream */
    memcpy(junk, r->data, sizeof junk);
    rg_tensor_free(r);
    write_bytes(tmp_path(dir, "junk"), junk, sizeof junk);
    expect_open_fails(path_buf, RG_ECORRUPT, "header length");
    write_bytes(tmp_path(dir, "empty"), "", 0);
    expect_open_fails(path_buf, RG_ECORRUPT, "too short");
    unsigned char huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    write_bytes(tmp_path(dir, "huge"), huge, sizeof huge);
    expect_open_fails(path_buf, RG_ECORRUPT, "exceeds the limit");
    unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'}; /* 65535 > file */
    write_bytes(tmp_path(dir, "big"), big, sizeof big);
    expect_open_fails(path_buf, RG_ECORRUPT, "exceeds the 8 bytes");
    expect_open_fails(tmp_path(dir, "missing"), RG_ENOENT, "cannot open");
    expect_open_fails(dir, RG_EIO, "not a regular file");
}

static const struct {
    const char *header;
    size_t data;
    const char *needle;
} bad_headers[] = {
    {"{\"a\":", 0, "invalid JSON"},
    {"[1,2]", 0, "must be a JSON object"},
    {"{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype F33"},
    {"{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, "shape must be"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
     "\"data_offsets\":[0,4]}}",
     4, "at most 16"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
     "overflows"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12 bytes"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "truncated: tensor 'w'"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "begin <= end"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "[begin, end]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "[begin, end]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "exactly the fields"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "exactly"},
    {"{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "exactly"},
    {"{\"w\":[1]}", 0, "expected an object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     12, "overlaps"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
     12, "gap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, "cover 4"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, "appears twice"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
    {"{\"__metadata__\":[]}", 0, "must be an object"},
    {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "appears twice"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
};

Test(models_safetensors, bad_headers_are_corrupt_and_say_why) {
    const char *dir = rgt_tmpdir("st_headers");
    for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "case%zu", i);
        write_with_header(tmp_path(dir, name), bad_headers[i].header, bad_headers[i].data);
        expect_open_fails(path_buf, RG_ECORRUPT, bad_headers[i].needle);
    }
    /* valid corner cases: empty header, zero-size tensors, every dtype the format has */
    const char *ok[] = {"{}", "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                              "\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                              "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}"};
    size_t ok_data[] = {0, 8};
    for (int i = 0; i < 2; i++) {
        write_with_header(tmp_path(dir, "ok"), ok[i], ok_data[i]);
        rg_safetensors *f;
        cr_assert_eq(rg_safetensors_open(path_buf, &f), RG_OK, "%s", rg_last_error());
        rg_safetensors_close(f);
    }
}

Test(models_safetensors, save_into_a_missing_directory_is_an_io_error) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2), -1, 1, 1);
    rg_named_tensor ts[] = {{"a", a, false}};
    rg_status s = rg_safetensors_save("/nonexistent-dir/x.safetensors", ts, 1, NULL, 0);
    cr_assert_eq(s, RG_EIO);
    cr_assert(strstr(rg_last_error(), "/nonexistent-dir/x.safetensors"), "%s", rg_last_error());
    rg_tensor_free(a);
}

/* A save renames a new file over its path: onto a symbolic link, a FIFO or a device it would
 * replace them by a regular file (as root, /dev/full became a checkpoint). Refused, untouched. */
Test(models_safetensors, save_refuses_links_fifos_and_devices) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2), -1, 1, 1);
    rg_named_tensor ts[] = {{"a", a, false}};
    char dir[] = "/tmp/rg-st-XXXXXX", link[64], fifo[64], target[64];
    cr_assert(mkdtemp(dir));
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(symlink(target, link), 0);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *paths[] = {link, fifo, "/dev/null"};
    const char *kinds[] = {"is a symbolic link to ", "is a FIFO", "is a device"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rg_safetensors_save(paths[i], ts, 1, NULL, 0), RG_EINVAL, "%s", paths[i]);
        cr_assert(strstr(rg_last_error(), paths[i]) && strstr(rg_last_error(), kinds[i]), "%s",
                  rg_last_error());
    }
    struct stat sb;
    cr_assert(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");
    cr_assert(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    cr_assert(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/null was replaced");
    cr_assert(access(target, F_OK) != 0, "written through the link");
    unlink(link), unlink(fifo), rmdir(dir);
    rg_tensor_free(a);
}

/* rg_safetensors_find's NULL for a missing name, passed on: a segfault before, now a message */
Test(models_safetensors, reading_a_missing_name_stops_with_a_message, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2), -1, 1, 1);
    rg_named_tensor ts[] = {{"a", a, false}};
    char path[] = "/tmp/rg-st-missing-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(rg_safetensors_save(path, ts, 1, NULL, 0), RG_OK, "%s", rg_last_error());
    rg_safetensors *f;
    cr_assert_eq(rg_safetensors_open(path, &f), RG_OK, "%s", rg_last_error());
    unlink(path);
    const rg_safetensors_entry *e = rg_safetensors_find(f, "b");
    cr_assert_null(e);
    rgt_expect_fatal("NULL entry (rg_safetensors_find returns NULL for a missing name)");
    RG_IGNORE(rg_safetensors_read_tensor(f, e, a));
}

Test(models_safetensors, duplicate_names_on_save_abort, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2), -1, 1, 1);
    rg_named_tensor ts[] = {{"a", a, false}, {"a", a, false}};
    RG_IGNORE(rg_safetensors_save("/tmp/never-written.safetensors", ts, 2, NULL, 0)); /* stops */
}
