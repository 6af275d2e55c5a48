/* Tests for image-folder datasets: PNG files written by the test (stb_image_write) come back in
 * sorted class order with (C,H,W) planes, grayscale and RGB, subfolders of a class included;
 * wrong sizes, undecodable files, missing and empty folders, and looping links are errors that
 * name the file. */
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

/* The byte at (channel ch, row y, column x) of image `id`. */
static uint8_t px(int id, int ch, int y, int x) {
    return (uint8_t)(id * 40 + ch * 70 + y * 9 + x * 5);
}

/* Writes dir/<cls>/<name> as a PNG of w x h with `channels` channels (interleaved, as files are).
 */
static void write_png(const char *dir, const char *cls, const char *name, int id, int w, int h,
                      int channels) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, cls);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", dir, cls, name);
    uint8_t buf[64 * 64 * 3];
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < channels; ch++)
                buf[(y * w + x) * channels + ch] = px(id, ch, y, x);
    cr_assert(stbi_write_png(path, w, h, channels, buf, w * channels), "cannot write %s", path);
}

static void assert_image(const rg_dataset *ds, int64_t i, int id) {
    const uint8_t *img = ds->images + i * rg_dataset_image_size(ds);
    for (int ch = 0; ch < ds->c; ch++)
        for (int y = 0; y < ds->h; y++)
            for (int x = 0; x < ds->w; x++)
                cr_assert_eq(img[(ch * ds->h + y) * ds->w + x], px(id, ch, y, x),
                             "item %lld channel %d (%d,%d)", (long long)i, ch, y, x);
}

Test(dataset_image_folder, loads_rgb_planes_in_sorted_class_order) {
    const char *dir = rgt_tmpdir("imgdir_rgb");
    write_png(dir, "zebra", "b.png", 0, 8, 6, 3);
    write_png(dir, "zebra", "a.PNG", 1, 8, 6, 3);
    write_png(dir, "apple", "x.png", 2, 8, 6, 3);
    write_png(dir, "mango", "m.png", 3, 8, 6, 3);
    char path[4200];
    snprintf(path, sizeof path, "%s/apple/readme.txt", dir);
    fx_write(path, "not an image", 12, false);
    snprintf(path, sizeof path, "%s/.hidden", dir);
    mkdir(path, 0755);
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_image_folder(dir, NULL, &ds), RG_OK, "%s", rg_last_error());
    cr_assert(ds->n == 4 && ds->c == 3 && ds->h == 6 && ds->w == 8 && ds->num_classes == 3);
    cr_assert_str_eq(ds->class_names[0], "apple");
    cr_assert_str_eq(ds->class_names[1], "mango");
    cr_assert_str_eq(ds->class_names[2], "zebra");
    int want_label[] = {0, 1, 2, 2}, want_id[] = {2, 3, 1, 0}; /* a.PNG sorts before b.png */
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ds->labels[i], want_label[i], "item %d", i);
        assert_image(ds, i, want_id[i]);
    }
    rg_dataset_free(ds);
}

/* torchvision's ImageFolder takes the images in a class folder's subfolders too: here the class
 * folder's own files come first, then each subfolder's in sorted order, recursively; hidden
 * folders are skipped; a symbolic link that loops is an error naming the path. */
Test(dataset_image_folder, a_class_folders_subfolders_hold_its_images_too) {
    const char *dir = rgt_tmpdir("imgdir_nested");
    char path[4200];
    const char *dirs[] = {"cat", "cat/sub", "cat/sub/deep", "cat/.hidden", "only", "only/x"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dirs[i]);
        mkdir(path, 0755);
    }
    write_png(dir, "cat", "b.png", 0, 4, 4, 3);
    write_png(dir, "cat/sub", "a.png", 1, 4, 4, 3);
    write_png(dir, "cat/sub/deep", "c.png", 2, 4, 4, 3);
    write_png(dir, "cat/.hidden", "h.png", 3, 4, 4, 3);
    write_png(dir, "dog", "d.png", 4, 4, 4, 3);
    write_png(dir, "only/x", "e.png", 5, 4, 4, 3); /* a class whose images are all one level down */
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_image_folder(dir, NULL, &ds), RG_OK, "%s", rg_last_error());
    cr_assert(ds->n == 5 && ds->num_classes == 3, "%lld images in %d classes", (long long)ds->n,
              ds->num_classes);
    int want_label[] = {0, 0, 0, 1, 2}, want_id[] = {0, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(ds->labels[i], want_label[i], "item %d", i);
        assert_image(ds, i, want_id[i]);
    }
    rg_dataset_free(ds);
    snprintf(path, sizeof path, "%s/dog/self", dir);
    cr_assert_eq(symlink(".", path), 0);
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, "dog/self/self",
                    "folders deep inside a class folder");
}

Test(dataset_image_folder, loads_grayscale) {
    const char *dir = rgt_tmpdir("imgdir_gray");
    write_png(dir, "0", "a.png", 5, 5, 7, 1);
    write_png(dir, "1", "a.png", 6, 5, 7, 1);
    rg_dataset *ds;
    rg_status s =
        rg_dataset_image_folder(dir, &(rg_image_folder_opts){.channels = 1, .h = 7, .w = 5}, &ds);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    cr_assert(ds->n == 2 && ds->c == 1 && ds->h == 7 && ds->w == 5 && ds->num_classes == 2);
    assert_image(ds, 0, 5);
    assert_image(ds, 1, 6);
    cr_assert(ds->labels[0] == 0 && ds->labels[1] == 1);
    rg_dataset_free(ds);
}

Test(dataset_image_folder, wrong_sizes_are_named) {
    const char *dir = rgt_tmpdir("imgdir_size");
    write_png(dir, "a", "1.png", 0, 8, 6, 3);
    write_png(dir, "b", "2.png", 0, 9, 6, 3);
    char path[4200];
    snprintf(path, sizeof path, "%s/b/2.png", dir);
    rg_dataset *ds;
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, path,
                    "image is 9x6 (width x height), expected 8x6");
    cr_assert_null(ds);
    snprintf(path, sizeof path, "%s/a/1.png", dir);
    fx_assert_error(rg_dataset_image_folder(dir, &(rg_image_folder_opts){.h = 28, .w = 28}, &ds),
                    RG_ECORRUPT, path, "expected 28x28");
}

Test(dataset_image_folder, undecodable_files_are_named) {
    const char *dir = rgt_tmpdir("imgdir_bad");
    write_png(dir, "a", "1.png", 0, 8, 6, 3);
    char path[4200];
    snprintf(path, sizeof path, "%s/a/2.png", dir);
    fx_write(path, "\x89PNG garbage garbage garbage", 27, false);
    rg_dataset *ds;
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, path,
                    "cannot decode the image");
    /* a truncated real PNG */
    snprintf(path, sizeof path, "%s/a/1.png", dir);
    fx_bytes png = fx_read(path);
    fx_write(path, png.p, png.n / 2, false);
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, path, "cannot decode");
    free(png.p);
}

Test(dataset_image_folder, missing_and_empty_folders) {
    const char *dir = rgt_tmpdir("imgdir_empty");
    char path[4200];
    snprintf(path, sizeof path, "%s/nothing-here", dir);
    rg_dataset *ds;
    fx_assert_error(rg_dataset_image_folder(path, NULL, &ds), RG_ENOENT, path, "cannot open");
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, dir, "no class folders");
    snprintf(path, sizeof path, "%s/cls", dir);
    mkdir(path, 0755);
    fx_assert_error(rg_dataset_image_folder(dir, NULL, &ds), RG_ECORRUPT, dir, "no images");
}

static void progress_count(const char *root, int64_t files, bool done, void *arg) {
    int64_t *calls = arg;
    calls[0]++;
    if (done) calls[1] = files;
}

/* Lazy: the folder is indexed (class names, labels, files), and the loader decodes the same
 * bytes the eager path does; with workers too. */
Test(dataset_image_folder, lazy_matches_eager_through_the_loader) {
    const char *dir = rgt_tmpdir("imgdir_lazy");
    for (int i = 0; i < 9; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d.png", i);
        write_png(dir, i % 3 == 0 ? "cat" : "dog", name, i, 8, 6, 3);
    }
    rg_dataset *eager, *lazy;
    cr_assert_eq(rg_dataset_image_folder(dir, NULL, &eager), RG_OK, "%s", rg_last_error());
    int64_t calls[2] = {0, 0};
    rg_image_folder_opts o = {.lazy = true, .progress = progress_count, .progress_arg = calls};
    cr_assert_eq(rg_dataset_image_folder(dir, &o, &lazy), RG_OK, "%s", rg_last_error());
    cr_assert(lazy->images == NULL && lazy->files && lazy->n == 9 && lazy->c == 3 &&
              lazy->h == 6 && lazy->w == 8 && lazy->num_classes == 2);
    cr_assert(calls[0] >= 1 && calls[1] == 9, "progress: %lld calls, done at %lld",
              (long long)calls[0], (long long)calls[1]);
    for (int64_t i = 0; i < 9; i++) cr_assert_eq(lazy->labels[i], eager->labels[i]);
    rg_loader *a = rg_loader_new(eager, &(rg_loader_opts){.batch = 4, .shuffle = true});
    rg_loader *b = rg_loader_new(lazy, &(rg_loader_opts){.batch = 4, .shuffle = true, .workers = 3});
    rg_batch ba, bb;
    int steps = 0;
    while (rg_loader_next(a, &ba)) {
        cr_assert(rg_loader_next(b, &bb));
        cr_assert_eq(ba.size, bb.size);
        cr_assert(memcmp(ba.x->data, bb.x->data, (size_t)ba.size * 144 * 4) == 0, "step %d", steps);
        cr_assert(memcmp(ba.y->data, bb.y->data, (size_t)ba.size * 8) == 0);
        steps++;
    }
    cr_assert_eq(steps, 3);
    cr_assert_eq(rg_loader_status(b), RG_OK);
    rg_loader_free(a), rg_loader_free(b);
    rg_dataset_free(eager), rg_dataset_free(lazy);
}

/* Lazy with a size: images of other sizes are resized by the loader, and gray comes from the
 * first image when no channel count is given. */
Test(dataset_image_folder, lazy_resizes_and_takes_channels_from_the_first_image) {
    const char *dir = rgt_tmpdir("imgdir_lazy_size");
    write_png(dir, "a", "1.png", 1, 20, 12, 1);
    write_png(dir, "b", "2.png", 2, 9, 31, 1);
    rg_dataset *ds;
    rg_status s = rg_dataset_image_folder(dir, &(rg_image_folder_opts){.lazy = true, .h = 16,
                                                                        .w = 16}, &ds);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    cr_assert(ds->c == 1 && ds->h == 16 && ds->w == 16);
    rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = 2, .augment = RG_AUGMENT_RRC});
    rg_batch b;
    cr_assert(rg_loader_next(l, &b));
    cr_assert(b.x->shape[1] == 1 && b.x->shape[2] == 16 && b.x->shape[3] == 16);
    cr_assert_eq(rg_loader_status(l), RG_OK, "%s", rg_last_error());
    rg_loader_free(l);
    rg_dataset_free(ds);
}

/* A file damaged after indexing: the loader delivers zeros for it, keeps going, and reports the
 * file through rg_loader_status. */
Test(dataset_image_folder, lazy_decode_errors_are_reported_by_the_loader) {
    const char *dir = rgt_tmpdir("imgdir_lazy_bad");
    write_png(dir, "a", "1.png", 1, 8, 6, 3);
    write_png(dir, "a", "2.png", 2, 8, 6, 3);
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_image_folder(dir, &(rg_image_folder_opts){.lazy = true}, &ds), RG_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/a/2.png", dir);
    fx_bytes png = fx_read(path);
    fx_write(path, png.p, png.n - 20, false);
    free(png.p);
    rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = 2, .workers = 2});
    rg_batch b;
    cr_assert(rg_loader_next(l, &b));
    const float *x = b.x->data;
    for (int p = 0; p < 144; p++) cr_assert_eq(x[144 + p], 0.0f);
    cr_assert(x[1] != 0.0f);
    fx_assert_error(rg_loader_status(l), RG_ECORRUPT, path, "cannot decode the image");
    rg_loader_free(l);
    rg_dataset_free(ds);
}

/* Indexing checks every header: a huge claim, a non-image, a FIFO or an empty class folder is an
 * error naming it, before any training. */
Test(dataset_image_folder, lazy_indexing_names_bad_files, .timeout = 20) {
    const char *dir = rgt_tmpdir("imgdir_lazy_index");
    write_png(dir, "a", "1.png", 1, 8, 6, 3);
    char path[4200];
    rg_dataset *ds;
    rg_image_folder_opts o = {.lazy = true};
    /* a header claiming 100000 x 100000 */
    snprintf(path, sizeof path, "%s/a/2.png", dir);
    uint8_t ihdr[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D',
                        'R', 0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0, 8, 2};
    fx_write(path, ihdr, sizeof ihdr, false);
    for (int lazy = 0; lazy < 2; lazy++) {
        o.lazy = lazy;
        fx_assert_error(rg_dataset_image_folder(dir, &o, &ds), RG_ECORRUPT, path,
                        "claims 100000x100000 pixels");
        cr_assert_null(ds);
    }
    o.lazy = true;
    fx_write(path, "plain text", 10, false);
    fx_assert_error(rg_dataset_image_folder(dir, &o, &ds), RG_ECORRUPT, path, "not a PNG");
    remove(path);
    snprintf(path, sizeof path, "%s/a/3.png", dir);
    cr_assert_eq(mkfifo(path, 0644), 0);
    fx_assert_error(rg_dataset_image_folder(dir, &o, &ds), RG_EIO, path, "a FIFO");
    remove(path);
    cr_assert_eq(rg_dataset_image_folder(dir, &o, &ds), RG_OK, "%s", rg_last_error());
    rg_dataset_free(ds);
    snprintf(path, sizeof path, "%s/b-empty", dir);
    mkdir(path, 0755);
    fx_assert_error(rg_dataset_image_folder(dir, &o, &ds), RG_ECORRUPT, path,
                    "class folder with no images");
}
