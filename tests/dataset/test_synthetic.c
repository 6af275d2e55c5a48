/* Tests for the synthetic dataset: determinism from the seed, independence from n, the lazy set's
 * items equal to the in-memory set's bytes, label range and balance, and that it is learnable (a
 * nearest-class-mean classifier trained on some items labels unseen items far better than chance),
 * and of the same task for every seed (the test split's items are classified as well).
 */
#include <string.h>

#include "rgtest.h"

static rg_dataset *make(int64_t n, uint64_t seed, int64_t c, float noise) {
    rg_dataset *ds;
    rg_status s = rg_dataset_synthetic(
        &(rg_synthetic_opts){.n = n, .c = c, .seed = seed, .noise = noise}, &ds);
    cr_assert_eq(s, RG_OK, "%s", rg_last_error());
    return ds;
}

Test(dataset_synthetic, defaults_to_fashion_mnist_shapes) {
    rg_dataset *ds = make(10, 1, 0, 0);
    cr_assert(ds->n == 10 && ds->c == 1 && ds->h == 28 && ds->w == 28 && ds->num_classes == 10);
    rg_dataset_free(ds);
}

Test(dataset_synthetic, same_seed_same_data_and_prefix_stable) {
    rg_dataset *a = make(300, 42, 3, 0), *b = make(300, 42, 3, 0), *c = make(100, 42, 3, 0);
    rg_dataset *d = make(300, 43, 3, 0);
    size_t bytes = (size_t)(300 * rg_dataset_image_size(a));
    cr_assert_arr_eq(a->images, b->images, bytes);
    cr_assert_arr_eq(a->labels, b->labels, 300 * sizeof(int32_t));
    cr_assert_arr_eq(a->images, c->images, bytes / 3, "item i does not depend on n");
    cr_assert_arr_eq(a->labels, c->labels, 100 * sizeof(int32_t));
    cr_assert_neq(memcmp(a->images, d->images, bytes), 0, "another seed gives other images");
    cr_assert_neq(memcmp(a->labels, d->labels, 300 * sizeof(int32_t)), 0);
    rg_dataset_free(a), rg_dataset_free(b), rg_dataset_free(c), rg_dataset_free(d);
}

Test(dataset_synthetic, labels_are_in_range_and_balanced) {
    rg_dataset *ds = make(5000, 7, 1, 0);
    int64_t hist[10] = {0};
    for (int64_t i = 0; i < ds->n; i++) {
        cr_assert(ds->labels[i] >= 0 && ds->labels[i] < 10);
        hist[ds->labels[i]]++;
    }
    for (int k = 0; k < 10; k++)
        cr_assert(hist[k] > 400 && hist[k] < 600, "class %d has %lld of 5000", k,
                  (long long)hist[k]);
    rg_dataset_free(ds);
}

/* Accuracy on items [from, eval->n) of eval of the nearest class mean computed from items
 * [0, nfit) of fit. */
static double nearest_mean_accuracy_on(const rg_dataset *fit, int64_t nfit, const rg_dataset *eval,
                                       int64_t from) {
    int64_t size = rg_dataset_image_size(fit), k = fit->num_classes;
    double *mean = calloc((size_t)(k * size), sizeof *mean);
    int64_t *count = calloc((size_t)k, sizeof *count);
    for (int64_t i = 0; i < nfit; i++) {
        count[fit->labels[i]]++;
        for (int64_t p = 0; p < size; p++)
            mean[fit->labels[i] * size + p] += fit->images[i * size + p];
    }
    for (int64_t c = 0; c < k; c++)
        for (int64_t p = 0; p < size; p++) mean[c * size + p] /= (double)(count[c] ? count[c] : 1);
    int64_t right = 0;
    for (int64_t i = from; i < eval->n; i++) {
        int64_t best = -1;
        double best_d = 0;
        for (int64_t c = 0; c < k; c++) {
            double d = 0;
            for (int64_t p = 0; p < size; p++) {
                double e = eval->images[i * size + p] - mean[c * size + p];
                d += e * e;
            }
            if (best < 0 || d < best_d) best = c, best_d = d;
        }
        right += best == eval->labels[i];
    }
    free(mean), free(count);
    return (double)right / (double)(eval->n - from);
}

/* Accuracy on items [ntrain, n) of the nearest class mean computed from items [0, ntrain). */
static double nearest_mean_accuracy(const rg_dataset *ds, int64_t ntrain) {
    return nearest_mean_accuracy_on(ds, ntrain, ds, ntrain);
}

Test(dataset_synthetic, is_learnable_but_noisy) {
    rg_dataset *ds = make(3000, 3, 1, 0);
    double acc = nearest_mean_accuracy(ds, 2000);
    cr_assert(acc > 0.9, "nearest-class-mean accuracy %.3f", acc);
    /* the noise is real: images of one class differ from each other */
    int64_t i = 0, j = 1;
    while (ds->labels[j] != ds->labels[i]) j++;
    cr_assert_neq(memcmp(ds->images, ds->images + j * 784, 784), 0);
    rg_dataset_free(ds);
    /* and with pure noise there is nothing to learn */
    ds = make(3000, 3, 1, 1.0f);
    acc = nearest_mean_accuracy(ds, 2000);
    cr_assert(acc < 0.2, "pure noise gave accuracy %.3f", acc);
    rg_dataset_free(ds);
}

/* ringgrad-train's --data synthetic: Fashion-MNIST's split sizes at 28x28, capped at 512 MiB of
 * training images for ImageNet shapes, any channel and class count, train and test unlike. */
Test(dataset_synthetic, splits_for_any_shape) {
    /* lazy (the lazy_items tests show a lazy set the same bytes): in memory, the training split
     * at this shape would take 512 MiB and its 1000 class patterns 602 MB, too much for a unit
     * test under ASan */
    rg_dataset *te, *tr;
    rg_synthetic_opts o = rg_synthetic_split_opts(RG_SPLIT_TEST, 3, 224, 224, 1000);
    o.lazy = true;
    cr_assert_eq(rg_dataset_synthetic(&o, &te), RG_OK);
    cr_assert(te->n == 595, "%lld test images", (long long)te->n);
    cr_assert(te->c == 3 && te->h == 224 && te->w == 224 && te->num_classes == 1000);
    int64_t max_label = 0;
    for (int64_t i = 0; i < te->n; i++) max_label = te->labels[i] > max_label ? te->labels[i] : max_label;
    cr_assert(max_label > 900 && max_label < 1000, "labels reach %lld", (long long)max_label);
    rg_dataset_free(te);
    cr_assert_eq(rg_dataset_synthetic_split(RG_SPLIT_TRAIN, 1, 28, 28, 10, &tr), RG_OK);
    cr_assert_eq(rg_dataset_synthetic_split(RG_SPLIT_TEST, 1, 28, 28, 10, &te), RG_OK);
    cr_assert(tr->n == 60000 && te->n == 10000);
    cr_assert(memcmp(tr->images, te->images, 784) != 0, "train and test differ");
    rg_dataset_free(tr), rg_dataset_free(te);
}

/* The lazy set keeps no pixels, and makes each item's bytes, and the labels, as the in-memory set
 * holds them: images whose size is not a multiple of the four numbers a Philox call gives, read
 * in any order. */
Test(dataset_synthetic, lazy_items_are_the_in_memory_bytes) {
    rg_synthetic_opts o = {.n = 200, .c = 3, .h = 7, .w = 9, .num_classes = 13, .seed = 5};
    rg_dataset *mem, *lazy;
    cr_assert_eq(rg_dataset_synthetic(&o, &mem), RG_OK, "%s", rg_last_error());
    o.lazy = true;
    cr_assert_eq(rg_dataset_synthetic(&o, &lazy), RG_OK, "%s", rg_last_error());
    cr_assert(lazy->images == NULL && lazy->files == NULL && lazy->gen != NULL);
    cr_assert(lazy->n == 200 && lazy->c == 3 && lazy->h == 7 && lazy->w == 9 &&
              lazy->num_classes == 13);
    cr_assert_arr_eq(lazy->labels, mem->labels, 200 * sizeof(int32_t));
    int64_t size = rg_dataset_image_size(mem);
    for (int64_t j = 0; j < 200; j++) {
        int64_t i = (j * 37) % 200; /* out of order */
        rg_image a, b;
        cr_assert_eq(rg_dataset_item(lazy, i, &a), RG_OK, "%s", rg_last_error());
        cr_assert_eq(rg_dataset_item(mem, i, &b), RG_OK);
        cr_assert(a.c == 3 && a.h == 7 && a.w == 9 && a.px != b.px);
        cr_assert_arr_eq(a.px, b.px, (size_t)size, "item %lld", (long long)i);
        rg_dataset_item_release(lazy, &a), rg_dataset_item_release(mem, &b);
        cr_assert_null(a.px);
    }
    rg_dataset_free(lazy), rg_dataset_free(mem);
}

/* The split's options are what rg_dataset_synthetic_split makes, lazy or not: ImageNet's shape
 * and classes without their 512 MiB of images and 602 MB of class patterns. */
Test(dataset_synthetic, lazy_split_of_imagenet_shape) {
    rg_synthetic_opts o = rg_synthetic_split_opts(RG_SPLIT_TRAIN, 3, 224, 224, 1000);
    cr_assert(o.n == 3566 && o.seed == 1 && !o.lazy, "%lld images", (long long)o.n);
    o.lazy = true;
    rg_dataset *lazy;
    cr_assert_eq(rg_dataset_synthetic(&o, &lazy), RG_OK, "%s", rg_last_error());
    cr_assert(lazy->images == NULL && lazy->n == 3566 && lazy->num_classes == 1000);
    rg_image a;
    cr_assert_eq(rg_dataset_item(lazy, 3565, &a), RG_OK);
    cr_assert(a.c == 3 && a.h == 224 && a.w == 224);
    rg_dataset_item_release(lazy, &a);
    rg_dataset_free(lazy);
    o = rg_synthetic_split_opts(RG_SPLIT_TEST, 3, 224, 224, 1000);
    cr_assert(o.n == 595 && o.seed == 2);
}

/* Class patterns over the lazy set's limit (17 classes of 1x1024x1024, 68 MB) are made item by
 * item, and give the same bytes. */
Test(dataset_synthetic, lazy_items_without_stored_patterns) {
    rg_synthetic_opts o = {.n = 3, .h = 1024, .w = 1024, .num_classes = 17, .seed = 9};
    rg_dataset *mem, *lazy;
    cr_assert_eq(rg_dataset_synthetic(&o, &mem), RG_OK);
    o.lazy = true;
    cr_assert_eq(rg_dataset_synthetic(&o, &lazy), RG_OK);
    for (int64_t i = 0; i < 3; i++) {
        rg_image a;
        cr_assert_eq(rg_dataset_item(lazy, i, &a), RG_OK);
        cr_assert_arr_eq(a.px, mem->images + i * 1024 * 1024, 1024 * 1024, "item %lld",
                         (long long)i);
        rg_dataset_item_release(lazy, &a);
    }
    rg_dataset_free(lazy), rg_dataset_free(mem);
}

/* The splits are two samples of one task: the class means of 2,000 training items classify the
 * test split's items as well as other training items (when each seed drew its own class
 * patterns, the test split scored chance, 0.1-0.2, against 1.0 on the training split). */
Test(dataset_synthetic, test_split_shares_the_training_splits_classes) {
    rg_dataset *tr = make(2500, 1, 1, 0), *te = make(500, 2, 1, 0);
    double on_train = nearest_mean_accuracy(tr, 2000);
    double on_test = nearest_mean_accuracy_on(tr, 2000, te, 0);
    cr_assert(on_train > 0.9, "held-out training items: %.3f", on_train);
    cr_assert(on_test > on_train - 0.05, "test split %.3f against held-out training items %.3f",
              on_test, on_train);
    rg_dataset_free(tr), rg_dataset_free(te);
}
