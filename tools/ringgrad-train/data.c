/* data.c — ringgrad-train's datasets and their loader options: Fashion-MNIST, synthetic data and
 * image folders (torchvision's ImageFolder layout), augmentation, normalisation and workers. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

/* Per-channel statistics of x/255 of well-known datasets. */
static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};
static const float fmnist_mean[1] = {0.2860f}, fmnist_std[1] = {0.3530f};

/* "Indexing ROOT/train: N images" lines on rank 0 while a big folder is indexed. */
static void index_progress(const char *root, int64_t files, bool done, void *arg) {
    const trainer *t = arg;
    if (t->rank != 0 || (!done && files % 16384 != 0)) return;
    printf("indexing %s: %lld images%s\n", root, (long long)files, done ? "" : " ...");
    fflush(stdout);
}

/* ROOT/train and ROOT/val; val must have the same classes and is read at train's shape. */
RG_NODISCARD static rg_status load_image_folder(trainer *t) {
    char train[4096], val[4096];
    snprintf(train, sizeof train, "%s/train", t->a.data_dir);
    snprintf(val, sizeof val, "%s/val", t->a.data_dir);
    rg_image_folder_opts o = {.channels = t->a.channels, .h = t->a.image_size,
                              .w = t->a.image_size, .lazy = true, .progress = index_progress,
                              .progress_arg = t};
    RG_TRY(rg_dataset_image_folder(train, &o, &t->train_ds));
    o.channels = (int)t->train_ds->c, o.h = t->train_ds->h, o.w = t->train_ds->w;
    RG_TRY(rg_dataset_image_folder(val, &o, &t->test_ds));
    /* both lists are sorted: walk them together to the first folder that only one of them has
     * (labels are positions in these lists, so they must be the same lists) */
    const rg_dataset *a = t->train_ds, *b = t->test_ds;
    int i = 0, j = 0;
    while (i < a->num_classes && j < b->num_classes &&
           strcmp(a->class_names[i], b->class_names[j]) == 0)
        i++, j++;
    if (i == a->num_classes && j == b->num_classes) return RG_OK;
    int c = i == a->num_classes   ? 1
            : j == b->num_classes ? -1
                                  : strcmp(a->class_names[i], b->class_names[j]);
    return rg_error(RG_EMISMATCH,
                    "%s has %d class folders and %s has %d: '%s' is only in %s; both need the "
                    "same classes (the labels are their positions in sorted order)",
                    train, a->num_classes, val, b->num_classes,
                    c < 0 ? a->class_names[i] : b->class_names[j], c < 0 ? train : val);
}

/* Parses --normalize for c channels into t->mean and t->std (NULL for none). */
RG_NODISCARD static rg_status parse_normalize(trainer *t, int64_t c) {
    const char *spec = t->a.normalize;
    if (strcmp(spec, "none") == 0) return RG_OK;
    t->mean = calloc((size_t)c, sizeof *t->mean);
    t->std = calloc((size_t)c, sizeof *t->std);
    if (!t->mean || !t->std) return rg_error(RG_ENOMEM, "--normalize: out of memory");
    const float *m = NULL, *s = NULL;
    int64_t known = 0;
    if (strcmp(spec, "imagenet") == 0) m = imagenet_mean, s = imagenet_std, known = 3;
    if (strcmp(spec, "fmnist") == 0) m = fmnist_mean, s = fmnist_std, known = 1;
    if (m) {
        if (known != c)
            return rg_error(RG_EINVAL, "--normalize %s is for %lld-channel images, these have %lld",
                            spec, (long long)known, (long long)c);
        memcpy(t->mean, m, (size_t)c * sizeof *m), memcpy(t->std, s, (size_t)c * sizeof *s);
        return RG_OK;
    }
    double v[2 * 1024];
    int64_t n = 0;
    for (const char *p = spec; *p && n < 2 * 1024;) {
        char *end;
        errno = 0;
        v[n] = strtod(p, &end);
        if (end == p || errno || !isfinite(v[n])) break;
        n++, p = end;
        if (*p == ',') p++;
        else if (*p) { n = -1; break; }
    }
    if (n != 2 && n != 2 * c)
        return rg_error(RG_EINVAL,
                        "--normalize '%s': expected none, imagenet, fmnist, MEAN,STD or %lld means "
                        "then %lld stds, comma-separated", spec, (long long)c, (long long)c);
    for (int64_t k = 0; k < c; k++) {
        t->mean[k] = (float)v[n == 2 ? 0 : k];
        t->std[k] = (float)v[n == 2 ? 1 : c + k];
        if (!(t->std[k] > 0)) return rg_error(RG_EINVAL, "--normalize '%s': std must be > 0", spec);
    }
    return RG_OK;
}

/* The largest synthetic training split kept in memory, bytes. */
#define SYNTHETIC_IN_MEMORY (INT64_C(64) << 20)

rg_status trainer_setup_data(trainer *t) {
    rg_status st;
    if (strcmp(t->a.data, "synthetic") == 0) {
        int64_t c = t->a.channels ? t->a.channels : 1, s = t->a.image_size ? t->a.image_size : 28;
        int k = t->a.num_classes ? t->a.num_classes : 10;
        rg_synthetic_opts tr = rg_synthetic_split_opts(RG_SPLIT_TRAIN, c, s, s, k),
                          te = rg_synthetic_split_opts(RG_SPLIT_TEST, c, s, s, k);
        /* Large images are made as the loader reads them, not all at start: a 224 px set is
         * 512 MiB a rank and took most of a short run's start-up. Small ones (Fashion-MNIST's
         * shape: 47 MB) stay in memory, made once rather than every epoch. */
        tr.lazy = te.lazy = tr.n * c * s * s > SYNTHETIC_IN_MEMORY;
        st = rg_dataset_synthetic(&tr, &t->train_ds);
        if (st == RG_OK) st = rg_dataset_synthetic(&te, &t->test_ds);
    } else if (strcmp(t->a.data, "imagefolder") == 0) {
        st = load_image_folder(t);
    } else {
        const char *dir = t->a.data_dir ? t->a.data_dir : rg_data_default_dir();
        st = rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &t->train_ds);
        if (st == RG_OK) st = rg_dataset_fmnist(dir, RG_SPLIT_TEST, &t->test_ds);
    }
    if (st == RG_OK) st = parse_normalize(t, t->train_ds->c);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    RG_TRY(trainer_agree(t, st));
    /* the sampler shards the same order on every rank: the sets must be the same size */
    RG_TRY(guard_agree_i64(t, "the number of training images", t->train_ds->n));
    return guard_agree_i64(t, "the number of test images", t->test_ds->n);
}

rg_loader_opts trainer_loader_opts(const trainer *t, bool train) {
    rg_augment aug = strcmp(t->a.augment, "flip-crop") == 0 ? RG_AUGMENT_FLIP_CROP
                     : strcmp(t->a.augment, "rrc") == 0     ? RG_AUGMENT_RRC
                                                            : RG_AUGMENT_NONE;
    int workers = t->a.workers;
    if (!workers) {
        bool busy = aug != RG_AUGMENT_NONE || !t->train_ds->images;
        workers = !busy ? 1 : t->threads < 4 ? t->threads : 4;
    }
    return (rg_loader_opts){.seed = (uint64_t)t->a.seed, .workers = workers > 0 ? workers : 1,
                            .augment = aug, .eval = !train, .mean = t->mean, .std = t->std};
}

rg_status trainer_check_loaders(trainer *t) {
    rg_status st = rg_loader_status(t->train);
    if (st == RG_OK) st = rg_loader_status(t->test);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    return trainer_agree(t, st);
}
