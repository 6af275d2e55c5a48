/* image_write.c — writes a dataset out as an image folder of PNG files (stb_image_write).
 *
 * What it teaches: the inverse of image_folder.c, with the one subtlety of the ImageFolder
 * convention: labels come from the sorted order of the class folder names, so the folders are
 * named "<k>_<name>" with k zero-padded, and sorting them gives back label k for class k. Files are
 * numbered with a fixed width so that their sorted order is the dataset's order. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringgrad/dataset.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

static int digits(int64_t n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

RG_NODISCARD static rg_status make_dir(const char *path) {
    if (mkdir(path, 0755) == 0 || errno == EEXIST) return RG_OK;
    return rg_error(RG_EIO, "%s: cannot create the folder: %s", path, strerror(errno));
}

/* Folder name of class k: "<k>_<name>" with '/' and ' ' turned into '-'. */
static void class_dir(const rg_dataset *ds, int k, const char *root, char *out, size_t n) {
    int len = snprintf(out, n, "%s/%0*d", root, digits(ds->num_classes - 1), k);
    if (!ds->class_names || len < 0 || (size_t)len >= n) return;
    snprintf(out + len, n - (size_t)len, "_%s", ds->class_names[k]);
    for (char *p = out + len + 1; *p; p++)
        if (*p == '/' || *p == ' ') *p = '-';
}

/* One item as a PNG: planes (C,H,W) interleaved to (H,W,C) as files store them. */
RG_NODISCARD static rg_status write_item(const rg_dataset *ds, int64_t i, const char *path,
                                         uint8_t *buf) {
    rg_image img;
    RG_TRY(rg_dataset_item(ds, i, &img));
    int64_t plane = (int64_t)img.h * img.w;
    for (int c = 0; c < img.c; c++)
        for (int64_t p = 0; p < plane; p++) buf[p * img.c + c] = img.px[c * plane + p];
    int ok = stbi_write_png(path, img.w, img.h, img.c, buf, img.w * img.c);
    rg_dataset_item_release(ds, &img);
    if (!ok) return rg_error(RG_EIO, "%s: cannot write the PNG file", path);
    return RG_OK;
}

/* How many of class k's items a folder of n of the total items takes: n / classes, one more for
 * the first n % classes classes; all of them without a limit. */
static int64_t quota(int64_t k, int64_t n, int64_t classes, int64_t total) {
    return n < total ? n / classes + (k < n % classes) : total;
}

rg_status rg_dataset_write_image_folder(const rg_dataset *ds, const char *dir, int64_t limit) {
    RG_CHECK(ds && dir, "rg_dataset_write_image_folder: NULL argument");
    RG_CHECK(ds->c == 1 || ds->c == 3, "rg_dataset_write_image_folder: %lld channels (1 or 3)",
             (long long)ds->c);
    int64_t n = limit > 0 && limit < ds->n ? limit : ds->n, k_n = ds->num_classes;
    /* A limit takes items in order, limit / classes of each class (one more for the first
     * limit % classes), so that every class folder gets images: the first `limit` items of
     * Fashion-MNIST leave some classes without any, and an image folder with an empty class is
     * an error. */
    if (n < ds->n && n < k_n)
        return rg_error(RG_EINVAL,
                        "%s: a limit of %lld images cannot give each of the %lld "
                        "classes one",
                        dir, (long long)n, (long long)k_n);
    for (int64_t i = 0; i < ds->n; i++) /* each label picks a class folder (and a count) */
        if (ds->labels[i] < 0 || ds->labels[i] >= k_n)
            return rg_error(RG_EINVAL, "%s: item %lld has label %d, outside the %lld classes", dir,
                            (long long)i, (int)ds->labels[i], (long long)k_n);
    RG_TRY(make_dir(dir));
    char path[8192];
    for (int k = 0; k < ds->num_classes; k++) {
        class_dir(ds, k, dir, path, sizeof path);
        RG_TRY(make_dir(path));
    }
    uint8_t *buf = malloc((size_t)rg_dataset_image_size(ds));
    int64_t *taken = calloc((size_t)k_n, sizeof *taken);
    if (!buf || !taken)
        return free(buf), free(taken), rg_error(RG_ENOMEM, "%s: out of memory", dir);
    rg_status s = RG_OK;
    for (int64_t i = 0, written = 0; s == RG_OK && i < ds->n && written < n; i++) {
        if (taken[ds->labels[i]] >= quota(ds->labels[i], n, k_n, ds->n)) continue;
        taken[ds->labels[i]]++, written++;
        char cls[4096];
        class_dir(ds, ds->labels[i], dir, cls, sizeof cls);
        if (snprintf(path, sizeof path, "%s/%0*" PRId64 ".png", cls, digits(ds->n - 1), i) >=
            (int)sizeof path)
            s = rg_error(RG_EINVAL, "%s: path too long", cls);
        else
            s = write_item(ds, i, path, buf);
    }
    free(buf);
    free(taken);
    return s;
}
