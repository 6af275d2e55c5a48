/* Tests for the Fashion-MNIST loader: the default folder and its overrides, fixture folders with
 * gzipped and unpacked files, missing folders and files (with install hints), and the real
 * dataset when it is installed (skipped visibly otherwise). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"

Test(dataset_fmnist, default_dir_follows_RG_DATA_DIR) {
    unsetenv("RG_DATA_DIR");
    cr_assert_str_eq(rg_data_default_dir(), "/usr/share/datasets/fashion-mnist");
    setenv("RG_DATA_DIR", "", 1);
    cr_assert_str_eq(rg_data_default_dir(), "/usr/share/datasets/fashion-mnist");
    setenv("RG_DATA_DIR", "/somewhere/else", 1);
    cr_assert_str_eq(rg_data_default_dir(), "/somewhere/else");
    unsetenv("RG_DATA_DIR");
}

static void check_fixture(const rg_dataset *ds, int64_t n, int64_t h, int64_t w) {
    cr_assert(ds->n == n && ds->c == 1 && ds->h == h && ds->w == w && ds->num_classes == 10);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(ds->labels[i], fx_label(i), "label %lld", (long long)i);
        for (int64_t p = 0; p < h * w; p++)
            cr_assert_eq(ds->images[i * h * w + p], fx_pixel(i, p), "item %lld byte %lld",
                         (long long)i, (long long)p);
    }
    cr_assert_not_null(ds->class_names);
    cr_assert_str_eq(ds->class_names[0], "T-shirt/top");
    cr_assert_str_eq(ds->class_names[9], "Ankle boot");
}

Test(dataset_fmnist, loads_both_splits_from_a_folder) {
    const char *dir = rgt_tmpdir("fmnist_fixture");
    fx_write_pair(dir, "train", 50, 28, 28, true);
    fx_write_pair(dir, "t10k", 20, 28, 28, true);
    rg_dataset *train, *test;
    cr_assert_eq(rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &train), RG_OK, "%s", rg_last_error());
    cr_assert_eq(rg_dataset_fmnist(dir, RG_SPLIT_TEST, &test), RG_OK, "%s", rg_last_error());
    check_fixture(train, 50, 28, 28);
    check_fixture(test, 20, 28, 28);
    rg_dataset_free(train);
    rg_dataset_free(test);
}

Test(dataset_fmnist, reads_unpacked_files_and_follows_RG_DATA_DIR) {
    const char *dir = rgt_tmpdir("fmnist_plain");
    fx_write_pair(dir, "train", 9, 6, 7, false);
    setenv("RG_DATA_DIR", dir, 1);
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_fmnist(NULL, RG_SPLIT_TRAIN, &ds), RG_OK, "%s", rg_last_error());
    unsetenv("RG_DATA_DIR");
    check_fixture(ds, 9, 6, 7);
    rg_dataset_free(ds);
}

Test(dataset_fmnist, missing_folder_says_how_to_install) {
    const char *dir = rgt_tmpdir("fmnist_missing");
    char path[4200];
    snprintf(path, sizeof path, "%s/no-such-folder", dir);
    rg_dataset *ds = (rg_dataset *)1;
    fx_assert_error(rg_dataset_fmnist(path, RG_SPLIT_TRAIN, &ds), RG_ENOENT, path,
                    "apt-get install dataset-fashion-mnist", "scripts/install-deps.sh",
                    "--data-dir", "RG_DATA_DIR");
    cr_assert_null(ds);
}

Test(dataset_fmnist, missing_file_is_named) {
    const char *dir = rgt_tmpdir("fmnist_incomplete");
    fx_write_pair(dir, "train", 5, 4, 4, true);
    char path[4200];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    unlink(path);
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &ds), RG_OK, "%s", rg_last_error());
    rg_dataset_free(ds);
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    fx_assert_error(rg_dataset_fmnist(dir, RG_SPLIT_TEST, &ds), RG_ENOENT, path, "no such file",
                    "apt-get install dataset-fashion-mnist");
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
    cr_assert_eq(unlink(path), 0);
    fx_assert_error(rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &ds), RG_ENOENT, path, "no such file");
}

/* A symlink loop is not "no such file" (issue 10): the message is stat's own, ELOOP's. */
Test(dataset_fmnist, a_symlink_loop_says_so) {
    const char *dir = rgt_tmpdir("fmnist_loop");
    fx_write_pair(dir, "train", 5, 4, 4, true);
    fx_write_pair(dir, "t10k", 5, 4, 4, true);
    char path[4200], other[4200];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(other, sizeof other, "%s/loop", dir);
    unlink(path), unlink(other);
    cr_assert_eq(symlink(other, path), 0);
    cr_assert_eq(symlink(path, other), 0);
    rg_dataset *ds;
    fx_assert_error(rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &ds), RG_EIO, path,
                    "Too many levels of symbolic links");
    cr_assert_null(strstr(rg_last_error(), "no such file"), "%s", rg_last_error());
}

Test(dataset_fmnist, a_corrupt_file_is_named) {
    const char *dir = rgt_tmpdir("fmnist_corrupt");
    fx_write_pair(dir, "train", 5, 4, 4, true);
    char path[4200];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    fx_write(path, "not an idx file at all", 22, true);
    rg_dataset *ds;
    fx_assert_error(rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &ds), RG_ECORRUPT, path,
                    "bad magic number");
}

/* ---- the real dataset ----------------------------------------------------------------------- */

static rg_dataset *load_real(rg_split split) {
    struct stat st;
    if (stat("/usr/share/datasets/fashion-mnist", &st) != 0)
        cr_skip_test("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    rg_dataset *ds;
    cr_assert_eq(rg_dataset_fmnist("/usr/share/datasets/fashion-mnist", split, &ds), RG_OK, "%s",
                 rg_last_error());
    return ds;
}

/* Checks sizes, 10 balanced classes, the first labels and the first image's byte sum (the last
 * two computed with Python's gzip module from the same files). */
static void check_real(const rg_dataset *ds, int64_t n, const int *first_labels, int64_t sum0) {
    cr_assert(ds->n == n && ds->c == 1 && ds->h == 28 && ds->w == 28 && ds->num_classes == 10);
    int64_t hist[10] = {0};
    for (int64_t i = 0; i < ds->n; i++) {
        cr_assert(ds->labels[i] >= 0 && ds->labels[i] < 10);
        hist[ds->labels[i]]++;
    }
    for (int k = 0; k < 10; k++)
        cr_assert_eq(hist[k], n / 10, "class %d: %lld items", k, (long long)hist[k]);
    for (int i = 0; i < 10; i++) cr_assert_eq(ds->labels[i], first_labels[i], "label %d", i);
    int64_t sum = 0;
    for (int p = 0; p < 784; p++) sum += ds->images[p];
    cr_assert_eq(sum, sum0);
}

Test(dataset_fmnist, real_train_split) {
    rg_dataset *ds = load_real(RG_SPLIT_TRAIN);
    check_real(ds, 60000, (int[]){9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, 76247);
    rg_dataset_free(ds);
}

Test(dataset_fmnist, real_test_split) {
    rg_dataset *ds = load_real(RG_SPLIT_TEST);
    check_real(ds, 10000, (int[]){9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, 33456);
    rg_dataset_free(ds);
}
