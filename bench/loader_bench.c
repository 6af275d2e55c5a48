/* loader_bench — how fast the data path delivers batches, with nothing else running.
 *
 *   build/bin/loader_bench [--data-dir DIR] [--batch 128] [--epochs 5] [--prefetch 2]
 * [--synthetic]
 *   build/bin/loader_bench --image-folder ROOT [--batch 128] [--epochs 5] [--batches 40]
 *                          [--augment none|flip-crop|rrc]
 *
 * With --image-folder (a lazy ImageFolder, e.g. written by ringgrad-export-images), each round
 * times the first --batches batches with 1 worker and then with 2 (interleaved, so drift on a
 * shared machine hits both alike), and prints the medians over --epochs rounds and their ratio.
 *
 * Prints the time to load Fashion-MNIST's train split (gunzip + checks), then images/s delivered
 * by rg_loader_next per epoch (shuffled, batch 128 by default) and their median. The consumer only
 * reads one float per batch, so this is the loader's ceiling; training runs far below it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/args.h"
#include "ringgrad.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* images/s of the first `batches` batches of a fresh loader with `workers` workers. */
static double folder_rate(const rg_dataset *ds, int64_t batch, int workers, int64_t batches,
                          rg_augment aug, double *sink) {
    rg_loader *l = rg_loader_new(ds, &(rg_loader_opts){.batch = batch, .shuffle = true, .seed = 1,
                                                       .workers = workers, .augment = aug});
    if (!l) return fprintf(stderr, "%s\n", rg_last_error()), -1;
    rg_batch b;
    int64_t images = 0, n = 0;
    double t = now();
    while (n < batches && rg_loader_next(l, &b)) {
        *sink += ((const float *)b.x->data)[b.size - 1];
        images += b.size, n++;
    }
    double rate = (double)images / (now() - t);
    rg_loader_free(l);
    return rate;
}

static int bench_folder(const char *root, int64_t batch, int rounds, int64_t batches,
                        rg_augment aug) {
    rg_dataset *ds;
    double t0 = now();
    if (rg_dataset_image_folder(root, &(rg_image_folder_opts){.lazy = true}, &ds) != RG_OK)
        return fprintf(stderr, "%s\n", rg_last_error()), 1;
    printf("index %-28s %8.3f s  (%lld images of %lldx%lldx%lld)\n", root, now() - t0,
           (long long)ds->n, (long long)ds->c, (long long)ds->h, (long long)ds->w);
    double *rate[2] = {malloc((size_t)rounds * sizeof(double)),
                       malloc((size_t)rounds * sizeof(double))}, sink = 0;
    for (int r = 0; r < rounds; r++)
        for (int w = 0; w < 2; w++) {
            rate[w][r] = folder_rate(ds, batch, w + 1, batches, aug, &sink);
            printf("round %d: %d worker%s %14.0f images/s\n", r, w + 1, w ? "s" : " ", rate[w][r]);
        }
    qsort(rate[0], (size_t)rounds, sizeof(double), cmp_double);
    qsort(rate[1], (size_t)rounds, sizeof(double), cmp_double);
    double m1 = rate[0][rounds / 2], m2 = rate[1][rounds / 2];
    printf("median: 1 worker %.0f, 2 workers %.0f images/s, ratio %.2f  (checksum %g)\n", m1, m2,
           m2 / m1, sink);
    free(rate[0]), free(rate[1]);
    rg_dataset_free(ds);
    return 0;
}

static rg_augment augment_named(const char *prog, const char *v, const char *usage) {
    if (!strcmp(v, "rrc")) return RG_AUGMENT_RRC;
    if (!strcmp(v, "flip-crop")) return RG_AUGMENT_FLIP_CROP;
    if (strcmp(v, "none"))
        bench_usage_error(prog, "--augment takes none, flip-crop or rrc, not", v, usage);
    return RG_AUGMENT_NONE;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *folder = NULL;
    int64_t batches = 40;
    rg_augment aug = RG_AUGMENT_NONE;
    int64_t batch = 128;
    int epochs = 5, prefetch = 2, synthetic = 0;
    static const char usage[] =
        "usage: loader_bench [--data-dir DIR] [--batch 128] [--epochs 5] [--prefetch 2] "
        "[--synthetic]\n"
        "                    [--image-folder ROOT [--batches 40] [--augment none|flip-crop|rrc]]\n";
    const char *prog = "loader_bench";
    bench_help(argc, argv, usage);
#define VALUE() bench_value(prog, argc, argv, &i, usage)
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--synthetic"))
            synthetic = 1;
        else if (!strcmp(k, "--data-dir"))
            dir = VALUE();
        else if (!strcmp(k, "--batch"))
            batch = bench_int(prog, k, VALUE(), 1, 1 << 20);
        else if (!strcmp(k, "--epochs"))
            epochs = (int)bench_int(prog, k, VALUE(), 1, 1000);
        else if (!strcmp(k, "--prefetch"))
            prefetch = (int)bench_int(prog, k, VALUE(), 0, 64);
        else if (!strcmp(k, "--image-folder"))
            folder = VALUE();
        else if (!strcmp(k, "--batches"))
            batches = bench_int(prog, k, VALUE(), 1, INT64_C(1) << 40);
        else if (!strcmp(k, "--augment"))
            aug = augment_named(prog, VALUE(), usage);
        else
            bench_usage_error(prog, "unknown option", k, usage);
    }
#undef VALUE
    if (folder) return bench_folder(folder, batch, epochs, batches > 0 ? batches : 1, aug);
    rg_dataset *ds;
    double t0 = now();
    rg_status s = synthetic ? rg_dataset_synthetic(&(rg_synthetic_opts){.n = 60000, .seed = 1}, &ds)
                            : rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &ds);
    if (s != RG_OK) return fprintf(stderr, "%s\n", rg_last_error()), 1;
    printf("%-34s %8.3f s  (%lld images of %lldx%lldx%lld)\n",
           synthetic ? "generate synthetic (60000)" : "load fashion-mnist train", now() - t0,
           (long long)ds->n, (long long)ds->c, (long long)ds->h, (long long)ds->w);

    rg_loader *l = rg_loader_new(
        ds, &(rg_loader_opts){.batch = batch, .shuffle = true, .seed = 1, .prefetch = prefetch});
    if (!l) return fprintf(stderr, "%s\n", rg_last_error()), 1;
    double *rate = malloc((size_t)epochs * sizeof *rate), sink = 0;
    for (int e = 0; e < epochs; e++) {
        rg_batch b;
        int64_t images = 0;
        double t = now();
        while (rg_loader_next(l, &b)) {
            sink += ((const float *)b.x->data)[b.size - 1];
            images += b.size;
        }
        rate[e] = (double)images / (now() - t);
        printf("epoch %d: batch %lld, prefetch %d %14.0f images/s\n", e, (long long)batch, prefetch,
               rate[e]);
    }
    qsort(rate, (size_t)epochs, sizeof *rate, cmp_double);
    printf("median %27s %14.0f images/s  (checksum %g)\n", "", rate[epochs / 2], sink);
    free(rate);
    rg_loader_free(l);
    rg_dataset_free(ds);
    return 0;
}
