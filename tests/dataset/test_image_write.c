/* Tests for writing a dataset as an image folder (data/image_write.c) and reading it back: the
 * sorted class folders give back the labels, the files the order, and the pixels are exactly the
 * IDX bytes (PNG is lossless), for a fixture and for the first 200 real Fashion-MNIST images when
 * the dataset is installed (skipped visibly otherwise). */
#include <sys/stat.h>

#include "fixtures.h"

/* Writes `limit` items of ds to dir (the first limit / K of each of the K classes, one more of
 * the first limit % K), reads them back (eager and lazy) and compares item by item. The folder is
 * class-major, so item j of the folder is the j-th of the written items in (label, index) order. */
static void round_trip(const rg_dataset *ds, const char *dir, int64_t limit) {
    cr_assert_eq(rg_dataset_write_image_folder(ds, dir, limit), RG_OK, "%s", rg_last_error());
    int64_t size = rg_dataset_image_size(ds), k_n = ds->num_classes, taken[64] = {0};
    bool *written = calloc((size_t)ds->n, sizeof *written);
    cr_assert(written && k_n <= 64);
    for (int64_t i = 0; i < ds->n; i++) {
        int64_t k = ds->labels[i], quota = limit >= ds->n ? ds->n : limit / k_n + (k < limit % k_n);
        if (taken[k] < quota) written[i] = true, taken[k]++;
    }
    for (int lazy = 0; lazy < 2; lazy++) {
        rg_dataset *back;
        rg_status s = rg_dataset_image_folder(dir, &(rg_image_folder_opts){.lazy = lazy}, &back);
        cr_assert_eq(s, RG_OK, "%s", rg_last_error());
        cr_assert(back->c == ds->c && back->h == ds->h && back->w == ds->w);
        int64_t j = 0;
        for (int k = 0; k < ds->num_classes; k++)
            for (int64_t i = 0; i < ds->n; i++) {
                if (ds->labels[i] != k || !written[i]) continue;
                cr_assert(j < back->n);
                cr_assert_eq(back->labels[j], k, "item %lld", (long long)j);
                rg_image img;
                cr_assert_eq(rg_dataset_item(back, j, &img), RG_OK, "%s", rg_last_error());
                cr_assert(memcmp(img.px, ds->images + i * size, (size_t)size) == 0,
                          "IDX item %lld differs after the round trip", (long long)i);
                rg_dataset_item_release(back, &img);
                j++;
            }
        cr_assert_eq(j, back->n);
        if (ds->class_names) {
            cr_assert_str_eq(back->class_names[0], "0_T-shirt-top");
            cr_assert_str_eq(back->class_names[9], "9_Ankle-boot");
        }
        rg_dataset_free(back);
    }
    free(written);
}

Test(dataset_image_write, fixture_round_trip_is_exact) {
    const char *dir = rgt_tmpdir("imgwrite_fixture");
    fx_write_pair(dir, "t", 57, 9, 7, false);
    char a[4200], b[4200], out[4200];
    snprintf(a, sizeof a, "%s/t-images-idx3-ubyte", dir);
    snprintf(b, sizeof b, "%s/t-labels-idx1-ubyte", dir);
    snprintf(out, sizeof out, "%s/folder", dir);
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_idx(a, b, 10, &ds), RG_OK, "%s", rg_last_error());
    round_trip(ds, out, 1000);
    rg_dataset_free(ds);
}

/* Fashion-MNIST's training set, and out = a fresh folder's "train" (skips the test without it) */
static rg_dataset *fmnist_or_skip(const char *name, char *out, size_t cap) {
    rg_dataset *ds;
    if (rg_dataset_fmnist(NULL, RG_SPLIT_TRAIN, &ds) != RG_OK)
        cr_skip_test("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    snprintf(out, cap, "%s/train", rgt_tmpdir(name));
    return ds;
}

Test(dataset_image_write, first_200_fashion_mnist_images_round_trip) {
    char out[4200];
    rg_dataset *ds = fmnist_or_skip("imgwrite_fmnist", out, sizeof out);
    round_trip(ds, out, 200);
    rg_dataset_free(ds);
}

/* The first 13 Fashion-MNIST images leave 4 classes without one, and an image folder with an
 * empty class cannot be read: a limit takes the first of each class instead (2 of classes 0-2,
 * 1 of the others); a limit below the 10 classes is an error. */
Test(dataset_image_write, a_limit_gives_every_class_images) {
    char out[4200];
    rg_dataset *ds = fmnist_or_skip("imgwrite_limit", out, sizeof out);
    round_trip(ds, out, 13);
    rg_dataset *back;
    cr_assert_eq(rg_dataset_image_folder(out, NULL, &back), RG_OK, "%s", rg_last_error());
    int64_t count[10] = {0};
    for (int64_t j = 0; j < back->n; j++) count[back->labels[j]]++;
    for (int k = 0; k < 10; k++) cr_assert_eq(count[k], k < 3 ? 2 : 1, "class %d", k);
    rg_dataset_free(back);
    strcat(out, "-nine");
    fx_assert_error(rg_dataset_write_image_folder(ds, out, 9), RG_EINVAL, "limit of 9 images",
                    "each of the 10 classes");
    rg_dataset_free(ds);
}

Test(dataset_image_write, unwritable_folders_are_named) {
    rg_dataset *ds = rg_dataset_new(2, 1, 4, 4, 2);
    fx_assert_error(rg_dataset_write_image_folder(ds, "/proc/no-such-place/x", 0), RG_EIO,
                    "/proc/no-such-place/x", "cannot create the folder");
    rg_dataset_free(ds);
}

/* A label outside the classes picked no folder: a write past the per-class counts (ASan: a heap
 * overflow) and RG_OK. Now an error naming the item, before any folder is made. */
Test(dataset_image_write, a_label_outside_the_classes_is_named) {
    rg_dataset *ds = rg_dataset_new(4, 1, 4, 4, 2);
    ds->labels[2] = 7;
    fx_assert_error(rg_dataset_write_image_folder(ds, "/tmp/rg-never-written", 0), RG_EINVAL,
                    "item 2 has label 7", "outside the 2 classes");
    ds->labels[2] = -1;
    fx_assert_error(rg_dataset_write_image_folder(ds, "/tmp/rg-never-written", 0), RG_EINVAL,
                    "item 2 has label -1", "/tmp/rg-never-written");
    cr_assert(access("/tmp/rg-never-written", F_OK) != 0, "a folder was made");
    rg_dataset_free(ds);
}
