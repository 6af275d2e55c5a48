/* synthetic.c — a deterministic, learnable synthetic dataset for tests and benchmarks.
 *
 * What it teaches: test data that a model can actually learn, made from a counter-based random
 * generator (Philox, core/kernels.h). Every byte is a pure function of (seed, item, pixel), so
 * the data is the same on every machine and thread count, and a subset never shifts when n
 * changes.
 *
 * Class k's pattern in channel ch is a plane wave 0.5 + 0.5 sin(2 pi (fx x + fy y) + phase) whose
 * direction is spread evenly over the classes; an image mixes its class's pattern with uniform
 * noise: pixel = 255 ((1 - noise) pattern + noise u). */
#include <math.h>
#include <stdlib.h>

#include "ringgrad/dataset.h"
#include "core/kernels.h"

/* Independent Philox streams for the three uses. */
#define STREAM_CLASS 0x636C617373ULL /* "class" */
#define STREAM_LABEL 0x6C6162656CULL /* "label" */
#define STREAM_PIXEL 0x706978656CULL /* "pixel" */

/* Fills pat (H,W) with class k's pattern in channel ch: a plane wave whose direction is k/K of
 * a half turn (plus a little jitter), so neighbouring classes differ by at least 180/K degrees. */
static void class_pattern(uint64_t seed, int k, int num_classes, int64_t ch, int64_t h, int64_t w,
                          float *pat) {
    rg_philox4 r = rg_philox(seed ^ STREAM_CLASS, (uint64_t)k * 1024u + (uint64_t)ch);
    float u0 = (float)(r.v[0] >> 8) / 16777216.0f, u1 = (float)(r.v[1] >> 8) / 16777216.0f;
    float u2 = (float)(r.v[2] >> 8) / 16777216.0f;
    float pi = 3.14159265358979f;
    float angle = pi * ((float)k + 0.25f * u0) / (float)num_classes;
    float cycles = 1.0f + 2.0f * u1; /* across the image */
    float fx = cycles * cosf(angle) / (float)w, fy = cycles * sinf(angle) / (float)h;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            pat[y * w + x] =
                0.5f + 0.5f * sinf(2 * pi * (fx * (float)x + fy * (float)y) + 2 * pi * u2);
}

/* Item i: a label, then each byte mixes the class pattern with a uniform number. One Philox call
 * gives four numbers, so item i uses counters i * ceil(size / 4) onwards. */
static void make_item(rg_dataset *ds, const float *patterns, uint64_t seed, float noise,
                      int64_t i) {
    int64_t size = rg_dataset_image_size(ds);
    rg_philox4 r = rg_philox(seed ^ STREAM_LABEL, (uint64_t)i);
    int k = (int)(r.v[0] % (uint32_t)ds->num_classes);
    ds->labels[i] = k;
    const float *pat = patterns + k * size;
    uint8_t *img = ds->images + i * size;
    uint64_t ctr = (uint64_t)i * (uint64_t)((size + 3) / 4);
    for (int64_t p = 0; p < size; p += 4) {
        r = rg_philox(seed ^ STREAM_PIXEL, ctr++);
        for (int64_t j = 0; j < 4 && p + j < size; j++) {
            float u = (float)(r.v[j] >> 8) / 16777216.0f;
            float v = (1.0f - noise) * pat[p + j] + noise * u; /* in [0, 1) */
            img[p + j] = (uint8_t)lrintf(v * 255.0f);
        }
    }
}

rg_status rg_dataset_synthetic(const rg_synthetic_opts *opts, rg_dataset **out) {
    RG_CHECK(opts && out, "rg_dataset_synthetic: NULL argument");
    rg_synthetic_opts o = *opts;
    if (!o.c) o.c = 1;
    if (!o.h) o.h = 28;
    if (!o.w) o.w = 28;
    if (!o.num_classes) o.num_classes = 10;
    if (o.noise == 0.0f) o.noise = 0.5f;
    RG_CHECK(o.noise >= 0.0f && o.noise <= 1.0f, "rg_dataset_synthetic: noise %g not in [0, 1]",
             (double)o.noise);
    RG_CHECK(o.c <= 1024, "rg_dataset_synthetic: %lld channels (at most 1024)", (long long)o.c);
    *out = NULL;
    rg_dataset *ds = rg_dataset_new(o.n, o.c, o.h, o.w, o.num_classes);
    if (!ds) return RG_ENOMEM;
    int64_t plane = o.h * o.w;
    float *patterns = malloc((size_t)(o.num_classes * o.c * plane) * sizeof *patterns);
    if (!patterns)
        return rg_dataset_free(ds), rg_error(RG_ENOMEM, "synthetic dataset: out of memory");
    for (int k = 0; k < o.num_classes; k++)
        for (int64_t ch = 0; ch < o.c; ch++)
            class_pattern(o.seed, k, o.num_classes, ch, o.h, o.w,
                          patterns + (k * o.c + ch) * plane);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < o.n; i++) make_item(ds, patterns, o.seed, o.noise, i);
    free(patterns);
    *out = ds;
    return RG_OK;
}

rg_status rg_dataset_synthetic_split(rg_split split, int64_t c, int64_t h, int64_t w,
                                     int num_classes, rg_dataset **out) {
    RG_CHECK(c > 0 && h > 0 && w > 0 && c <= 1024 && h <= 65536 && w <= 65536,
             "rg_dataset_synthetic_split: shape (%lld,%lld,%lld)", (long long)c, (long long)h,
             (long long)w);
    /* 60000/10000 as Fashion-MNIST, capped at 512 MiB of training images (and a sixth of
     * that for the test split), so ImageNet-shaped benchmarks fit in memory; at least 64 images
     * (a batch), but never more than 4 GiB of them (1x16384x16384 images: 16, not 64 = 17 GB) */
    int64_t image = c * h * w, train = (INT64_C(512) << 20) / image;
    int64_t floor = (INT64_C(4) << 30) / image;
    floor = floor > 64 ? 64 : floor < 1 ? 1 : floor;
    if (train > 60000) train = 60000;
    if (train < floor) train = floor;
    int64_t n = split == RG_SPLIT_TRAIN ? train : (train + 5) / 6;
    return rg_dataset_synthetic(&(rg_synthetic_opts){.n = n, .c = c, .h = h, .w = w,
                                                      .num_classes = num_classes,
                                                      .seed = split == RG_SPLIT_TRAIN ? 1 : 2},
                                out);
}
