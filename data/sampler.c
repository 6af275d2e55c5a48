/* sampler.c — seeded per-epoch permutations and equal-size shards (see sampler.h).
 *
 * What it teaches: distributed training needs no communication to agree on the data order;
 * every rank derives the same permutation from (seed, epoch) with a counter-based generator,
 * then keeps every world-th position. */
#include "ringgrad/sampler.h"

#include "core/kernels.h"
#include "ringgrad/status.h"

void rg_sampler_init(rg_sampler *s, int64_t n, bool shuffle, uint64_t seed, int rank, int world) {
    RG_CHECK(s, "rg_sampler_init: NULL sampler");
    RG_CHECK(n > 0, "rg_sampler_init: %lld items (need at least 1)", (long long)n);
    RG_CHECK(world > 0 && rank >= 0 && rank < world, "rg_sampler_init: rank %d of world %d", rank,
             world);
    *s = (rg_sampler){.n = n, .shuffle = shuffle, .seed = seed, .rank = rank, .world = world};
}

int64_t rg_sampler_len(const rg_sampler *s) {
    return (s->n + s->world - 1) / s->world;
}

/* SplitMix64's finaliser: a bijective 64-bit mix, here to fold (seed, epoch) into one key so
 * that nearby seeds and epochs give unrelated permutations. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, bound) from counter i: Lemire's multiply-shift on 64 random bits
 * (the bias, bound / 2^64, is far below anything measurable). */
static uint64_t draw_below(uint64_t key, uint64_t i, uint64_t bound) {
    rg_philox4 r = rg_philox(key, i);
    uint64_t bits = (uint64_t)r.v[0] << 32 | r.v[1];
    return (uint64_t)(((unsigned __int128)bits * bound) >> 64);
}

void rg_sampler_permutation(int64_t n, uint64_t seed, uint64_t epoch, int64_t *perm) {
    uint64_t key = mix64(seed ^ mix64(epoch + 0x9E3779B97F4A7C15ULL));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    /* Fisher-Yates: position i takes a uniform pick among the items not yet placed. */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)draw_below(key, (uint64_t)i, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void rg_sampler_indices(const rg_sampler *s, uint64_t epoch, int64_t *scratch, int64_t *idx) {
    RG_CHECK(!s->shuffle || scratch, "rg_sampler_indices: shuffling needs a scratch buffer");
    if (s->shuffle) rg_sampler_permutation(s->n, s->seed, epoch, scratch);
    /* Position p of the padded order (rg_sampler_len * world long) is position p mod n of the
     * epoch's order: the padding repeats the first items. */
    int64_t len = rg_sampler_len(s);
    for (int64_t t = 0; t < len; t++) {
        int64_t p = (s->rank + t * s->world) % s->n;
        idx[t] = s->shuffle ? scratch[p] : p;
    }
}
