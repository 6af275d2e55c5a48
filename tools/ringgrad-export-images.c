/* ringgrad-export-images — writes Fashion-MNIST out as an ImageFolder of PNG files, so that the
 * whole image path (--data imagefolder: indexing, decoding, augmentation) runs on real data with
 * no network:
 *
 *   ringgrad-export-images [--data-dir DIR] [--limit N] OUT
 *       OUT/train/<k>_<class>/<i>.png   (60000 files)      OUT/val/<k>_<class>/<i>.png (10000)
 *   ringgrad-train --data imagefolder --data-dir OUT --channels 1 ...
 *
 * Class folders are "0_T-shirt-top" ... "9_Ankle-boot" (torchvision's FashionMNIST class names,
 * numbered so that their sorted order keeps the labels). --limit N writes the first N/10 images
 * of each class (the first N in file order left some class folders empty, which ImageFolder
 * refuses). A split folder that already holds files is refused: writing over an earlier, larger
 * export left its extra images in place, and the folder then held more than --limit asked for. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringgrad.h"

static int usage(const char *msg) {
    if (msg) fprintf(stderr, "ringgrad-export-images: %s\n", msg);
    fprintf(msg ? stderr : stdout,
            "Usage: ringgrad-export-images [--data-dir DIR] [--limit N] OUT\n"
            "Writes Fashion-MNIST (from DIR, default $RG_DATA_DIR or "
            "/usr/share/datasets/fashion-mnist)\nas PNG files in OUT/train/<class>/ and "
            "OUT/val/<class>/; --limit N writes N images of each\nsplit only: the first ones of "
            "each class, N/10 of each (N >= 10). OUT/train and OUT/val must be empty or absent.\n");
    return msg ? 2 : 0;
}

/* Whether path is a folder with anything in it (false when it does not exist). */
static bool non_empty_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    bool any = false;
    for (struct dirent *e; !any && (e = readdir(d));)
        any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return any;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    long long limit = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) return usage(NULL);
        if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) dir = argv[++i];
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            char *end;
            limit = strtoll(argv[++i], &end, 10);
            if (*end || limit <= 0) return usage("--limit needs a positive whole number");
        } else if (argv[i][0] == '-') {
            char msg[300];
            snprintf(msg, sizeof msg, "%s '%.200s'",
                     strcmp(argv[i], "--data-dir") == 0 || strcmp(argv[i], "--limit") == 0
                         ? "a value is missing after"
                         : "unknown option",
                     argv[i]);
            return usage(msg);
        } else if (out)
            return usage("more than one output folder");
        else out = argv[i];
    }
    if (!out) return usage("no output folder");
    if (!dir) dir = rg_data_default_dir();
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "ringgrad-export-images: error: %s: cannot create: %s\n", out,
                strerror(errno));
        return 1;
    }
    static const char *const split_dir[RG_SPLIT_COUNT] = {"train", "val"};
    for (int split = 0; split < RG_SPLIT_COUNT; split++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", out, split_dir[split]);
        if (non_empty_folder(path)) {
            fprintf(stderr,
                    "ringgrad-export-images: error: %s is not empty (an earlier export?): remove "
                    "it, or write to another folder\n",
                    path);
            return 1;
        }
    }
    for (int split = 0; split < RG_SPLIT_COUNT; split++) {
        rg_dataset *ds = NULL;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", out, split_dir[split]);
        rg_status st = rg_dataset_fmnist(dir, (rg_split)split, &ds);
        if (st == RG_OK) st = rg_dataset_write_image_folder(ds, path, limit);
        if (st != RG_OK) {
            fprintf(stderr, "ringgrad-export-images: error: %s\n", rg_last_error());
            rg_dataset_free(ds);
            return 1;
        }
        printf("%s: %lld images in %d classes\n", path,
               (long long)(limit > 0 && limit < ds->n ? limit : ds->n), ds->num_classes);
        rg_dataset_free(ds);
    }
    return 0;
}
