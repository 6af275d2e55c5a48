/* loader.h — batches for the training loop, prepared ahead by a background thread.
 *
 *   rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = 128, .shuffle = true, .seed = 1});
 *   for (int epoch = 0; epoch < epochs; epoch++) {
 *       rg_loader_set_epoch(l, epoch);   (optional: epochs follow one another anyway)
 *       rg_batch b;
 *       while (rg_loader_next(l, &b)) { ... model(b.x), loss(b.y) ... }
 *   }
 *   rg_loader_free(l);
 *
 * The order comes from the sampler (sampler.h): a permutation per (seed, epoch) and, under data
 * parallelism, this rank's equal-size shard of it (the dist module sets .rank and .world). A
 * prefetch thread converts bytes to float32 batches into a small ring of buffers while the model
 * computes on the current one; it sleeps when the ring is full and never busy-waits. With
 * .workers > 1 it shares each batch's items with a pool of worker threads (decoding a lazy
 * dataset's files, augmenting).
 *
 * Batches live in host memory. A device backend can add pinned buffers and asynchronous copies
 * behind this interface later (the training loop copies b.x to the device for now). */
#ifndef RG_LOADER_H
#define RG_LOADER_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/dataset.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rg_loader rg_loader;

/* Augmentation recipes (data/transform.c). Random choices depend only on (seed, epoch, item), so
 * N ranks see exactly what 1 rank sees, and a resumed run continues exactly. */
typedef enum {
    RG_AUGMENT_NONE,      /* the image as it is (resized to the dataset's (H,W) if needed:
                             shorter side fitted, centre crop) */
    RG_AUGMENT_FLIP_CROP, /* CIFAR: pad 4 with zeros, random (H,W) crop, horizontal flip;
                             evaluation: none */
    RG_AUGMENT_RRC,       /* ImageNet: RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3) + flip;
                             evaluation: Resize(S*8/7) + CenterCrop(S) */
    RG_AUGMENT_COUNT
} rg_augment;

/* Zero-initialised fields take their defaults, so a compound literal names only what it changes. */
typedef struct {
    /* public: options; a zero field takes its default */
    int64_t batch;  /* items per batch on this rank; required (> 0) */
    bool shuffle;   /* a new permutation every epoch; false keeps file order */
    uint64_t seed;  /* names the permutations (with the epoch) */
    int rank;       /* this rank's shard; 0 without data parallelism */
    int world;      /* number of ranks; 0 means 1 */
    bool drop_last; /* drop the last batch of an epoch when it is smaller than `batch` */
    int prefetch;   /* batches the thread prepares ahead of the one in use; 0 means 2 */
    int workers;    /* threads that decode and augment a batch's items; 0 means 1 (the
                       prefetch thread alone); more overlap the decoding of lazy datasets */
    rg_augment augment; /* RG_AUGMENT_NONE by default */
    bool eval;          /* apply the recipe's evaluation transform (deterministic) */
    const float *mean;  /* (C) per-channel mean of x/255 to subtract, or NULL: 0 */
    const float *std;   /* (C) per-channel std to divide by, or NULL: 1 (values > 0) */
    /* Evaluation split by batch index: with fill_world > 1, only batches whose step %
     * fill_world == fill_rank are prepared; the others are handed out with undefined contents
     * (for a caller that skips them), so N ranks do not all decode every image. */
    int fill_rank, fill_world;
} rg_loader_opts;

/* One batch. The tensors are long-lived and belong to the loader: they stay valid until the next
 * rg_loader_next(), rg_loader_set_epoch() or rg_loader_free() on this loader. Never free them or
 * keep them across steps (copy what you need). */
typedef struct {
    /* read-only: written by rg_loader_next */
    rg_tensor *x;  /* (B,C,H,W) float32: (bytes / 255 - mean) / std, after augmentation */
    rg_tensor *y;  /* (B) int64 class labels */
    int64_t size;  /* B: opts.batch, or fewer for the last batch of an epoch */
    int64_t step;  /* batch index within the epoch, from 0 */
    int64_t epoch; /* the epoch the batch belongs to */
} rg_batch;

/* A loader over ds (which must outlive it and not change), starting at epoch 0; its thread starts
 * preparing the first batches at once. Stops (RG_CHECK) on bad options (batch <= 0, rank outside
 * [0, world), prefetch < 0). Returns NULL with rg_last_error() set when memory or the thread
 * cannot be had. The caller frees it with rg_loader_free(). */
RG_API rg_loader *rg_loader_new(const rg_dataset *ds, const rg_loader_opts *opts);

/* Fills *b with the epoch's next batch and returns true, or returns false at the end of the epoch
 * (then the next call starts the following epoch). Blocks only while the batch is not ready yet. */
RG_API bool rg_loader_next(rg_loader *l, rg_batch *b);

/* Makes `epoch` the current epoch from its first batch, as PyTorch's sampler.set_epoch(). A no-op
 * when that epoch is current and no batch of it has been taken; otherwise the epoch in progress
 * is abandoned (the batch last returned becomes invalid). */
RG_API void rg_loader_set_epoch(rg_loader *l, int64_t epoch);

/* RG_OK, or the first error met while preparing batches (a lazy dataset's file that cannot be
 * decoded: the item is delivered as zeros and training goes on), with rg_last_error() set to its
 * message naming the file. Check it after each epoch. */
RG_API RG_NODISCARD rg_status rg_loader_status(rg_loader *l);

/* The epoch that rg_loader_next() takes batches from. */
RG_API int64_t rg_loader_epoch(const rg_loader *l);

/* Batches per epoch on this rank: ceil(len / batch), or floor with drop_last, where
 * len = ceil(N / world) is the rank's shard size. The same on every rank. */
RG_API int64_t rg_loader_steps_per_epoch(const rg_loader *l);

/* Stops the prefetch thread (also in the middle of an epoch) and frees the batch buffers. The
 * dataset is not freed. NULL is a no-op. */
RG_API void rg_loader_free(rg_loader *l);

#ifdef __cplusplus
}
#endif

#endif
