/* synthetic.c — a deterministic, learnable synthetic dataset for tests and benchmarks.
 *
 * What it teaches: test data that a model can actually learn, made from a counter-based random
 * generator (Philox, core/kernels.h). Every byte is a pure function of (seed, item, pixel), so
 * the data is the same on every machine and thread count, and a subset never shifts when n
 * changes.
 *
 * Class k's pattern in channel ch is a plane wave 0.5 + 0.5 sin(2 pi (fx x + fy y) + phase) whose
 * direction is spread evenly over the classes; an image mixes its class's pattern with uniform
 * noise: pixel = 255 ((1 - noise) pattern + noise u).
 *
 * The seed picks the items (their labels and noise), not the task: every seed shares the class
 * patterns, so that the training split (seed 1) and the test split (seed 2) are two samples of one
 * task and the test accuracy means something. (The patterns were once drawn from the seed too,
 * and a model that learned the training split scored chance on the test split.) They are the ones
 * seed 1 used to draw, so the training split kept its bytes. */
#include <math.h>
#include <stdlib.h>

#include "ringgrad/dataset.h"
#include "core/kernels.h"
#include "data/dataset_impl.h"

/* Independent Philox streams for the three uses. */
#define STREAM_CLASS 0x636C617373ULL /* "class" */
#define STREAM_LABEL 0x6C6162656CULL /* "label" */
#define STREAM_PIXEL 0x706978656CULL /* "pixel" */
#define PATTERN_SEED 1                /* the class patterns' seed, for every split (above) */

/* Fills pat (H,W) with class k's pattern in channel ch: a plane wave whose direction is k/K of
 * a half turn (plus a little jitter), so neighbouring classes differ by at least 180/K degrees. */
static void class_pattern(int k, int num_classes, int64_t ch, int64_t h, int64_t w, float *pat) {
    rg_philox4 r = rg_philox(PATTERN_SEED ^ STREAM_CLASS, (uint64_t)k * 1024u + (uint64_t)ch);
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

/* Item i's label. */
static int32_t item_label(uint64_t seed, int num_classes, int64_t i) {
    rg_philox4 r = rg_philox(seed ^ STREAM_LABEL, (uint64_t)i);
    return (int32_t)(r.v[0] % (uint32_t)num_classes);
}

/* Item i's pixels (size bytes): each byte mixes its class's pattern pat with a uniform number.
 * One Philox call gives four numbers, so item i uses counters i * ceil(size / 4) onwards. */
static void item_pixels(const float *pat, int64_t size, uint64_t seed, float noise, int64_t i,
                        uint8_t *img) {
    uint64_t ctr = (uint64_t)i * (uint64_t)((size + 3) / 4);
    rg_philox4 r;
    for (int64_t p = 0; p < size; p += 4) {
        r = rg_philox(seed ^ STREAM_PIXEL, ctr++);
        for (int64_t j = 0; j < 4 && p + j < size; j++) {
            float u = (float)(r.v[j] >> 8) / 16777216.0f;
            float v = (1.0f - noise) * pat[p + j] + noise * u; /* in [0, 1) */
            img[p + j] = (uint8_t)lrintf(v * 255.0f);
        }
    }
}

/* Class k's pattern in every channel: (C, H, W) floats into pat. */
static void class_planes(const rg_synthetic_opts *o, int k, float *pat) {
    for (int64_t ch = 0; ch < o->c; ch++)
        class_pattern(k, o->num_classes, ch, o->h, o->w, pat + ch * o->h * o->w);
}

/* The class patterns, (num_classes, C, H, W) floats; NULL when memory runs out. */
static float *all_patterns(const rg_synthetic_opts *o) {
    int64_t size = o->c * o->h * o->w;
    float *patterns = malloc((size_t)(o->num_classes * size) * sizeof *patterns);
    for (int k = 0; patterns && k < o->num_classes; k++) class_planes(o, k, patterns + k * size);
    return patterns;
}

/* The lazy set's generator: the options, and the class patterns when they are small. */
typedef struct {
    struct rg_dataset_gen gen; /* first: the dataset holds a pointer to it */
    rg_synthetic_opts o;
    float *patterns; /* NULL: each item computes its class's pattern */
} synthetic_gen;

/* The most pattern bytes a lazy set keeps (10 classes of 3x224x224 take 6 MB, 1000 classes 602). */
#define LAZY_PATTERNS_MAX (INT64_C(64) << 20)

static rg_status synthetic_make(const struct rg_dataset_gen *g, int64_t i, uint8_t *px) {
    const synthetic_gen *sg = (const synthetic_gen *)g;
    const rg_synthetic_opts *o = &sg->o;
    int64_t size = o->c * o->h * o->w;
    int32_t k = item_label(o->seed, o->num_classes, i);
    if (sg->patterns) {
        item_pixels(sg->patterns + k * size, size, o->seed, o->noise, i, px);
        return RG_OK;
    }
    float *pat = malloc((size_t)size * sizeof *pat);
    if (!pat) return rg_error(RG_ENOMEM, "synthetic dataset: out of memory for a class pattern");
    class_planes(o, k, pat);
    item_pixels(pat, size, o->seed, o->noise, i, px);
    free(pat);
    return RG_OK;
}

static void synthetic_release(struct rg_dataset_gen *g) {
    synthetic_gen *sg = (synthetic_gen *)g;
    free(sg->patterns);
    free(sg);
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
    RG_CHECK(o.num_classes > 0, "rg_dataset_synthetic: %d classes", o.num_classes);
    RG_CHECK(o.c <= 1024, "rg_dataset_synthetic: %lld channels (at most 1024)", (long long)o.c);
    *out = NULL;
    RG_CHECK(o.n > 0 && o.c > 0 && o.h > 0 && o.w > 0,
             "rg_dataset_synthetic: %lld items of (%lld,%lld,%lld)", (long long)o.n, (long long)o.c,
             (long long)o.h, (long long)o.w);
    int64_t size = o.c * o.h * o.w;
    bool keep = !o.lazy || size <= LAZY_PATTERNS_MAX / (int64_t)sizeof(float) / o.num_classes;
    float *patterns = keep ? all_patterns(&o) : NULL;
    if (keep && !patterns) return rg_error(RG_ENOMEM, "synthetic dataset: out of memory");
    rg_dataset *ds;
    if (o.lazy) {
        synthetic_gen *g = malloc(sizeof *g);
        if (!g) return free(patterns), rg_error(RG_ENOMEM, "synthetic dataset: out of memory");
        *g = (synthetic_gen){.gen = {.make = synthetic_make, .release = synthetic_release},
                             .o = o,
                             .patterns = patterns};
        ds = rg_dataset_new_generated(o.n, o.c, o.h, o.w, o.num_classes, &g->gen);
        if (!ds) return RG_ENOMEM; /* g and the patterns released */
        for (int64_t i = 0; i < o.n; i++) ds->labels[i] = item_label(o.seed, o.num_classes, i);
    } else {
        ds = rg_dataset_new(o.n, o.c, o.h, o.w, o.num_classes);
        if (!ds) return free(patterns), RG_ENOMEM;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < o.n; i++) {
            int32_t k = item_label(o.seed, o.num_classes, i);
            ds->labels[i] = k;
            item_pixels(patterns + k * size, size, o.seed, o.noise, i, ds->images + i * size);
        }
        free(patterns);
    }
    *out = ds;
    return RG_OK;
}

rg_synthetic_opts rg_synthetic_split_opts(rg_split split, int64_t c, int64_t h, int64_t w,
                                          int num_classes) {
    RG_CHECK(c > 0 && h > 0 && w > 0 && c <= 1024 && h <= 65536 && w <= 65536,
             "rg_synthetic_split_opts: shape (%lld,%lld,%lld)", (long long)c, (long long)h,
             (long long)w);
    /* 60000/10000 as Fashion-MNIST, capped at 512 MiB of training images (and a sixth of
     * that for the test split), so ImageNet-shaped benchmarks fit in memory; at least 64 images
     * (a batch), but never more than 4 GiB of them (1x16384x16384 images: 16, not 64 = 17 GB) */
    int64_t image = c * h * w, train = (INT64_C(512) << 20) / image;
    int64_t floor = (INT64_C(4) << 30) / image;
    floor = floor > 64 ? 64 : floor < 1 ? 1 : floor;
    if (train > 60000) train = 60000;
    if (train < floor) train = floor;
    return (rg_synthetic_opts){.n = split == RG_SPLIT_TRAIN ? train : (train + 5) / 6,
                               .c = c,
                               .h = h,
                               .w = w,
                               .num_classes = num_classes,
                               .seed = split == RG_SPLIT_TRAIN ? 1 : 2};
}

rg_status rg_dataset_synthetic_split(rg_split split, int64_t c, int64_t h, int64_t w,
                                     int num_classes, rg_dataset **out) {
    rg_synthetic_opts o = rg_synthetic_split_opts(split, c, h, w, num_classes);
    return rg_dataset_synthetic(&o, out);
}
