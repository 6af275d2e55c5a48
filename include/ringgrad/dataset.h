/* dataset.h — datasets: N images of (C,H,W) unsigned bytes and one integer label each.
 *
 * A dataset is long-lived: it is loaded once, shared by any number of loaders (which never
 * modify it), and freed explicitly with rg_dataset_free(). Images stay as bytes in memory (a
 * quarter of the float32 size); the loader converts each batch to float32 while the model runs.
 *
 * Sources: Fashion-MNIST (or MNIST) IDX files, a synthetic generator for tests and benchmarks,
 * and an image folder (root/<class>/<image>.png), either decoded at once or *lazy*: indexed at
 * load time and decoded batch by batch by the loader's workers (ds->images is NULL then and
 * ds->files names each item's file; read items through rg_dataset_item()). The synthetic set can
 * be lazy too: each item generated when it is read. All loaders return an rg_status and say in
 * rg_last_error() which file is wrong and how. */
#ifndef RG_DATASET_H
#define RG_DATASET_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/image.h"
#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All fields are public and read-only once loaded. c, h, w and num_classes are what a model takes
 * its input shape and output size from (for a lazy dataset, (h,w) is the size the loader resizes
 * every image to). */
typedef struct rg_dataset {
    int64_t n;          /* number of items */
    int64_t c, h, w;    /* every image is (C,H,W) (as the loader delivers it) */
    int num_classes;    /* labels are in [0, num_classes) */
    uint8_t *images;    /* (N,C,H,W) bytes, row-major; owned; NULL for a lazy dataset */
    int32_t *labels;    /* (N); owned */
    char **class_names; /* num_classes names, or NULL when the source has none; owned */
    char **files;       /* lazy datasets: item i's image file; NULL otherwise; owned */
    struct rg_dataset_gen *gen; /* lazy generated datasets: how item i is made (opaque); NULL
                                   otherwise; owned */
} rg_dataset;

/* ---- building and freeing ---- */

/* A zero-filled dataset of n images of (c,h,w) with labels in [0, num_classes), for callers that
 * fill it themselves. Returns NULL with rg_last_error() set when memory runs out; stops
 * (RG_CHECK) on non-positive sizes. The caller frees it with rg_dataset_free(). */
RG_API rg_dataset *rg_dataset_new(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes);

/* Frees the images, labels, class names and the struct. NULL is a no-op. */
RG_API void rg_dataset_free(rg_dataset *ds);

/* Copies num_classes names into ds->class_names (replacing any). Returns RG_ENOMEM on failure. */
RG_API RG_NODISCARD rg_status rg_dataset_set_class_names(rg_dataset *ds, const char *const *names);

/* Item i's pixels as an (C,H,W) image. In memory: a view of ds->images (img->px is not owned; do
 * not free it). Lazy: decoded from ds->files[i] into c channels at the file's own size (owned:
 * free it with rg_dataset_item_release). Fails only for lazy datasets, with rg_image_load()'s
 * statuses; the message names the file. Safe to call from several threads at once. */
RG_API RG_NODISCARD rg_status rg_dataset_item(const rg_dataset *ds, int64_t i, rg_image *img);

/* Releases what rg_dataset_item() gave (frees a decoded image, forgets a view). */
RG_API void rg_dataset_item_release(const rg_dataset *ds, rg_image *img);

/* Bytes in one image: c*h*w. */
static inline int64_t rg_dataset_image_size(const rg_dataset *ds) {
    return ds->c * ds->h * ds->w;
}

/* ---- IDX files (MNIST, Fashion-MNIST) ---- */

typedef enum { RG_SPLIT_TRAIN, RG_SPLIT_TEST, RG_SPLIT_COUNT } rg_split;

/* Where Fashion-MNIST is looked for when the caller gives no folder: $RG_DATA_DIR if set and not
 * empty, else /usr/share/datasets/fashion-mnist (where `apt-get install dataset-fashion-mnist`
 * puts it). A program's --data-dir option overrides both by passing its own folder. The string
 * is static or the environment's; do not free it. */
RG_API const char *rg_data_default_dir(void);

/* Loads a Fashion-MNIST split from `dir` (NULL: rg_data_default_dir()): train-images-idx3-ubyte
 * and train-labels-idx1-ubyte (or t10k-* for RG_SPLIT_TEST), each gzipped (*.gz) or plain. The
 * result is (N,1,H,W) images with 10 named classes (60000 train and 10000 test items of 28x28 in
 * the real files); *out is owned by the caller. Returns RG_ENOENT when the folder or a file is
 * missing (the message says how to install the dataset and mentions --data-dir and RG_DATA_DIR), or
 * any status of rg_dataset_idx(); *out is NULL then. */
RG_API RG_NODISCARD rg_status rg_dataset_fmnist(const char *dir, rg_split split, rg_dataset **out);

/* Loads an images file (IDX, N x H x W bytes) and a labels file (IDX, N bytes) into a dataset of
 * (N,1,H,W) images. Fails with RG_ECORRUPT when the counts differ or a label is not below
 * num_classes, and with any status of rg_idx_read() (idx.h). *out is owned by the caller, NULL on
 * failure. */
RG_API RG_NODISCARD
rg_status rg_dataset_idx(const char *images_path, const char *labels_path, int num_classes,
                         rg_dataset **out);

/* ---- synthetic data ---- */

typedef struct {
    int64_t n;       /* items */
    int64_t c, h, w; /* image shape; 0 means 1, 28, 28 */
    int num_classes; /* 0 means 10 */
    uint64_t seed;   /* the items: the same seed gives the same data, another seed other
                        items of the same classes (every seed shares the class patterns) */
    float noise;     /* 0..1: weight of the per-pixel noise; 0 means 0.5 */
    bool lazy;       /* keep no pixels: rg_dataset_item() (the loader's workers) makes each item,
                        the same bytes, when it is read; labels are made at once */
} rg_synthetic_opts;

/* The options of the synthetic set ringgrad-train uses for its --data synthetic: 60000 items for
 * the training split and 10000 for the test split, fewer when (c,h,w) images are large (at most
 * 512 MiB of training images, and a sixth of that for the test split), with seeds 1 (train) and
 * 2 (test); not lazy. Stops (RG_CHECK) on a shape that is not positive or over (1024, 65536,
 * 65536). */
RG_API rg_synthetic_opts rg_synthetic_split_opts(rg_split split, int64_t c, int64_t h, int64_t w,
                                                 int num_classes);

/* rg_dataset_synthetic() of rg_synthetic_split_opts(split, c, h, w, num_classes): in memory. */
RG_API RG_NODISCARD rg_status rg_dataset_synthetic_split(rg_split split, int64_t c, int64_t h,
                                                         int64_t w, int num_classes,
                                                         rg_dataset **out);

/* A learnable synthetic dataset: each class has its own smooth pattern (a plane wave with
 * class-dependent direction, frequency and phase, per channel; the same for every seed), and
 * each image is its class's
 * pattern mixed with per-pixel noise. Labels are uniform random. Item i depends only on (seed, i),
 * so the data does not depend on n or the thread count (only libm's sinf and the compiler's
 * floating-point contraction could move a pixel by one step between builds). *out is owned by the
 * caller; fails only with RG_ENOMEM. */
RG_API RG_NODISCARD rg_status rg_dataset_synthetic(const rg_synthetic_opts *opts, rg_dataset **out);

/* ---- image folders ---- */

typedef struct {
    int channels; /* 1 (grayscale) or 3 (RGB); images are converted; 0: the first image's (1 when
                     it is gray or gray+alpha, else 3) */
    int64_t h, w; /* eager: every image must have this size; lazy: the size the loader resizes
                     to; 0: the size of the first image */
    bool lazy;    /* index only (every header is checked); decode in the loader, batch by batch */
    /* Called every 1024 files while indexing and once at the end, with the count so far (for a
     * progress line); NULL: quiet. */
    void (*progress)(const char *root, int64_t files, bool done, void *arg);
    void *progress_arg;
} rg_image_folder_opts;

/* Loads root/<class>/<image> for every class folder in root, in sorted order (class k is the
 * k-th folder name, as torchvision's ImageFolder), and every .png/.jpg/.jpeg/.bmp/.tga/.pgm/.ppm
 * file in it (any case), sorted by name, then those of its subfolders, each in sorted order, as
 * deep as 16 levels (torchvision descends too); names starting with '.' are skipped. Returns
 * RG_ENOENT when root is missing; RG_ECORRUPT when there is no class folder, a class folder has
 * no image, folders go deeper than 16 levels (a looping link), or an image cannot be decoded,
 * has the wrong size (eager) or a header over the limits of image.h; RG_EIO when a file is
 * unreadable or not a regular file (a FIFO, a device); RG_ENOMEM when the decoded images would
 * not fit in memory (use lazy). Every message names the file. *out (with class_names set) is
 * owned by the caller, NULL on failure. */
RG_API RG_NODISCARD
rg_status rg_dataset_image_folder(const char *root, const rg_image_folder_opts *opts,
                                  rg_dataset **out);

/* Writes ds (limit > 0: `limit` of its items, the first limit / classes of each class and one
 * more of the first limit % classes, so that every class gets some; RG_EINVAL when limit is
 * below the number of classes) as an image folder of PNG files, the inverse of
 * rg_dataset_image_folder(): dir/<k>_<class name>/<i>.png, with k and i zero-padded so that the
 * sorted folders give back the labels and the sorted files the order ('/' and ' ' in a class name
 * become '-'; only "<k>" without names). Images must have 1 or 3 channels. Returns RG_EIO naming
 * the path when a folder or file cannot be written, or rg_dataset_item()'s statuses. */
RG_API RG_NODISCARD rg_status rg_dataset_write_image_folder(const rg_dataset *ds, const char *dir,
                                                            int64_t limit);

#ifdef __cplusplus
}
#endif

#endif
