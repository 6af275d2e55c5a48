/* Tests for image-folder datasets: PNG files written by the test (stb_image_write) come back in
 * sorted class order with (C,H,W) planes, grayscale and RGB; wrong sizes, undecodable files,
 * missing and empty folders are errors that name the file. */
#include <sys/stat.h>

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
