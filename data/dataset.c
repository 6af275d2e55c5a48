/* dataset.c — the dataset struct, IDX image/label pairs and Fashion-MNIST.
 *
 * What it teaches: a loader checks the files against each other (as many labels as images, every
 * label a valid class), not only each file on its own, and a missing dataset is an error message
 * that tells the user how to get it, not a crash or a bare "No such file". */
#include "ringgrad/dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringgrad/idx.h"
#include "data/dataset_impl.h"

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_CLASSES 10
#define FMNIST_INSTALL_HINT                                                                        \
    "install it with `apt-get install dataset-fashion-mnist` (or scripts/install-deps.sh), or "    \
    "point --data-dir or RG_DATA_DIR at a folder holding train-images-idx3-ubyte.gz, "             \
    "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz"

static const char *const fmnist_class_names[FMNIST_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

static const char *const fmnist_prefix[] = {"train", "t10k"};
_Static_assert(sizeof fmnist_prefix / sizeof fmnist_prefix[0] == RG_SPLIT_COUNT, "split prefixes");

/* A dataset header with no data yet; NULL (ENOMEM set) when memory runs out. */
static rg_dataset *dataset_header(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes) {
    RG_CHECK(n > 0 && c > 0 && h > 0 && w > 0 && num_classes > 0,
             "rg_dataset_new: bad size n=%" PRId64 " c=%" PRId64 " h=%" PRId64 " w=%" PRId64
             " classes=%d",
             n, c, h, w, num_classes);
    rg_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return rg_error(RG_ENOMEM, "dataset: out of memory"), NULL;
    *ds = (rg_dataset){.n = n, .c = c, .h = h, .w = w, .num_classes = num_classes};
    ds->labels = calloc((size_t)n, sizeof *ds->labels);
    if (!ds->labels) {
        free(ds);
        return rg_error(RG_ENOMEM, "dataset: out of memory for %" PRId64 " labels", n), NULL;
    }
    return ds;
}

rg_dataset *rg_dataset_new(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes) {
    rg_dataset *ds = dataset_header(n, c, h, w, num_classes);
    if (!ds) return NULL;
    RG_CHECK(c * h * w <= (INT64_C(1) << 40) / n,
             "rg_dataset_new: %" PRId64 " images of %" PRId64 " bytes is absurd", n, c * h * w);
    ds->images = calloc((size_t)n, (size_t)(c * h * w));
    if (!ds->images) {
        rg_dataset_free(ds);
        return rg_error(RG_ENOMEM,
                        "dataset: out of memory for %" PRId64 " images of %" PRId64 " bytes", n,
                        c * h * w),
               NULL;
    }
    return ds;
}

rg_dataset *rg_dataset_new_lazy(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes) {
    rg_dataset *ds = dataset_header(n, c, h, w, num_classes);
    if (ds && !(ds->files = calloc((size_t)n, sizeof *ds->files))) {
        rg_dataset_free(ds);
        return rg_error(RG_ENOMEM, "dataset: out of memory for %" PRId64 " file names", n), NULL;
    }
    return ds;
}

rg_dataset *rg_dataset_new_generated(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes,
                                     struct rg_dataset_gen *gen) {
    rg_dataset *ds = dataset_header(n, c, h, w, num_classes);
    if (!ds) {
        gen->release(gen);
        return NULL;
    }
    ds->gen = gen;
    return ds;
}

rg_status rg_dataset_item(const rg_dataset *ds, int64_t i, rg_image *img) {
    RG_CHECK(ds && img && i >= 0 && i < ds->n, "rg_dataset_item: item %" PRId64 " of %" PRId64, i,
             ds ? ds->n : 0);
    if (ds->files) return rg_image_load(ds->files[i], (int)ds->c, img);
    if (ds->gen) {
        *img = (rg_image){.px = malloc((size_t)rg_dataset_image_size(ds)),
                          .c = (int)ds->c,
                          .h = (int)ds->h,
                          .w = (int)ds->w};
        if (!img->px)
            return rg_error(RG_ENOMEM, "dataset: out of memory for an image of %" PRId64 " bytes",
                            rg_dataset_image_size(ds));
        rg_status st = ds->gen->make(ds->gen, i, img->px);
        if (st != RG_OK) rg_image_deinit(img);
        return st;
    }
    *img = (rg_image){.px = ds->images + i * rg_dataset_image_size(ds), .c = (int)ds->c,
                      .h = (int)ds->h, .w = (int)ds->w};
    return RG_OK;
}

void rg_dataset_item_release(const rg_dataset *ds, rg_image *img) {
    if (ds->files || ds->gen)
        rg_image_deinit(img);
    else *img = (rg_image){0};
}

static void free_names(rg_dataset *ds) {
    if (!ds->class_names) return;
    for (int k = 0; k < ds->num_classes; k++) free(ds->class_names[k]);
    free(ds->class_names);
    ds->class_names = NULL;
}

void rg_dataset_free(rg_dataset *ds) {
    if (!ds) return;
    free_names(ds);
    for (int64_t i = 0; ds->files && i < ds->n; i++) free(ds->files[i]);
    free(ds->files);
    if (ds->gen) ds->gen->release(ds->gen);
    free(ds->images);
    free(ds->labels);
    free(ds);
}

rg_status rg_dataset_set_class_names(rg_dataset *ds, const char *const *names) {
    RG_CHECK(ds && names, "rg_dataset_set_class_names: NULL dataset or names");
    free_names(ds);
    ds->class_names = calloc((size_t)ds->num_classes, sizeof *ds->class_names);
    if (!ds->class_names) return rg_error(RG_ENOMEM, "dataset: out of memory for class names");
    for (int k = 0; k < ds->num_classes; k++) {
        ds->class_names[k] = strdup(names[k]);
        if (!ds->class_names[k]) {
            free_names(ds);
            return rg_error(RG_ENOMEM, "dataset: out of memory for class names");
        }
    }
    return RG_OK;
}

/* ---- IDX pairs ---------------------------------------------------------------------------- */

/* Moves the checked labels of `lab` into ds->labels. */
RG_NODISCARD static rg_status take_labels(rg_dataset *ds, const rg_idx *lab, const char *path) {
    for (int64_t i = 0; i < ds->n; i++) {
        if (lab->data[i] >= ds->num_classes)
            return rg_error(RG_ECORRUPT,
                            "%s: label %d of item %" PRId64 " is out of range "
                            "(there are %d classes)",
                            path, lab->data[i], i, ds->num_classes);
        ds->labels[i] = lab->data[i];
    }
    return RG_OK;
}

rg_status rg_dataset_idx(const char *images_path, const char *labels_path, int num_classes,
                         rg_dataset **out) {
    RG_CHECK(images_path && labels_path && out, "rg_dataset_idx: NULL argument");
    RG_CHECK(num_classes > 0 && num_classes <= 256, "rg_dataset_idx: %d classes (1..256)",
             num_classes);
    *out = NULL;
    rg_idx img = {0}, lab = {0};
    rg_status s = rg_idx_read(images_path, 3, &img);
    if (s == RG_OK) s = rg_idx_read(labels_path, 1, &lab);
    if (s == RG_OK && img.dims[0] != lab.dims[0])
        s = rg_error(RG_ECORRUPT, "%s holds %" PRId64 " images but %s holds %" PRId64 " labels",
                     images_path, img.dims[0], labels_path, lab.dims[0]);
    rg_dataset *ds = NULL;
    if (s == RG_OK) {
        ds = dataset_header(img.dims[0], 1, img.dims[1], img.dims[2], num_classes);
        s = ds ? take_labels(ds, &lab, labels_path) : RG_ENOMEM;
    }
    if (s == RG_OK) {
        ds->images = img.data; /* the IDX payload is already (N,H,W) bytes: keep it */
        img.data = NULL;
        *out = ds;
    } else {
        rg_dataset_free(ds);
    }
    rg_idx_deinit(&img);
    rg_idx_deinit(&lab);
    return s;
}

/* ---- Fashion-MNIST ------------------------------------------------------------------------- */

const char *rg_data_default_dir(void) {
    const char *env = getenv("RG_DATA_DIR");
    return env && env[0] ? env : FMNIST_DEFAULT_DIR;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* dir/<prefix>-<kind>.gz if it exists, else dir/<prefix>-<kind> (an unpacked copy). */
RG_NODISCARD
static rg_status fmnist_file(const char *dir, const char *prefix, const char *kind, char *path,
                             size_t n) {
    int len = snprintf(path, n, "%s/%s-%s.gz", dir, prefix, kind);
    if (len < 0 || (size_t)len >= n)
        return rg_error(RG_EINVAL, "%s: the folder's path is too long (%zu characters)", dir,
                        strlen(dir));
    if (file_exists(path)) return RG_OK;
    /* a symlink loop or a permission problem is not "no such file": say what stat said */
    if (errno != ENOENT) return rg_error(RG_EIO, "%s: %s", path, strerror(errno));
    snprintf(path, n, "%s/%s-%s", dir, prefix, kind);
    if (file_exists(path)) return RG_OK;
    if (errno != ENOENT) return rg_error(RG_EIO, "%s: %s", path, strerror(errno));
    return rg_error(RG_ENOENT,
                    "%s/%s-%s.gz: no such file (nor an unpacked copy): the "
                    "Fashion-MNIST folder is incomplete; " FMNIST_INSTALL_HINT,
                    dir, prefix, kind);
}

rg_status rg_dataset_fmnist(const char *dir, rg_split split, rg_dataset **out) {
    RG_CHECK(out, "rg_dataset_fmnist: NULL output");
    RG_CHECK((unsigned)split < RG_SPLIT_COUNT, "rg_dataset_fmnist: bad split %d", (int)split);
    *out = NULL;
    if (!dir) dir = rg_data_default_dir();
    struct stat st;
    if (stat(dir, &st) != 0 && errno != ENOENT && errno != ENOTDIR)
        return rg_error(RG_EIO, "Fashion-MNIST folder %s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return rg_error(RG_ENOENT,
                        "Fashion-MNIST not found: %s is not a folder; " FMNIST_INSTALL_HINT, dir);
    char images[4096], labels[4096];
    RG_TRY(fmnist_file(dir, fmnist_prefix[split], "images-idx3-ubyte", images, sizeof images));
    RG_TRY(fmnist_file(dir, fmnist_prefix[split], "labels-idx1-ubyte", labels, sizeof labels));
    rg_dataset *ds;
    RG_TRY(rg_dataset_idx(images, labels, FMNIST_CLASSES, &ds));
    rg_status s = rg_dataset_set_class_names(ds, fmnist_class_names);
    if (s != RG_OK) return rg_dataset_free(ds), s;
    *out = ds;
    return RG_OK;
}
