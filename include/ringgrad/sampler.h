/* sampler.h — which dataset items a rank visits in an epoch, and in what order.
 *
 * Shuffling: the epoch's order is a permutation that is a pure function of (seed, epoch), made by
 * a Fisher-Yates shuffle driven by Philox (core/kernels.h), so every rank computes the same
 * permutation without talking to the others, and a rerun gives the same order on any machine.
 *
 * Sharding (as PyTorch's DistributedSampler): the permutation is padded by wrapping around to
 * total = ceil(N / world) * world items, and rank r takes positions r, r + world, r + 2 world, ...
 * The shards are disjoint apart from the padding, cover every item, and all have ceil(N / world)
 * items, so every rank runs the same number of steps (a rank that ran one step fewer would leave
 * the others waiting in an allreduce forever).
 *
 * Without shuffling the order is the file order: with world 1, position i is item i. */
#ifndef RG_SAMPLER_H
#define RG_SAMPLER_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A caller-owned value: fill it with rg_sampler_init(); nothing to free. */
typedef struct {
    /* public: options */
    int64_t n;     /* dataset items */
    bool shuffle;  /* false: file order */
    uint64_t seed; /* with the epoch, names the permutation */
    int rank;      /* this process's shard, in [0, world) */
    int world;     /* number of shards */
} rg_sampler;

/* Sets up a sampler over n items. Stops (RG_CHECK) unless n > 0 and 0 <= rank < world. */
RG_API
void rg_sampler_init(rg_sampler *s, int64_t n, bool shuffle, uint64_t seed, int rank, int world);

/* Items per rank per epoch: ceil(n / world). */
RG_API int64_t rg_sampler_len(const rg_sampler *s);

/* Writes this rank's rg_sampler_len(s) item indices for `epoch` into idx, in visiting order.
 * scratch holds s->n int64s for the permutation when shuffling (NULL is fine otherwise); the
 * caller provides it so that a loader allocates once, not every epoch. */
RG_API void rg_sampler_indices(const rg_sampler *s, uint64_t epoch, int64_t *scratch, int64_t *idx);

/* The full permutation of [0, n) for (seed, epoch): perm[i] is the item at position i. */
RG_API void rg_sampler_permutation(int64_t n, uint64_t seed, uint64_t epoch, int64_t *perm);

#ifdef __cplusplus
}
#endif

#endif
