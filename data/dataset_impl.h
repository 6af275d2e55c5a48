/* dataset_impl.h — what the dataset sources in data/ share: the two kinds of lazy dataset.
 *
 * A lazy dataset keeps labels but no pixels (ds->images is NULL); rg_dataset_item() makes item i
 * when it is read, from a file (ds->files, the image folder) or from a generator (ds->gen, the
 * synthetic set). */
#ifndef RG_DATASET_IMPL_H
#define RG_DATASET_IMPL_H

#include "ringgrad/dataset.h"

/* A generator: make writes item i's (C,H,W) bytes into px (the dataset's shape); release frees
 * the generator itself (rg_dataset_free calls it). Sources embed this as their struct's first
 * member. make must be safe to call from several threads at once. */
struct rg_dataset_gen {
    rg_status (*make)(const struct rg_dataset_gen *g, int64_t i, uint8_t *px);
    void (*release)(struct rg_dataset_gen *g);
};

/* A lazy dataset of n items: labels (zero) and a table of n file names (NULL, filled by the
 * caller), no pixels. NULL with rg_last_error() set when memory runs out. */
rg_dataset *rg_dataset_new_lazy(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes);

/* A lazy dataset of n items made by gen (owned from here on, released on failure too): labels
 * (zero, filled by the caller), no pixels. NULL with rg_last_error() set when memory runs out. */
rg_dataset *rg_dataset_new_generated(int64_t n, int64_t c, int64_t h, int64_t w, int num_classes,
                                     struct rg_dataset_gen *gen);

#endif
