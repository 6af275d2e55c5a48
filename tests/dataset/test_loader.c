/* Tests for the loader: every batch holds exactly the dataset items the sampler names, in order
 * (so prefetching neither reorders nor corrupts), scaled by 1/255; partial last batches,
 * drop_last, set_epoch, shards, many epochs, and freeing with the prefetch thread mid-epoch (run
 * under ASan for leaks and races on freed memory). */
#include <string.h>
#include <unistd.h>

#include "rgtest.h"

static rg_dataset *synthetic(int64_t n, int64_t c, int64_t h, int64_t w) {
    rg_dataset *ds;
    rg_status s =
        rg_dataset_synthetic(&(rg_synthetic_opts){.n = n, .c = c, .h = h, .w = w, .seed = 17}, &ds);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    return ds;
}

/* Asserts that b holds items idx[0 .. b->size) of ds. */
static void assert_batch_is(const rg_dataset *ds, const rg_batch *b, const int64_t *idx) {
    int64_t size = rg_dataset_image_size(ds);
    cr_assert_eq(b->x->dtype, RG_F32);
    cr_assert_eq(b->y->dtype, RG_I64);
    cr_assert(b->x->ndim == 4 && b->x->shape[0] == b->size && b->x->shape[1] == ds->c &&
              b->x->shape[2] == ds->h && b->x->shape[3] == ds->w);
    cr_assert(b->y->ndim == 1 && b->y->shape[0] == b->size);
    const float *x = b->x->data;
    const int64_t *y = b->y->data;
    for (int64_t i = 0; i < b->size; i++) {
        cr_assert_eq(y[i], ds->labels[idx[i]], "epoch %lld step %lld item %lld: label",
                     (long long)b->epoch, (long long)b->step, (long long)i);
        for (int64_t p = 0; p < size; p++)
            if (x[i * size + p] != (float)ds->images[idx[i] * size + p] / 255.0f)
                cr_assert_fail("epoch %lld step %lld item %lld byte %lld: got %g, want %d/255",
                               (long long)b->epoch, (long long)b->step, (long long)i, (long long)p,
                               (double)x[i * size + p], ds->images[idx[i] * size + p]);
    }
}

/* Runs one epoch and checks it against the sampler: steps, sizes, order and contents. */
static void check_epoch(rg_loader *l, const rg_dataset *ds, const rg_loader_opts *o,
                        int64_t epoch) {
    rg_sampler s;
    int world = o->world ? o->world : 1;
    rg_sampler_init(&s, ds->n, o->shuffle, o->seed, o->rank, world);
    int64_t len = rg_sampler_len(&s);
    int64_t *idx = malloc((size_t)len * sizeof *idx),
            *scratch = malloc((size_t)ds->n * sizeof *idx);
    rg_sampler_indices(&s, (uint64_t)epoch, scratch, idx);
    int64_t steps = o->drop_last ? len / o->batch : (len + o->batch - 1) / o->batch;
    cr_assert_eq(rg_loader_steps_per_epoch(l), steps);
    cr_assert_eq(rg_loader_epoch(l), epoch);
    rg_batch b;
    int64_t step = 0;
    while (rg_loader_next(l, &b)) {
        cr_assert(step < steps, "more than %lld batches", (long long)steps);
        int64_t want = len - step * o->batch < o->batch ? len - step * o->batch : o->batch;
        cr_assert_eq(b.size, want, "step %lld", (long long)step);
        cr_assert_eq(b.step, step);
        cr_assert_eq(b.epoch, epoch);
        assert_batch_is(ds, &b, idx + step * o->batch);
        step++;
    }
    cr_assert_eq(step, steps, "epoch %lld had %lld batches, want %lld", (long long)epoch,
                 (long long)step, (long long)steps);
    cr_assert_eq(rg_loader_epoch(l), epoch + 1, "the next epoch starts by itself");
    free(idx), free(scratch);
}

static void check_epochs(const rg_dataset *ds, rg_loader_opts o, int epochs) {
    rg_loader *l = rg_loader_new(ds, &o);
    cr_assert_not_null(l, "%s", rg_last_error());
    for (int e = 0; e < epochs; e++) check_epoch(l, ds, &o, e);
    rg_loader_free(l);
}

Test(dataset_loader, batches_are_the_sampled_items_in_order) {
    rg_dataset *ds = synthetic(1000, 2, 3, 5);
    check_epochs(ds, (rg_loader_opts){.batch = 64, .shuffle = true, .seed = 3}, 3);
    check_epochs(ds, (rg_loader_opts){.batch = 100, .shuffle = true, .seed = 4, .prefetch = 1}, 2);
    check_epochs(ds, (rg_loader_opts){.batch = 7, .shuffle = true, .seed = 5, .prefetch = 8}, 2);
    rg_dataset_free(ds);
}

/* A lazy synthetic set, its items made by the loader's workers, gives the batches of the same set
 * in memory, bit for bit, over epochs and with several workers. */
Test(dataset_loader, lazy_synthetic_set_gives_the_in_memory_batches) {
    rg_synthetic_opts so = {.n = 333, .c = 3, .h = 11, .w = 10, .seed = 17};
    rg_dataset *mem, *lazy;
    cr_assert_eq(rg_dataset_synthetic(&so, &mem), RG_OK);
    so.lazy = true;
    cr_assert_eq(rg_dataset_synthetic(&so, &lazy), RG_OK);
    rg_loader_opts o = {.batch = 32, .shuffle = true, .seed = 8, .workers = 3};
    rg_loader *a = rg_loader_new(mem, &o), *b = rg_loader_new(lazy, &o);
    cr_assert(a && b, "%s", rg_last_error());
    int64_t size = rg_dataset_image_size(mem), steps = 0;
    for (int e = 0; e < 2; e++) {
        rg_batch x, y;
        while (rg_loader_next(a, &x)) {
            cr_assert(rg_loader_next(b, &y), "the lazy loader ends early");
            cr_assert_eq(x.size, y.size);
            cr_assert_arr_eq(x.x->data, y.x->data, (size_t)(x.size * size) * sizeof(float),
                             "epoch %d step %lld", e, (long long)x.step);
            cr_assert_arr_eq(x.y->data, y.y->data, (size_t)x.size * sizeof(int64_t));
            steps++;
        }
        cr_assert(!rg_loader_next(b, &y), "the lazy loader runs on");
    }
    cr_assert_eq(steps, 2 * 11);
    cr_assert_eq(rg_loader_status(b), RG_OK);
    rg_loader_free(a), rg_loader_free(b);
    rg_dataset_free(mem), rg_dataset_free(lazy);
}

Test(dataset_loader, no_shuffle_batch_i_holds_items_iB_to_iB_plus_B) {
    rg_dataset *ds = synthetic(300, 1, 28, 28);
    rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = 128});
    int64_t idx[128];
    rg_batch b;
    for (int64_t i = 0; rg_loader_next(l, &b); i++) {
        for (int64_t k = 0; k < b.size; k++) idx[k] = i * 128 + k;
        assert_batch_is(ds, &b, idx);
        cr_assert_eq(b.size, i < 2 ? 128 : 300 - 256, "the last partial batch is kept");
    }
    rg_loader_free(l);
    rg_dataset_free(ds);
}

Test(dataset_loader, shards_of_all_ranks) {
    rg_dataset *ds = synthetic(1001, 1, 4, 4);
    for (int world = 2; world <= 7; world += 5)
        for (int r = 0; r < world; r++) {
            check_epochs(ds,
                         (rg_loader_opts){
                             .batch = 32, .shuffle = true, .seed = 9, .rank = r, .world = world},
                         2);
            check_epochs(
                ds, (rg_loader_opts){.batch = 32, .rank = r, .world = world, .drop_last = true}, 1);
        }
    rg_dataset_free(ds);
}

Test(dataset_loader, drop_last_drops_only_the_partial_batch) {
    rg_dataset *ds = synthetic(1000, 1, 2, 2);
    rg_loader_opts o = {.batch = 64, .shuffle = true, .drop_last = true};
    rg_loader *l = rg_loader_new(ds, &o);
    cr_assert_eq(rg_loader_steps_per_epoch(l), 15);
    rg_batch b;
    int64_t n = 0;
    while (rg_loader_next(l, &b)) {
        cr_assert_eq(b.size, 64);
        n++;
    }
    cr_assert_eq(n, 15);
    rg_loader_free(l);
    /* divisible: nothing to drop */
    l = rg_loader_new(ds, &(rg_loader_opts){.batch = 100, .drop_last = true});
    cr_assert_eq(rg_loader_steps_per_epoch(l), 10);
    rg_loader_free(l);
    /* a batch larger than the data: one partial batch, or none with drop_last */
    check_epochs(ds, (rg_loader_opts){.batch = 4096, .shuffle = true}, 2);
    l = rg_loader_new(ds, &(rg_loader_opts){.batch = 4096, .drop_last = true});
    cr_assert_eq(rg_loader_steps_per_epoch(l), 0);
    cr_assert(!rg_loader_next(l, &b) && !rg_loader_next(l, &b));
    cr_assert_eq(rg_loader_epoch(l), 2);
    rg_loader_free(l);
    rg_dataset_free(ds);
}

Test(dataset_loader, set_epoch_restarts_from_that_epoch) {
    rg_dataset *ds = synthetic(500, 1, 3, 3);
    rg_loader_opts o = {.batch = 50, .shuffle = true, .seed = 2};
    rg_loader *l = rg_loader_new(ds, &o);
    rg_batch b;
    cr_assert(rg_loader_next(l, &b) && rg_loader_next(l, &b)); /* two batches into epoch 0 */
    rg_loader_set_epoch(l, 5);
    check_epoch(l, ds, &o, 5);
    rg_loader_set_epoch(l, 6); /* the current epoch with nothing taken: a no-op */
    check_epoch(l, ds, &o, 6);
    rg_loader_set_epoch(l, 2); /* back in time is fine too */
    check_epoch(l, ds, &o, 2);
    cr_assert(rg_loader_next(l, &b));
    rg_loader_set_epoch(l, 3); /* restart the epoch in progress */
    check_epoch(l, ds, &o, 3);
    rg_loader_free(l);
    rg_dataset_free(ds);
}

Test(dataset_loader, many_epochs_with_a_slow_and_a_fast_consumer) {
    rg_dataset *ds = synthetic(200, 1, 5, 5);
    rg_loader_opts o = {.batch = 16, .shuffle = true, .seed = 8, .prefetch = 3};
    rg_loader *l = rg_loader_new(ds, &o);
    for (int e = 0; e < 100; e++) check_epoch(l, ds, &o, e);
    rg_batch b;
    for (int i = 0; i < 5 && rg_loader_next(l, &b); i++) usleep(2000); /* the ring fills up */
    rg_loader_set_epoch(l, 100);
    check_epoch(l, ds, &o, 100);
    rg_loader_free(l);
    rg_dataset_free(ds);
}

Test(dataset_loader, free_mid_epoch_stops_the_thread) {
    rg_dataset *ds = synthetic(4000, 1, 28, 28);
    for (int trial = 0; trial < 30; trial++) {
        rg_loader *l = rg_loader_new(
            ds, &(rg_loader_opts){.batch = 64, .shuffle = true, .prefetch = 1 + trial % 4});
        rg_batch b;
        for (int i = 0; i < trial % 3; i++) cr_assert(rg_loader_next(l, &b));
        if (trial % 5 == 0) usleep(1000); /* let the producer fill the ring and sleep */
        rg_loader_free(l);                /* with the thread filling, or asleep */
    }
    rg_loader_free(NULL);
    rg_dataset_free(ds);
}

Test(dataset_loader, batch_buffers_are_reused_not_reallocated) {
    rg_dataset *ds = synthetic(1000, 1, 8, 8);
    rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = 10, .prefetch = 2});
    void *seen[3] = {0};
    int nseen = 0;
    rg_batch b;
    while (rg_loader_next(l, &b)) {
        bool known = false;
        for (int i = 0; i < nseen; i++) known |= seen[i] == b.x->data;
        if (!known) {
            cr_assert(nseen < 3, "more batch buffers than prefetch + 1");
            seen[nseen++] = b.x->data;
        }
    }
    rg_loader_free(l);
    rg_dataset_free(ds);
}

Test(dataset_loader, zero_batch_size_stops, .signal = SIGABRT) {
    rg_dataset *ds = synthetic(10, 1, 2, 2);
    rg_loader_new(ds, &(rg_loader_opts){.batch = 0});
}

Test(dataset_loader, rank_outside_world_stops, .signal = SIGABRT) {
    rg_dataset *ds = synthetic(10, 1, 2, 2);
    rg_loader_new(ds, &(rg_loader_opts){.batch = 2, .rank = 3, .world = 2});
}
