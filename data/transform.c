/* transform.c — resize, crop, flip and normalise one image (see transform_impl.h).
 *
 * What it teaches: every augmentation of the two classic recipes is "sample a region of the source
 * image, maybe mirrored, into the output grid", so one bilinear resampler serves them all:
 *   none       the whole image, shorter side fitted and centre-cropped (identity at the same size)
 *   flip-crop  CIFAR: pad by 4 with zeros, a random (H,W) crop, a horizontal flip half the time
 *   rrc        ImageNet training: RandomResizedCrop (area 8%-100%, aspect 3/4-4/3, torchvision's
 *              10 tries then a centre fallback) and a flip; evaluation: Resize(S*8/7) and
 *              CenterCrop(S), done as one resampling of the centre region
 * Bilinear sampling follows PyTorch's align_corners=False (pixel centres at +0.5), without
 * antialiasing. The random numbers are Philox of (seed, epoch) at counter (item): the same item in
 * the same epoch gets the same crop on any rank, in any batch, after any resume. */
#include "data/transform_impl.h"

#include <math.h>
#include <stdlib.h>

#include "core/kernels.h"

#define STREAM_AUGMENT 0x6175676D656E74ULL /* "augment" */
#define PAD 4                              /* flip-crop's padding */
#define DRAWS_PER_ITEM 64                  /* 16 Philox calls */

bool rg_transform_init(rg_transform *t, const rg_loader_opts *o, int64_t c, int64_t h, int64_t w) {
    *t = (rg_transform){.augment = o->augment, .eval = o->eval, .c = c, .h = h, .w = w,
                        .seed = o->seed};
    t->mean = malloc((size_t)c * sizeof *t->mean);
    t->inv_std = malloc((size_t)c * sizeof *t->inv_std);
    if (!t->mean || !t->inv_std) return false;
    for (int64_t k = 0; k < c; k++) {
        t->mean[k] = o->mean ? o->mean[k] : 0.0f;
        t->inv_std[k] = o->std ? 1.0f / o->std[k] : 1.0f;
    }
    return true;
}

void rg_transform_deinit(rg_transform *t) {
    free(t->mean);
    free(t->inv_std);
    t->mean = t->inv_std = NULL;
}

/* ---- random numbers: a pure function of (seed, epoch, item, k) ---- */

typedef struct {
    uint64_t key, item;
    int k;
} draws;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static draws draws_for(const rg_transform *t, uint64_t epoch, int64_t item) {
    return (draws){.key = mix64(t->seed ^ STREAM_AUGMENT ^ mix64(epoch + 0x9E3779B97F4A7C15ULL)),
                   .item = (uint64_t)item};
}

static uint32_t next_bits(draws *d) {
    int k = d->k++ % DRAWS_PER_ITEM;
    return rg_philox(d->key, d->item * (DRAWS_PER_ITEM / 4) + (uint64_t)k / 4).v[k % 4];
}

static double uniform(draws *d, double a, double b) { /* [a, b) */
    return a + (b - a) * (double)(next_bits(d) >> 8) / 16777216.0;
}

static int64_t below(draws *d, int64_t n) { /* [0, n) */
    return (int64_t)(((uint64_t)next_bits(d) * (uint64_t)n) >> 32);
}

/* ---- the resampler ---- */

typedef struct {
    double y0, x0, h, w; /* the source region, in source pixels */
} region;

/* PyTorch's source coordinate for output index i of n over a region [r0, r0 + len) of a source
 * of `size` pixels: the two neighbours and the weight of the second. */
static void source_coord(int64_t i, int64_t n, double r0, double len, int64_t size, int64_t *lo,
                         int64_t *hi, float *frac) {
    double s = ((double)i + 0.5) * len / (double)n - 0.5;
    if (s < 0) s = 0;
    s += r0;
    double last = r0 + len - 1 < (double)(size - 1) ? r0 + len - 1 : (double)(size - 1);
    if (s > last) s = last;
    if (s < 0) s = 0;
    *lo = (int64_t)s;
    *hi = *lo + 1 < size ? *lo + 1 : *lo;
    *frac = (float)(s - (double)*lo);
}

/* dst (c,H,W) in pixel units [0, 255] = region r of src, bilinear, mirrored when flip. The
 * column neighbours and weights are computed once per image, not once per pixel and channel. */
static void resample(const rg_transform *t, const rg_image *src, region r, bool flip, float *dst) {
    int64_t H = t->h, W = t->w;
    int64_t *cols = malloc((size_t)W * 2 * sizeof *cols);
    float *fxs = malloc((size_t)W * sizeof *fxs);
    if (!cols || !fxs) { /* out of memory: nearest column, computed per pixel */
        free(cols), free(fxs);
        cols = NULL, fxs = NULL;
    }
    for (int64_t x = 0; cols && x < W; x++)
        source_coord(flip ? W - 1 - x : x, W, r.x0, r.w, src->w, &cols[2 * x], &cols[2 * x + 1],
                     &fxs[x]);
    for (int64_t ch = 0; ch < t->c; ch++) {
        const uint8_t *p = src->px + ch * (int64_t)src->h * src->w;
        for (int64_t y = 0; y < H; y++) {
            int64_t y0, y1;
            float fy;
            source_coord(y, H, r.y0, r.h, src->h, &y0, &y1, &fy);
            const uint8_t *row0 = p + y0 * src->w, *row1 = p + y1 * src->w;
            float *out = dst + (ch * H + y) * W;
            for (int64_t x = 0; x < W; x++) {
                int64_t x0, x1;
                float fx;
                if (cols) x0 = cols[2 * x], x1 = cols[2 * x + 1], fx = fxs[x];
                else source_coord(flip ? W - 1 - x : x, W, r.x0, r.w, src->w, &x0, &x1, &fx);
                float top = (float)row0[x0] * (1 - fx) + (float)row0[x1] * fx;
                float bot = (float)row1[x0] * (1 - fx) + (float)row1[x1] * fx;
                out[x] = top * (1 - fy) + bot * fy;
            }
        }
    }
    free(cols), free(fxs);
}

/* The centre region that Resize(shorter side x factor) + CenterCrop(H,W) keeps. */
static region centre(const rg_transform *t, const rg_image *img, double factor) {
    double sy = floor((double)t->h * factor) / img->h, sx = floor((double)t->w * factor) / img->w;
    double scale = sy > sx ? sy : sx;
    double rh = (double)t->h / scale, rw = (double)t->w / scale;
    return (region){.y0 = ((double)img->h - rh) / 2, .x0 = ((double)img->w - rw) / 2, .h = rh,
                    .w = rw};
}

/* torchvision's RandomResizedCrop.get_params(scale=(0.08, 1), ratio=(3/4, 4/3)). */
static region random_resized_crop(const rg_image *img, draws *d) {
    double area = (double)img->h * img->w, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(d, 0.08, 1.0), ratio = exp(uniform(d, lr0, lr1));
        int64_t w = (int64_t)lround(sqrt(target * ratio)), h = (int64_t)lround(sqrt(target / ratio));
        if (w > 0 && w <= img->w && h > 0 && h <= img->h) {
            int64_t i = below(d, img->h - h + 1), j = below(d, img->w - w + 1);
            return (region){(double)i, (double)j, (double)h, (double)w};
        }
    }
    double in_ratio = (double)img->w / img->h;
    int64_t w = img->w, h = img->h;
    if (in_ratio < 3.0 / 4.0) h = lround((double)w / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0) w = lround((double)h * (4.0 / 3.0));
    return (region){(double)((img->h - h) / 2), (double)((img->w - w) / 2), (double)h, (double)w};
}

/* ---- normalisation, and the whole transform ---- */

/* dst = (v/255 - mean) * inv_std per channel; v/255 as ToTensor (a division, bit-identical). */
static void normalize(const rg_transform *t, float *dst) {
    int64_t plane = t->h * t->w;
    for (int64_t ch = 0; ch < t->c; ch++) {
        float m = t->mean[ch], s = t->inv_std[ch], *p = dst + ch * plane;
        for (int64_t i = 0; i < plane; i++) p[i] = (p[i] / 255.0f - m) * s;
    }
}

/* Flip-crop from base (c,H,W) pixel units: out(y,x) = base(y+dy-PAD, x'+dx-PAD), 0 outside. */
static void flip_crop(const rg_transform *t, const float *base, draws *d, float *dst) {
    int64_t H = t->h, W = t->w, dy = below(d, 2 * PAD + 1), dx = below(d, 2 * PAD + 1);
    bool flip = next_bits(d) & 1;
    for (int64_t ch = 0; ch < t->c; ch++)
        for (int64_t y = 0; y < H; y++)
            for (int64_t x = 0; x < W; x++) {
                int64_t sy = y + dy - PAD, sx = (flip ? W - 1 - x : x) + dx - PAD;
                bool in = sy >= 0 && sy < H && sx >= 0 && sx < W;
                dst[(ch * H + y) * W + x] = in ? base[(ch * H + sy) * W + sx] : 0.0f;
            }
}

/* The common case in one pass: bytes to normalised floats, nothing moved. */
static void convert(const rg_transform *t, const uint8_t *restrict src, float *restrict dst) {
    int64_t plane = t->h * t->w;
    for (int64_t ch = 0; ch < t->c; ch++) {
        float m = t->mean[ch], s = t->inv_std[ch];
        for (int64_t i = 0; i < plane; i++)
            dst[ch * plane + i] = ((float)src[ch * plane + i] / 255.0f - m) * s;
    }
}

void rg_transform_apply(const rg_transform *t, uint64_t epoch, int64_t item, const rg_image *img,
                        float *dst, float *scratch) {
    draws d = draws_for(t, epoch, item);
    bool same_size = img->h == t->h && img->w == t->w;
    rg_augment a = t->eval && t->augment == RG_AUGMENT_FLIP_CROP ? RG_AUGMENT_NONE : t->augment;
    if (a == RG_AUGMENT_NONE && same_size) {
        convert(t, img->px, dst);
        return;
    }
    if (a == RG_AUGMENT_RRC && t->eval) {
        resample(t, img, centre(t, img, 8.0 / 7.0), false, dst);
    } else if (a == RG_AUGMENT_RRC) {
        region r = random_resized_crop(img, &d);
        resample(t, img, r, next_bits(&d) & 1, dst);
    } else {
        float *base = a == RG_AUGMENT_FLIP_CROP ? scratch : dst;
        if (same_size) /* the common case: no resampling, exact bytes */
            for (int64_t i = 0; i < t->c * t->h * t->w; i++) base[i] = (float)img->px[i];
        else
            resample(t, img, centre(t, img, 1.0), false, base);
        if (a == RG_AUGMENT_FLIP_CROP) flip_crop(t, base, &d, dst);
    }
    normalize(t, dst);
}
