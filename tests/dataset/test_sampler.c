/* Tests for the sampler: permutations are permutations and pure functions of (seed, epoch),
 * shards are disjoint, equal in size and cover every item (padding by wrap-around when N is not a
 * multiple of the world size), and no-shuffle keeps file order. */
#include <string.h>

#include "rgtest.h"

static int64_t *perm_of(int64_t n, uint64_t seed, uint64_t epoch) {
    int64_t *p = malloc((size_t)n * sizeof *p);
    rg_sampler_permutation(n, seed, epoch, p);
    return p;
}

static void assert_is_permutation(const int64_t *p, int64_t n) {
    char *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) {
        cr_assert(p[i] >= 0 && p[i] < n, "p[%lld] = %lld", (long long)i, (long long)p[i]);
        cr_assert(!seen[p[i]], "%lld appears twice", (long long)p[i]);
        seen[p[i]] = 1;
    }
    free(seen);
}

Test(dataset_sampler, permutation_is_a_pure_function_of_seed_and_epoch) {
    int64_t n = 1000;
    int64_t *a = perm_of(n, 1, 0), *b = perm_of(n, 1, 0), *c = perm_of(n, 1, 1),
            *d = perm_of(n, 2, 0);
    assert_is_permutation(a, n);
    assert_is_permutation(c, n);
    cr_assert_arr_eq(a, b, (size_t)n * sizeof *a, "same (seed, epoch), same order");
    cr_assert_neq(memcmp(a, c, (size_t)n * sizeof *a), 0, "epochs differ");
    cr_assert_neq(memcmp(a, d, (size_t)n * sizeof *a), 0, "seeds differ");
    int64_t fixed = 0;
    for (int64_t i = 0; i < n; i++) fixed += a[i] == i;
    cr_assert(fixed < 10, "%lld fixed points: hardly shuffled", (long long)fixed);
    free(a), free(b), free(c), free(d);
}

Test(dataset_sampler, every_item_is_equally_likely_everywhere) {
    /* over many epochs, item 0 lands in each of 8 positions about equally often */
    int64_t n = 8, hits[8] = {0}, p[8];
    for (uint64_t e = 0; e < 8000; e++) {
        rg_sampler_permutation(n, 5, e, p);
        for (int i = 0; i < 8; i++) hits[i] += p[i] == 0;
    }
    for (int i = 0; i < 8; i++)
        cr_assert(hits[i] > 850 && hits[i] < 1150, "position %d: %lld", i, (long long)hits[i]);
}

Test(dataset_sampler, tiny_datasets) {
    int64_t p[2];
    rg_sampler_permutation(1, 9, 3, p);
    cr_assert_eq(p[0], 0);
    rg_sampler_permutation(2, 9, 3, p);
    assert_is_permutation(p, 2);
}

/* All ranks' shards for one epoch: checks equal sizes, coverage and padding. */
static void check_shards(int64_t n, int world, bool shuffle) {
    int64_t len = (n + world - 1) / world, total = len * world;
    int64_t *count = calloc((size_t)n, sizeof *count), *idx = malloc((size_t)len * sizeof *idx);
    int64_t *scratch = malloc((size_t)n * sizeof *scratch);
    int64_t *order = perm_of(n, 11, 4);
    for (int r = 0; r < world; r++) {
        rg_sampler s;
        rg_sampler_init(&s, n, shuffle, 11, r, world);
        cr_assert_eq(rg_sampler_len(&s), len, "n %lld world %d", (long long)n, world);
        rg_sampler_indices(&s, 4, shuffle ? scratch : NULL, idx);
        for (int64_t t = 0; t < len; t++) {
            int64_t pos = (r + t * world) % n; /* torch's DistributedSampler layout */
            cr_assert_eq(idx[t], shuffle ? order[pos] : pos, "n %lld world %d rank %d t %lld",
                         (long long)n, world, r, (long long)t);
            count[idx[t]]++;
        }
    }
    /* every item at least once; exactly total - n of them (the first ones in the epoch's order)
     * twice, or more when the world is larger than n */
    int64_t extra = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_assert(count[i] >= 1, "item %lld missing (n %lld world %d)", (long long)i, (long long)n,
                  world);
        extra += count[i] - 1;
    }
    cr_assert_eq(extra, total - n);
    free(count), free(idx), free(scratch), free(order);
}

Test(dataset_sampler, shards_are_equal_disjoint_and_cover_everything) {
    int worlds[] = {1, 2, 3, 7};
    int64_t sizes[] = {1, 2, 5, 21, 100, 101, 1000, 1003};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            check_shards(sizes[s], worlds[w], true);
            check_shards(sizes[s], worlds[w], false);
        }
}

Test(dataset_sampler, divisible_shards_do_not_overlap) {
    int64_t n = 42, seen[42] = {0}, idx[14];
    int64_t scratch[42];
    for (int r = 0; r < 3; r++) {
        rg_sampler s;
        rg_sampler_init(&s, n, true, 1, r, 3);
        rg_sampler_indices(&s, 0, scratch, idx);
        for (int t = 0; t < 14; t++)
            cr_assert_eq(seen[idx[t]]++, 0, "item %lld twice", (long long)idx[t]);
    }
}

Test(dataset_sampler, no_shuffle_keeps_file_order) {
    rg_sampler s;
    rg_sampler_init(&s, 10, false, 123, 0, 1);
    int64_t idx[10];
    for (uint64_t e = 0; e < 3; e++) {
        rg_sampler_indices(&s, e, NULL, idx);
        for (int i = 0; i < 10; i++) cr_assert_eq(idx[i], i);
    }
}

Test(dataset_sampler, bad_rank_stops, .signal = SIGABRT) {
    rg_sampler s;
    rg_sampler_init(&s, 10, false, 0, 2, 2);
}

Test(dataset_sampler, shuffle_without_scratch_stops, .signal = SIGABRT) {
    rg_sampler s;
    int64_t idx[10];
    rg_sampler_init(&s, 10, true, 0, 0, 1);
    rg_sampler_indices(&s, 0, NULL, idx);
}
