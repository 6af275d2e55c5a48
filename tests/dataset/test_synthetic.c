/* Tests for the synthetic dataset: determinism from the seed, independence from n, label range
 * and balance, and that it is learnable (a nearest-class-mean classifier trained on some items
 * labels unseen items far better than chance). */
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

/* Accuracy on items [ntrain, n) of the nearest class mean computed from items [0, ntrain). */
static double nearest_mean_accuracy(const rg_dataset *ds, int64_t ntrain) {
    int64_t size = rg_dataset_image_size(ds), k = ds->num_classes;
    double *mean = calloc((size_t)(k * size), sizeof *mean);
    int64_t *count = calloc((size_t)k, sizeof *count);
    for (int64_t i = 0; i < ntrain; i++) {
        count[ds->labels[i]]++;
        for (int64_t p = 0; p < size; p++)
            mean[ds->labels[i] * size + p] += ds->images[i * size + p];
    }
    for (int64_t c = 0; c < k; c++)
        for (int64_t p = 0; p < size; p++) mean[c * size + p] /= (double)(count[c] ? count[c] : 1);
    int64_t right = 0;
    for (int64_t i = ntrain; i < ds->n; i++) {
        int64_t best = -1;
        double best_d = 0;
        for (int64_t c = 0; c < k; c++) {
            double d = 0;
            for (int64_t p = 0; p < size; p++) {
                double e = ds->images[i * size + p] - mean[c * size + p];
                d += e * e;
            }
            if (best < 0 || d < best_d) best = c, best_d = d;
        }
        right += best == ds->labels[i];
    }
    free(mean), free(count);
    return (double)right / (double)(ds->n - ntrain);
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
    /* the test split only (a sixth of the 3,566 capped training images): the training split
     * at this shape would take 512 MiB, too much for a unit test under ASan */
    rg_dataset *te, *tr;
    cr_assert_eq(rg_dataset_synthetic_split(RG_SPLIT_TEST, 3, 224, 224, 1000, &te), RG_OK);
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
