/* image_folder.c — a dataset from root/<class>/<image> files, decoded with stb_image.
 *
 * What it teaches: the torchvision ImageFolder convention (class k is the k-th class folder in
 * sorted order, so the labels do not depend on the order the file system lists entries in), and
 * the layout change every image loader makes: decoders return interleaved pixels (H,W,C), while
 * the network wants planes (C,H,W).
 *
 * Two modes: eager decodes every image now into ds->images (small folders, tests); lazy checks
 * every file's header now (so a bad file is an error before training, naming it) and leaves the
 * decoding to the loader's workers, batch by batch (ImageNet-sized folders). Files are read by
 * data/image_io.c, which treats them as hostile input. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ringgrad/dataset.h"
#include "ringgrad/image.h"
#include "data/dataset_impl.h"

#define MAX_CLASSES 100000
/* Decoded images of an eager folder beyond this are refused (use lazy). */
#define EAGER_MAX_BYTES (INT64_C(1) << 36)

/* A growable list of strings. */
typedef struct {
    char **s;
    int64_t n, cap;
} str_list;

static bool list_push(str_list *l, const char *s) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->s, (size_t)cap * sizeof *p);
        if (!p) return false;
        l->s = p, l->cap = cap;
    }
    if (!(l->s[l->n] = strdup(s))) return false;
    l->n++;
    return true;
}

static void list_free(str_list *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    *l = (str_list){0};
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image_name(const char *name) {
    static const char *const exts[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".pgm", ".ppm"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i]) == 0) return true;
    return false;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether entry e of a folder, at path, is a folder: from the entry's type where the file system
 * gives it, so that indexing a folder of a million images makes no stat call per file; a
 * symbolic link or an unknown type is followed with stat. */
static bool entry_is_dir(const struct dirent *e, const char *path) {
#ifdef _DIRENT_HAVE_D_TYPE
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) return e->d_type == DT_DIR;
#endif
    return is_dir(path);
}

/* The sorted names in dir of its folders (into dirs) and, where files is not NULL, of its image
 * files, in one pass over the folder; hidden entries skipped. */
RG_NODISCARD static rg_status list_dir(const char *dir, str_list *files, str_list *dirs) {
    DIR *d = opendir(dir);
    if (!d) {
        rg_status s = errno == ENOENT || errno == ENOTDIR ? RG_ENOENT : RG_EIO;
        return rg_error(s, "%s: cannot open the folder: %s", dir, strerror(errno));
    }
    rg_status s = RG_OK;
    struct dirent *e;
    char path[4096];
    while (s == RG_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        str_list *to = entry_is_dir(e, path) ? dirs : is_image_name(e->d_name) ? files : NULL;
        if (to && !list_push(to, e->d_name)) s = rg_error(RG_ENOMEM, "%s: out of memory", dir);
    }
    closedir(d);
    for (int l = 0; l < 2; l++) {
        str_list *out = l ? dirs : files;
        if (out && out->n) qsort(out->s, (size_t)out->n, sizeof *out->s, cmp_str);
    }
    return s;
}

/* Folders below a class folder that are followed (torchvision's ImageFolder descends into them
 * too); deeper is an error, which also ends a symbolic link's loop. */
#define MAX_DEPTH 16

/* Appends the images under dir to paths: its own files in sorted order, then each subfolder's,
 * the subfolders in sorted order, depth levels down at most. */
RG_NODISCARD static rg_status collect_images(const char *dir, int depth, str_list *paths) {
    if (depth > MAX_DEPTH)
        return rg_error(RG_ECORRUPT,
                        "%s: more than %d folders deep inside a class folder (a "
                        "symbolic link that loops?)",
                        dir, MAX_DEPTH);
    str_list files = {0}, subs = {0};
    rg_status s = list_dir(dir, &files, &subs);
    char path[8192];
    for (int64_t i = 0; s == RG_OK && i < files.n; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, files.s[i]) >= (int)sizeof path)
            s = rg_error(RG_EINVAL, "%s/%s: path too long", dir, files.s[i]);
        else if (!list_push(paths, path))
            s = rg_error(RG_ENOMEM, "%s: out of memory", dir);
    }
    for (int64_t i = 0; s == RG_OK && i < subs.n; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, subs.s[i]) >= 4096)
            s = rg_error(RG_EINVAL, "%s/%s: path too long", dir, subs.s[i]);
        else
            s = collect_images(path, depth + 1, paths);
    }
    list_free(&files), list_free(&subs);
    return s;
}

/* Every image path under root, class by class; class k's images are paths[first[k] ..
 * first[k + 1]). Fails when there is no class or a class folder has no image. */
RG_NODISCARD
static rg_status collect(const char *root, str_list *classes, str_list *paths, int64_t **first) {
    RG_TRY(list_dir(root, NULL, classes));
    if (classes->n == 0)
        return rg_error(RG_ECORRUPT,
                        "%s: no class folders (expected %s/<class>/<image>.png, as torchvision's "
                        "ImageFolder)",
                        root, root);
    if (classes->n > MAX_CLASSES)
        return rg_error(RG_ECORRUPT, "%s: %" PRId64 " class folders (at most %d)", root, classes->n,
                        MAX_CLASSES);
    if (!(*first = malloc((size_t)(classes->n + 1) * sizeof **first)))
        return rg_error(RG_ENOMEM, "%s: out of memory", root);
    char dir[4096];
    for (int64_t k = 0; k < classes->n; k++) {
        (*first)[k] = paths->n;
        if (snprintf(dir, sizeof dir, "%s/%s", root, classes->s[k]) >= (int)sizeof dir)
            return rg_error(RG_EINVAL, "%s/%s: path too long", root, classes->s[k]);
        RG_TRY(collect_images(dir, 0, paths));
        if (paths->n == (*first)[k])
            return rg_error(RG_ECORRUPT,
                            "%s: class folder with no images (.png, .jpg, .jpeg, .bmp, .tga, "
                            ".pgm, .ppm); remove it or add images",
                            dir);
    }
    (*first)[classes->n] = paths->n;
    return RG_OK;
}

/* The channel count and size of the dataset: the caller's, or the first image's. */
RG_NODISCARD
static rg_status shape(const char *first, const rg_image_folder_opts *o, int64_t *c, int64_t *h,
                       int64_t *w) {
    int iw, ih, ic;
    RG_TRY(rg_image_info(first, &iw, &ih, &ic));
    *c = o->channels ? o->channels : ic <= 2 ? 1 : 3;
    if (o->h && o->w) *h = o->h, *w = o->w;
    else *h = ih, *w = iw;
    return RG_OK;
}

/* Decodes one image into (C,H,W) bytes at dst, checking its size. */
RG_NODISCARD static rg_status decode(const char *path, const rg_dataset *ds, uint8_t *dst) {
    rg_image img;
    RG_TRY(rg_image_load(path, (int)ds->c, &img));
    if (img.w != ds->w || img.h != ds->h) {
        int w = img.w, h = img.h;
        rg_image_deinit(&img);
        return rg_error(RG_ECORRUPT,
                        "%s: image is %dx%d (width x height), expected %" PRId64 "x%" PRId64
                        " like the others",
                        path, w, h, ds->w, ds->h);
    }
    memcpy(dst, img.px, (size_t)rg_dataset_image_size(ds));
    rg_image_deinit(&img);
    return RG_OK;
}

static void progress(const rg_image_folder_opts *o, const char *root, int64_t files, bool done) {
    if (o->progress && (done || files % 1024 == 0)) o->progress(root, files, done, o->progress_arg);
}

/* Eager: every image decoded now. */
RG_NODISCARD
static rg_status load_eager(const char *root, rg_dataset *ds, const rg_image_folder_opts *o,
                            const str_list *paths) {
    rg_status s = RG_OK;
    for (int64_t i = 0; s == RG_OK && i < ds->n; i++) {
        s = decode(paths->s[i], ds, ds->images + i * rg_dataset_image_size(ds));
        progress(o, root, i + 1, false);
    }
    return s;
}

/* Lazy: every header checked now; the paths move into ds->files. */
RG_NODISCARD
static rg_status index_lazy(const char *root, rg_dataset *ds, const rg_image_folder_opts *o,
                            str_list *paths) {
    for (int64_t i = 0; i < ds->n; i++) {
        int w, h, c;
        RG_TRY(rg_image_info(paths->s[i], &w, &h, &c));
        ds->files[i] = paths->s[i];
        paths->s[i] = NULL;
        progress(o, root, i + 1, false);
    }
    return RG_OK;
}

/* Builds the dataset from the collected paths and labels. */
RG_NODISCARD
static rg_status load_images(const char *root, const rg_image_folder_opts *o,
                             const str_list *classes, str_list *paths, const int64_t *first,
                             rg_dataset **out) {
    int64_t c = 0, h = 0, w = 0;
    RG_TRY(shape(paths->s[0], o, &c, &h, &w));
    if (!o->lazy && c * h * w > EAGER_MAX_BYTES / paths->n)
        return rg_error(RG_ENOMEM,
                        "%s: %" PRId64 " images of %" PRId64 "x%" PRId64 "x%" PRId64
                        " would not fit in memory decoded; load the folder lazily",
                        root, paths->n, c, h, w);
    rg_dataset *ds = o->lazy ? rg_dataset_new_lazy(paths->n, c, h, w, (int)classes->n)
                             : rg_dataset_new(paths->n, c, h, w, (int)classes->n);
    if (!ds) return RG_ENOMEM;
    rg_status s = rg_dataset_set_class_names(ds, (const char *const *)classes->s);
    for (int64_t k = 0; k < classes->n; k++)
        for (int64_t i = first[k]; i < first[k + 1]; i++) ds->labels[i] = (int32_t)k;
    if (s == RG_OK) s = o->lazy ? index_lazy(root, ds, o, paths) : load_eager(root, ds, o, paths);
    if (s != RG_OK) return rg_dataset_free(ds), s;
    progress(o, root, ds->n, true);
    *out = ds;
    return RG_OK;
}

rg_status rg_dataset_image_folder(const char *root, const rg_image_folder_opts *opts,
                                  rg_dataset **out) {
    RG_CHECK(root && out, "rg_dataset_image_folder: NULL root or output");
    rg_image_folder_opts o = opts ? *opts : (rg_image_folder_opts){0};
    RG_CHECK(o.channels == 0 || o.channels == 1 || o.channels == 3,
             "rg_dataset_image_folder: %d channels (1 or 3)", o.channels);
    RG_CHECK(o.h >= 0 && o.w >= 0 && (o.h > 0) == (o.w > 0) && o.h <= RG_IMAGE_MAX_SIDE &&
                 o.w <= RG_IMAGE_MAX_SIDE,
             "rg_dataset_image_folder: give both h and w (at most %d), or neither",
             RG_IMAGE_MAX_SIDE);
    *out = NULL;
    str_list classes = {0}, paths = {0};
    int64_t *first = NULL;
    rg_status s = collect(root, &classes, &paths, &first);
    if (s == RG_OK) s = load_images(root, &o, &classes, &paths, first, out);
    list_free(&classes);
    list_free(&paths);
    free(first);
    return s;
}
