/* transform_impl.h — one item's way from decoded bytes to the network's floats (data/transform.c):
 * resize or crop, flip, scale to [0, 1] and normalise, with the random choices of augmentation
 * drawn from (seed, epoch, item) only. Used by the loader's workers. */
#ifndef RG_TRANSFORM_IMPL_H
#define RG_TRANSFORM_IMPL_H

#include <stdint.h>

#include "ringgrad/image.h"
#include "ringgrad/loader.h"

typedef struct {
    rg_augment augment;
    bool eval;                                 /* the recipe's evaluation transform */
    int64_t c, h, w;                           /* the output (C,H,W) */
    float *mean, *inv_std;                     /* (C) each, owned: y = (x/255 - mean) * inv_std */
    uint64_t seed;
} rg_transform;

/* Sets up t from the loader's options for images of (c,h,w); false when memory runs out. */
bool rg_transform_init(rg_transform *t, const rg_loader_opts *o, int64_t c, int64_t h, int64_t w);
void rg_transform_deinit(rg_transform *t);

/* Writes item `item` of `epoch` (its decoded image `img`, of any size) as (t->c, t->h, t->w)
 * floats to dst. scratch holds t->c * t->h * t->w floats (for flip-crop of a resized image). */
void rg_transform_apply(const rg_transform *t, uint64_t epoch, int64_t item, const rg_image *img,
                        float *dst, float *scratch);

#endif
