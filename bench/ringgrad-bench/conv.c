/* conv.c — conv2d forward, backward data and backward filter on the CNN's layers and the conv
 * shapes of ResNet-18 and ResNet-50, each next to cblas_sgemm of the matrix product an im2col
 * implementation would do with the same arithmetic (over the whole batch at once: its largest and
 * fastest form):
 *
 *   forward          w (K, CRS)    col (CRS, N*PQ)
 *   backward data    w^T (CRS, K)  dy (K, N*PQ)      (then col2im)
 *   backward filter  dy (K, N*PQ)  col^T (N*PQ, CRS)
 *
 * "vs sgemm" is sgemm's time over ringgrad's: above 1, the convolution, everything included,
 * beats the bare matrix product. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ringgrad.h"
#include "tensor/backend_impl.h" /* kernels are timed through the backend table */

typedef struct {
    const char *name;
    int n; /* 0: the --batch option */
    int c, h, k, r, stride, pad;
} conv_layer;

static const conv_layer layers[] = {
    {"cnn.conv1", 128, 1, 28, 32, 3, 1, 0},
    {"cnn.conv2", 128, 32, 26, 64, 3, 1, 0},
    {"r18.stem7x7", 0, 3, 224, 64, 7, 2, 3},
    {"r18.l1.3x3", 0, 64, 56, 64, 3, 1, 1},
    {"r18.l2.3x3s2", 0, 64, 56, 128, 3, 2, 1},
    {"r18.l2.3x3", 0, 128, 28, 128, 3, 1, 1},
    {"r18.l2.1x1s2", 0, 64, 56, 128, 1, 2, 0},
    {"r18.l3.3x3s2", 0, 128, 28, 256, 3, 2, 1},
    {"r18.l3.3x3", 0, 256, 14, 256, 3, 1, 1},
    {"r18.l3.1x1s2", 0, 128, 28, 256, 1, 2, 0},
    {"r18.l4.3x3s2", 0, 256, 14, 512, 3, 2, 1},
    {"r18.l4.3x3", 0, 512, 7, 512, 3, 1, 1},
    {"r18.l4.1x1s2", 0, 256, 14, 512, 1, 2, 0},
    /* ResNet-50 (torchvision: Bottleneck, the stride on the 3x3) at 224x224, the shapes ResNet-18
     * has not: its stem and its stride-1 3x3s are r18.stem7x7 and r18.l1.3x3 ... r18.l4.3x3.
     * 1x1a: the first block's 1x1 in, 1x1b: the later blocks' 1x1 in, 3x3s2: the first block's
     * 3x3, 1x1e: the 1x1 out (stage 1: also the downsample), 1x1f: the downsample. */
    {"r50.l1.1x1a", 0, 64, 56, 64, 1, 1, 0},
    {"r50.l1.1x1b", 0, 256, 56, 64, 1, 1, 0},
    {"r50.l1.1x1e", 0, 64, 56, 256, 1, 1, 0},
    {"r50.l2.1x1a", 0, 256, 56, 128, 1, 1, 0},
    {"r50.l2.1x1b", 0, 512, 28, 128, 1, 1, 0},
    {"r50.l2.3x3s2", 0, 128, 56, 128, 3, 2, 1},
    {"r50.l2.1x1e", 0, 128, 28, 512, 1, 1, 0},
    {"r50.l2.1x1f", 0, 256, 56, 512, 1, 2, 0},
    {"r50.l3.1x1a", 0, 512, 28, 256, 1, 1, 0},
    {"r50.l3.1x1b", 0, 1024, 14, 256, 1, 1, 0},
    {"r50.l3.3x3s2", 0, 256, 28, 256, 3, 2, 1},
    {"r50.l3.1x1e", 0, 256, 14, 1024, 1, 1, 0},
    {"r50.l3.1x1f", 0, 512, 28, 1024, 1, 2, 0},
    {"r50.l4.1x1a", 0, 1024, 14, 512, 1, 1, 0},
    {"r50.l4.1x1b", 0, 2048, 7, 512, 1, 1, 0},
    {"r50.l4.3x3s2", 0, 512, 14, 512, 3, 2, 1},
    {"r50.l4.1x1e", 0, 512, 7, 2048, 1, 1, 0},
    {"r50.l4.1x1f", 0, 1024, 14, 2048, 1, 2, 0},
};
#define NLAYERS ((int)(sizeof layers / sizeof layers[0]))

enum { FWD, DATA, FILTER, NPASS };
static const char *pass_names[NPASS] = {"forward", "bwd-data", "bwd-filter"};

static rg_conv2d_shape layer_shape(const conv_layer *l, int batch) {
    rg_conv2d_shape s = {.n = l->n ? l->n : batch,
                         .c = l->c,
                         .h = l->h,
                         .w = l->h,
                         .k = l->k,
                         .r = l->r,
                         .s = l->r,
                         .stride_h = l->stride,
                         .stride_w = l->stride,
                         .pad_h = l->pad,
                         .pad_w = l->pad};
    s.p = (s.h + 2 * s.pad_h - s.r) / s.stride_h + 1;
    s.q = (s.w + 2 * s.pad_w - s.s) / s.stride_w + 1;
    return s;
}

/* NAME selects the layer NAME and the layers under it ("cnn" selects cnn.conv1 and cnn.conv2). */
static bool rgb_layer_selected(const char *name, const char *sel) {
    size_t n = sel ? strlen(sel) : 0;
    return !sel || (!strncmp(name, sel, n) && (name[n] == '\0' || name[n] == '.'));
}

bool rgb_conv_layer_known(const char *sel, char *names, size_t cap) {
    bool any = false;
    size_t used = 0;
    names[0] = '\0';
    for (int i = 0; i < NLAYERS; i++) {
        any |= rgb_layer_selected(layers[i].name, sel);
        int w = snprintf(names + used, cap - used, "%s%s", i ? ", " : "", layers[i].name);
        if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
    }
    return any;
}

void rgb_print_conv_shapes(int batch) {
    for (int i = 0; i < NLAYERS; i++) {
        rg_conv2d_shape s = layer_shape(&layers[i], batch);
        printf("shape %s %lld %lld %lld %lld %lld %d %d\n", layers[i].name, (long long)s.n,
               (long long)s.c, (long long)s.h, (long long)s.k, (long long)s.r, s.stride_h, s.pad_h);
    }
}

typedef struct {
    rg_conv2d_shape s;
    float *x, *w, *b, *y, *dy, *dx, *dw, *db; /* the convolution's buffers */
    float *ga, *gb, *gc;                      /* the equivalent GEMM's */
    int64_t gm, gn, gk;
    bool gta, gtb;
} conv_run;

static void run_conv(conv_run *r, int pass) {
    const rg_backend *be = &rg_cpu_backend;
    if (pass == FWD)
        be->conv2d_forward(&r->s, r->x, r->w, r->b, r->y);
    else if (pass == DATA)
        be->conv2d_backward_data(&r->s, r->dy, r->w, 0.0f, r->dx);
    else
        be->conv2d_backward_filter(&r->s, r->x, r->dy, 0.0f, r->dw, r->db);
}

static void setup_gemm(conv_run *r, int pass) {
    const rg_conv2d_shape *s = &r->s;
    int64_t crs = s->c * s->r * s->s, npq = s->n * s->p * s->q;
    int64_t dims[NPASS][3] = {{s->k, npq, crs}, {crs, npq, s->k}, {s->k, crs, npq}};
    r->gm = dims[pass][0], r->gn = dims[pass][1], r->gk = dims[pass][2];
    r->gta = pass == DATA, r->gtb = pass == FILTER;
    r->ga = rgb_random(r->gm * r->gk, 11), r->gb = rgb_random(r->gk * r->gn, 12);
    r->gc = rgb_random(r->gm * r->gn, 13);
}

static void free_gemm(conv_run *r) {
    rgb_free(r->ga), rgb_free(r->gb), rgb_free(r->gc);
}

/* Times pass `pass` and its GEMM, interleaved; medians into *t_conv and *t_gemm. */
static void time_pass(conv_run *r, int pass, int iters, double *t_conv, double *t_gemm) {
    double *tc = calloc((size_t)iters, sizeof *tc), *tg = calloc((size_t)iters, sizeof *tg);
    RG_CHECK(tc && tg, "conv bench: out of memory");
    setup_gemm(r, pass);
    run_conv(r, pass), rgb_sgemm(r->gta, r->gtb, r->gm, r->gn, r->gk, r->ga, r->gb, r->gc);
    for (int it = 0; it < iters; it++) {
        double t0 = rgb_now();
        run_conv(r, pass);
        tc[it] = rgb_now() - t0;
        t0 = rgb_now();
        rgb_sgemm(r->gta, r->gtb, r->gm, r->gn, r->gk, r->ga, r->gb, r->gc);
        tg[it] = rgb_now() - t0;
    }
    *t_conv = rgb_median(tc, iters), *t_gemm = rgb_median(tg, iters);
    free_gemm(r);
    free(tc), free(tg);
}

static void setup_conv(conv_run *r, const rg_conv2d_shape *s) {
    r->s = *s;
    int64_t nx = s->n * s->c * s->h * s->w, nw = s->k * s->c * s->r * s->s;
    int64_t ny = s->n * s->k * s->p * s->q;
    r->x = rgb_random(nx, 1), r->w = rgb_random(nw, 2), r->b = rgb_random(s->k, 3);
    r->y = rgb_random(ny, 4), r->dy = rgb_random(ny, 5), r->dx = rgb_random(nx, 6);
    r->dw = rgb_random(nw, 7), r->db = rgb_random(s->k, 8);
}

static void free_conv(conv_run *r) {
    float *bufs[] = {r->x, r->w, r->b, r->y, r->dy, r->dx, r->dw, r->db};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) rgb_free(bufs[i]);
}

void rgb_run_conv(const rgb_opts *o) {
    printf("\nconv2d (ringgrad CPU kernels) vs cblas_sgemm of the equivalent im2col product, "
           "median of %d interleaved runs; ResNet shapes at batch %d\n",
           o->iters, o->batch);
    printf("%-3s %-14s %-19s %-10s %9s %8s %9s %8s %9s\n", "thr", "layer", "N,C,H -> K,RxR/s,p",
           "pass", "ms", "GFLOP/s", "sgemm ms", "GFLOP/s", "vs sgemm");
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = rg_set_num_threads(o->threads[ti]);
        for (int li = 0; li < NLAYERS; li++) {
            if (!rgb_layer_selected(layers[li].name, o->layer)) continue;
            rg_conv2d_shape s = layer_shape(&layers[li], o->batch);
            conv_run r;
            setup_conv(&r, &s);
            double flops = 2.0 * (double)(s.n * s.k * s.p * s.q) * (double)(s.c * s.r * s.s);
            char dims[160];
            snprintf(dims, sizeof dims, "%lld,%lld,%lld->%lld,%lldx%lld/%d,%d", (long long)s.n,
                     (long long)s.c, (long long)s.h, (long long)s.k, (long long)s.r, (long long)s.s,
                     s.stride_h, s.pad_h);
            for (int pass = 0; pass < NPASS; pass++) {
                if (o->pass >= 0 && o->pass != pass) continue;
                double tc, tg;
                time_pass(&r, pass, o->iters, &tc, &tg);
                printf("%-3d %-14s %-19s %-10s %9.2f %8.1f %9.2f %8.1f %9.2f\n", nt,
                       layers[li].name, dims, pass_names[pass], tc * 1e3, flops / tc * 1e-9,
                       tg * 1e3, flops / tg * 1e-9, tg / tc);
                if (o->raw)
                    printf("raw conv threads=%d layer=%s pass=%s ms=%.4f sgemm_ms=%.4f\n", nt,
                           layers[li].name, pass_names[pass], tc * 1e3, tg * 1e3);
                fflush(stdout);
            }
            free_conv(&r);
        }
    }
}

int rgb_parse_pass(const char *name) {
    for (int p = 0; p < NPASS; p++)
        if (!strcmp(name, pass_names[p])) return p;
    return -2;
}
