/* Tests for augmentation and normalisation in the loader (data/transform.c, data/pool.c): the
 * random choices are a pure function of (seed, epoch, item), so a batch's contents do not depend
 * on the number of workers, on how items are split over ranks, or on whether the run was resumed;
 * flip-crop is exactly a zero-padded shift, maybe mirrored; rrc keeps constant images constant,
 * its evaluation transform is deterministic; normalisation is (x/255 - mean)/std. */
#include <math.h>
#include <string.h>

#include "rgtest.h"

static rg_dataset *synthetic(int64_t n, int64_t c, int64_t h, int64_t w) {
    rg_dataset *ds;
    rg_status s =
        rg_dataset_synthetic(&(rg_synthetic_opts){.n = n, .c = c, .h = h, .w = w, .seed = 5}, &ds);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    return ds;
}

/* Every item's tensor in `epoch` as the loader makes it: out[item] (C*H*W floats each), for the
 * items this rank visits; seen[item] is set for them. */
static void epoch_items(const rg_dataset *ds, rg_loader_opts o, int64_t epoch, float *out,
                        bool *seen) {
    rg_loader *l = rg_loader_new(ds, &o);
    cr_assert(l, "%s", rg_last_error());
    if (epoch) rg_loader_set_epoch(l, epoch);
    rg_sampler s;
    rg_sampler_init(&s, ds->n, o.shuffle, o.seed, o.rank, o.world ? o.world : 1);
    int64_t len = rg_sampler_len(&s), size = rg_dataset_image_size(ds);
    int64_t *idx = malloc((size_t)len * sizeof *idx), *scratch = malloc((size_t)ds->n * 8);
    rg_sampler_indices(&s, (uint64_t)epoch, scratch, idx);
    rg_batch b;
    int64_t pos = 0;
    while (rg_loader_next(l, &b)) {
        const float *x = b.x->data;
        for (int64_t i = 0; i < b.size; i++, pos++) {
            memcpy(out + idx[pos] * size, x + i * size, (size_t)size * sizeof(float));
            if (seen) seen[idx[pos]] = true;
        }
    }
    cr_assert_eq(pos, len);
    cr_assert_eq(rg_loader_status(l), RG_OK, "%s", rg_last_error());
    rg_loader_free(l);
    free(idx), free(scratch);
}

static void assert_same(const float *a, const float *b, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) cr_assert_fail("%s: float %lld differs: %g vs %g", what, (long long)i,
                                         (double)a[i], (double)b[i]);
}

Test(dataset_augment, workers_ranks_and_resume_give_the_same_items) {
    rg_dataset *ds = synthetic(53, 3, 12, 10);
    int64_t size = rg_dataset_image_size(ds), all = ds->n * size;
    for (int aug = RG_AUGMENT_FLIP_CROP; aug <= RG_AUGMENT_RRC; aug++) {
        rg_loader_opts o = {.batch = 8, .shuffle = true, .seed = 3, .augment = (rg_augment)aug};
        float *one = malloc((size_t)all * 4), *other = malloc((size_t)all * 4);
        epoch_items(ds, o, 2, one, NULL);
        /* 3 workers */
        rg_loader_opts w3 = o;
        w3.workers = 3;
        epoch_items(ds, w3, 2, other, NULL);
        assert_same(one, other, all, "3 workers vs 1");
        /* 3 ranks at batch 3: each item where a rank sees it equals the 1-rank item */
        memset(other, 0, (size_t)all * 4);
        bool *seen = calloc((size_t)ds->n, 1);
        for (int r = 0; r < 3; r++) {
            rg_loader_opts ro = o;
            ro.batch = 3, ro.rank = r, ro.world = 3, ro.workers = 2;
            epoch_items(ds, ro, 2, other, seen);
        }
        for (int64_t i = 0; i < ds->n; i++) cr_assert(seen[i], "item %lld unseen", (long long)i);
        assert_same(one, other, all, "3 ranks vs 1");
        /* a resumed run (a new loader set to epoch 2) was already checked by epoch_items; the
         * next epoch differs (fresh randomness) */
        epoch_items(ds, o, 3, other, NULL);
        bool differs = false;
        for (int64_t i = 0; i < all && !differs; i++) differs = one[i] != other[i];
        cr_assert(differs, "augment %d: epochs 2 and 3 are identical", aug);
        free(one), free(other), free(seen);
    }
    rg_dataset_free(ds);
}

/* Each flip-crop output is the source shifted by (dy, dx) in [-4, 4], mirrored or not, with zeros
 * outside; over many items, both mirrors and many shifts occur. */
Test(dataset_augment, flip_crop_is_a_padded_shift_and_flip) {
    rg_dataset *ds = synthetic(64, 1, 28, 28);
    int64_t H = 28, W = 28, size = H * W;
    float *out = malloc((size_t)(ds->n * size) * 4);
    epoch_items(ds, (rg_loader_opts){.batch = 16, .augment = RG_AUGMENT_FLIP_CROP, .seed = 9}, 0,
                out, NULL);
    int flips = 0, shifts[9][9] = {{0}};
    for (int64_t i = 0; i < ds->n; i++) {
        const uint8_t *src = ds->images + i * size;
        const float *y = out + i * size;
        int found = 0;
        for (int flip = 0; flip < 2 && !found; flip++)
            for (int dy = -4; dy <= 4 && !found; dy++)
                for (int dx = -4; dx <= 4 && !found; dx++) {
                    bool ok = true;
                    for (int64_t r = 0; r < H && ok; r++)
                        for (int64_t c = 0; c < W && ok; c++) {
                            int64_t sy = r + dy, sx = (flip ? W - 1 - c : c) + dx;
                            bool in = sy >= 0 && sy < H && sx >= 0 && sx < W;
                            float want = in ? (float)src[sy * W + sx] / 255.0f : 0.0f;
                            ok = y[r * W + c] == want;
                        }
                    if (ok) found = 1, flips += flip, shifts[dy + 4][dx + 4]++;
                }
        cr_assert(found, "item %lld is no padded shift of its source", (long long)i);
    }
    int distinct = 0;
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 9; b++) distinct += shifts[a][b] > 0;
    cr_assert(flips > 16 && flips < 48, "%d of 64 flipped", flips);
    cr_assert(distinct >= 20, "only %d distinct shifts in 64 items", distinct);
    free(out);
    rg_dataset_free(ds);
}

/* A constant image stays constant under any crop, resize and flip; normalisation is exact. */
Test(dataset_augment, rrc_keeps_constants_and_normalises) {
    rg_dataset *ds = rg_dataset_new(20, 3, 16, 16, 2);
    for (int64_t i = 0; i < ds->n; i++)
        for (int ch = 0; ch < 3; ch++)
            memset(ds->images + (i * 3 + ch) * 256, 40 + 60 * ch, 256);
    float mean[3] = {0.5f, 0.25f, 0.125f}, std[3] = {0.5f, 2.0f, 0.25f};
    for (int eval = 0; eval < 2; eval++) {
        float *out = malloc((size_t)(ds->n * 768) * 4);
        epoch_items(ds, (rg_loader_opts){.batch = 7, .augment = RG_AUGMENT_RRC, .eval = eval,
                                         .mean = mean, .std = std},
                    1, out, NULL);
        for (int64_t i = 0; i < ds->n; i++)
            for (int ch = 0; ch < 3; ch++) {
                float want = ((float)(40 + 60 * ch) / 255.0f - mean[ch]) * (1.0f / std[ch]);
                for (int p = 0; p < 256; p++)
                    cr_assert(fabsf(out[(i * 3 + ch) * 256 + p] - want) < 1e-5f,
                              "item %lld ch %d: %g, want %g", (long long)i, ch,
                              (double)out[(i * 3 + ch) * 256 + p], (double)want);
            }
        free(out);
    }
    rg_dataset_free(ds);
}

/* Evaluation transforms have no randomness: every epoch gives the same tensors; rrc-eval of a
 * horizontal ramp is still increasing left to right (no flip), and differs from the source
 * (it zooms in by 8/7). */
Test(dataset_augment, eval_transforms_are_deterministic) {
    rg_dataset *ds = rg_dataset_new(6, 1, 14, 14, 2);
    for (int64_t i = 0; i < ds->n; i++)
        for (int p = 0; p < 196; p++) ds->images[i * 196 + p] = (uint8_t)((p % 14) * 18);
    float *a = malloc(6 * 196 * 4), *b = malloc(6 * 196 * 4);
    rg_loader_opts o = {.batch = 4, .augment = RG_AUGMENT_RRC, .eval = true, .shuffle = true};
    epoch_items(ds, o, 0, a, NULL);
    epoch_items(ds, o, 5, b, NULL);
    assert_same(a, b, 6 * 196, "rrc eval, epochs 0 and 5");
    for (int x = 1; x < 14; x++) cr_assert(a[x] > a[x - 1], "column %d", x);
    cr_assert(a[0] > 0.0f && a[13] < 234.0f / 255.0f, "the centre crop zooms in");
    o.augment = RG_AUGMENT_FLIP_CROP; /* evaluation: the image itself */
    epoch_items(ds, o, 3, b, NULL);
    for (int p = 0; p < 6 * 196; p++) cr_assert_eq(b[p], (float)ds->images[p] / 255.0f);
    free(a), free(b);
    rg_dataset_free(ds);
}

/* fill_rank/fill_world: the batches a rank scores are exactly the full loader's; the others are
 * not prepared (their buffers keep what an earlier batch left). */
Test(dataset_augment, fill_world_prepares_only_this_ranks_batches) {
    rg_dataset *ds = synthetic(40, 1, 6, 6);
    rg_loader *all = rg_loader_new(ds, &(rg_loader_opts){.batch = 4, .prefetch = 1});
    rg_loader *mine = rg_loader_new(ds, &(rg_loader_opts){.batch = 4, .fill_rank = 1,
                                                          .fill_world = 3, .prefetch = 1});
    rg_batch a, b;
    int owned = 0;
    while (rg_loader_next(all, &a)) {
        cr_assert(rg_loader_next(mine, &b));
        cr_assert_eq(a.step, b.step);
        if (b.step % 3 != 1) continue;
        cr_assert(memcmp(a.x->data, b.x->data, 4 * 36 * 4) == 0, "step %lld", (long long)b.step);
        owned++;
    }
    cr_assert_eq(owned, 3);
    rg_loader_free(all), rg_loader_free(mine);
    rg_dataset_free(ds);
}
