/* loader_bench — how fast the data path delivers batches, with nothing else running.
 *
 *   build/bin/loader_bench [--data-dir DIR] [--batch 128] [--epochs 5] [--prefetch 2]
 * [--synthetic]
 *
 * Prints the time to load Fashion-MNIST's train split (gunzip + checks), then images/s delivered
 * by rg_loader_next per epoch (shuffled, batch 128 by default) and their median. The consumer only
 * reads one float per batch, so this is the loader's ceiling; training runs far below it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int main(int argc, char **argv) {
    const char *dir = NULL;
    int64_t batch = 128;
    int epochs = 5, prefetch = 2, synthetic = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data-dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc)
            prefetch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--synthetic"))
            synthetic = 1;
        else
            return fprintf(stderr,
                           "usage: %s [--data-dir DIR] [--batch B] [--epochs E] "
                           "[--prefetch P] [--synthetic]\n",
                           argv[0]),
                   2;
    }
    if (batch <= 0 || epochs <= 0 || epochs > 1000 || prefetch < 0 || prefetch > 64)
        return fprintf(stderr, "bad option value\n"), 2;
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
