/* Tests for batch_norm2d and global_avg_pool2d: forward against naive loops, central-difference
 * gradient checks of every input in training and evaluation, accumulation into existing
 * gradients, and misuse (a single value per channel, a wrong number of channels). */
#include <math.h>
#include <string.h>

#include "rgtest.h"

typedef struct {
    rg_tensor *rm, *rv;
    bool train;
} bn_ctx;

static rg_tensor *f_bn(rg_tensor *const *in, void *ctx) {
    bn_ctx *c = ctx;
    return rg_batch_norm2d(in[0], in[1], in[2], c->rm, c->rv, NULL, c->train, 0.1f, 1e-5f, NULL);
}

Test(tensor_batchnorm2d, forward_matches_naive_loops) {
    int64_t n = 3, c = 4, h = 5, w = 2, hw = h * w;
    rg_tensor *x = rgt_uniform(RG_SHAPE(n, c, h, w), -2, 3, 1);
    rg_tensor *g = rgt_uniform(RG_SHAPE(c), 0.5, 2, 2), *b = rgt_uniform(RG_SHAPE(c), -1, 1, 3);
    rg_tensor *rm = rgt_uniform(RG_SHAPE(c), -1, 1, 4), *rv = rgt_uniform(RG_SHAPE(c), 0.5, 2, 5);
    float *rm0 = rgt_copy_out(rm), *rv0 = rgt_copy_out(rv);
    const float *xp = rg_tensor_f32(x), *gp = rg_tensor_f32(g), *bp = rg_tensor_f32(b);
    rg_scope_begin();
    rg_tensor *y = rg_batch_norm2d(x, g, b, rm, rv, NULL, true, 0.1f, 1e-5f, NULL);
    rg_tensor *ye = rg_batch_norm2d(x, g, b, rm, rv, NULL, false, 0.1f, 1e-5f, NULL);
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) s += xp[(i * c + ch) * hw + j];
        double mean = s / (double)(n * hw);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                double d = xp[(i * c + ch) * hw + j] - mean;
                ss += d * d;
            }
        double var = ss / (double)(n * hw);
        double rmean = 0.9 * rm0[ch] + 0.1 * mean, rvar = 0.9 * rv0[ch] + 0.1 * var * 30.0 / 29.0;
        cr_assert_float_eq(rg_tensor_f32(rm)[ch], rmean, 1e-5);
        cr_assert_float_eq(rg_tensor_f32(rv)[ch], rvar, 1e-5);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                int64_t k = (i * c + ch) * hw + j;
                double want = (xp[k] - mean) / sqrt(var + 1e-5) * gp[ch] + bp[ch];
                double weval = (xp[k] - rmean) / sqrt(rvar + 1e-5) * gp[ch] + bp[ch];
                cr_assert_float_eq(rg_tensor_f32(y)[k], want, 1e-5, "train at %lld", (long long)k);
                cr_assert_float_eq(rg_tensor_f32(ye)[k], weval, 1e-5, "eval at %lld", (long long)k);
            }
    }
    rg_scope_end();
    free(rm0), free(rv0);
    rgt_free_all(5, (rg_tensor *[]){x, g, b, rm, rv});
}

Test(tensor_batchnorm2d, gradients_match_finite_differences) {
    for (int train = 0; train < 2; train++) {
        rg_tensor *in[3] = {rgt_param(RG_SHAPE(3, 2, 3, 4), -1, 1, 10),
                            rgt_param(RG_SHAPE(2), 0.5, 1.5, 11), rgt_param(RG_SHAPE(2), -1, 1, 12)};
        bn_ctx c = {rgt_uniform(RG_SHAPE(2), -0.5, 0.5, 13), rgt_uniform(RG_SHAPE(2), 0.5, 1, 14),
                    train};
        rg_gradcheck_opts o = {.eps = 1e-2, .atol = 2e-2, .rtol = 2e-2, .seed = 3};
        rgt_assert_gradcheck(f_bn, &c, 3, in, &o);
        rgt_free_all(5, (rg_tensor *[]){in[0], in[1], in[2], c.rm, c.rv});
    }
}

Test(tensor_batchnorm2d, gradients_accumulate_with_beta_one) {
    rg_tensor *x = rgt_param(RG_SHAPE(2, 3, 2, 2), -1, 1, 20), *g = rgt_param(RG_SHAPE(3), 1, 2, 21);
    rg_tensor *b = rgt_param(RG_SHAPE(3), -1, 1, 22);
    float *once[3];
    for (int rep = 0; rep < 2; rep++) {
        rg_scope_begin();
        rg_tensor *y = rg_batch_norm2d(x, g, b, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
        rg_backward(rg_sum(rg_mul(y, y)));
        rg_scope_end();
        if (rep == 0)
            for (int k = 0; k < 3; k++) once[k] = rgt_copy_out((rg_tensor *[]){x, g, b}[k]->grad);
    }
    rg_tensor *ts[3] = {x, g, b};
    for (int k = 0; k < 3; k++) {
        float *twice = rgt_copy_out(ts[k]->grad);
        for (int64_t i = 0; i < ts[k]->numel; i++) once[k][i] *= 2;
        rgt_assert_close(twice, once[k], ts[k]->numel, 1e-5, 1e-4, "accumulated gradient");
        free(twice), free(once[k]);
    }
    rgt_free_all(3, ts);
}

/* rgt_bn_fused_matches_unfused (tests/common/bn_fused.c), here on the CPU */
Test(tensor_batchnorm2d, fused_relu_is_relu_of_batch_norm_bit_for_bit) {
    rgt_bn_fused_matches_unfused(RG_CPU, false);
}

Test(tensor_batchnorm2d, fused_add_relu_is_relu_of_the_residual_add_bit_for_bit) {
    rgt_bn_fused_matches_unfused(RG_CPU, true);
}

/* A block whose BatchNorm input and parameters want no gradient (frozen, or evaluation of a
 * fine-tuned head) while its shortcut does: the shortcut gets dy masked by y > 0, and nothing
 * else gets a gradient. The evaluation path once wrote dx regardless: x got a gradient it never
 * asked for (and an x from an outer step scope stopped the program). */
Test(tensor_batchnorm2d, only_the_residual_wanting_a_gradient_gets_one) {
    for (int train = 0; train < 2; train++) {
        rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 4, 4), -2, 2, 50);
        rg_tensor *g = rgt_uniform(RG_SHAPE(3), 0.5, 2, 51),
                  *b = rgt_uniform(RG_SHAPE(3), -1, 1, 52);
        rg_tensor *rm = rgt_uniform(RG_SHAPE(3), -1, 1, 53),
                  *rv = rgt_uniform(RG_SHAPE(3), 0.5, 2, 54);
        rg_tensor *r = rgt_uniform(RG_SHAPE(2, 3, 4, 4), -1, 1, 55);
        rg_tensor *res = rgt_param(RG_SHAPE(2, 3, 4, 4), -1, 1, 56);
        rg_scope_begin();
        rg_tensor *y =
            rg_batch_norm2d_add_relu(x, g, b, rm, rv, NULL, train, 0.1f, 1e-5f, NULL, res);
        rg_backward(rg_sum(rg_mul(y, r)));
        cr_assert(!x->grad && !g->grad && !b->grad, "train %d: a gradient nobody asked for", train);
        cr_assert(res->grad, "train %d: the residual got no gradient", train);
        const float *yp = rg_tensor_f32(y), *rp = rg_tensor_f32(r), *dr = rg_tensor_f32(res->grad);
        for (int64_t i = 0; i < y->numel; i++)
            cr_assert_eq(dr[i], yp[i] > 0 ? rp[i] : 0.0f, "train %d: element %lld", train,
                         (long long)i);
        rg_scope_end();
        rgt_free_all(7, (rg_tensor *[]){x, g, b, rm, rv, r, res});
    }
}

/* Training forward and backward against double-precision formulas on every kind of plane the
 * CPU walks differently: planes under 32 floats go as rows of many channels (1x1, 2x2, 4x4, 5x6:
 * several runs of channels, the last one partial), larger ones plane by plane (9x9); each with and
 * without the fused ReLU, whose mask the passes apply themselves. The tensors are large enough
 * for two threads to split them, and every result must be the same to the bit at one and two. */
static void bn_against_doubles(int64_t n, int64_t c, int64_t h, int64_t w, bool relu, int threads,
                               float *out[4]) {
    int64_t hw = h * w;
    rg_set_num_threads(threads);
    rg_tensor *x = rgt_param(RG_SHAPE(n, c, h, w), -2, 3, 40);
    rg_tensor *g = rgt_param(RG_SHAPE(c), 0.5, 2, 41), *b = rgt_param(RG_SHAPE(c), -1, 1, 42);
    rg_tensor *r = rgt_uniform(RG_SHAPE(n, c, h, w), -1, 1, 43);
    rg_scope_begin();
    rg_tensor *y = relu ? rg_batch_norm2d_relu(x, g, b, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL)
                        : rg_batch_norm2d(x, g, b, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
    rg_backward(rg_sum(rg_mul(y, r)));
    out[0] = rgt_copy_out(y), out[1] = rgt_copy_out(x->grad);
    out[2] = rgt_copy_out(g->grad), out[3] = rgt_copy_out(b->grad);
    rg_scope_end();
    const float *xp = rg_tensor_f32(x), *gp = rg_tensor_f32(g), *bp = rg_tensor_f32(b);
    const float *rp = rg_tensor_f32(r);
    double cnt = (double)(n * hw);
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0, ss = 0, sdy = 0, sdyx = 0;
#define AT(i, j) (((i)*c + ch) * hw + (j))
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) s += xp[AT(i, j)];
        double mean = s / cnt;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) ss += (xp[AT(i, j)] - mean) * (xp[AT(i, j)] - mean);
        double inv = 1.0 / sqrt(ss / cnt + 1e-5);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                double xhat = (xp[AT(i, j)] - mean) * inv, v = xhat * gp[ch] + bp[ch];
                double want = relu && v < 0 ? 0 : v, dy = relu && v <= 0 ? 0 : rp[AT(i, j)];
                cr_assert_float_eq(out[0][AT(i, j)], want, 2e-5, "y (%lld, %lld, %lld)",
                                   (long long)i, (long long)ch, (long long)j);
                sdy += dy, sdyx += dy * xhat;
            }
        cr_assert_float_eq(out[3][ch], sdy, 1e-4 * (1 + fabs(sdy)), "dbias %lld", (long long)ch);
        cr_assert_float_eq(out[2][ch], sdyx, 1e-4 * (1 + fabs(sdyx)), "dweight %lld",
                           (long long)ch);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < hw; j++) {
                double xhat = (xp[AT(i, j)] - mean) * inv, v = xhat * gp[ch] + bp[ch];
                double dy = relu && v <= 0 ? 0 : rp[AT(i, j)];
                double dx = gp[ch] * inv * (dy - sdy / cnt - xhat * sdyx / cnt);
                cr_assert_float_eq(out[1][AT(i, j)], dx, 1e-4 * (1 + fabs(dx)),
                                   "dx (%lld, %lld, "
                                   "%lld)",
                                   (long long)i, (long long)ch, (long long)j);
            }
#undef AT
    }
    rgt_free_all(4, (rg_tensor *[]){x, g, b, r});
    rg_set_num_threads(1);
}

Test(tensor_batchnorm2d, every_plane_size_matches_doubles_and_the_threads_agree) {
    /* small planes: batches of 4k + 1..3 images (the reductions take four rows a pass), 2x2 and
     * 4x4 (their loops specialised) and others, 300 images of 2x2 (two blocks of 256, folded);
     * 7x7, whose statistics go as small planes and the rest as planes, 130 images (blocks of 64) */
    const int64_t shapes[][4] = {{40, 1000, 1, 1}, {9, 1100, 2, 2}, {7, 300, 4, 4}, {8, 150, 5, 6},
                                 {3, 5, 5, 6},     {8, 60, 9, 9},   {300, 5, 2, 2}, {6, 70, 4, 4},
                                 {130, 7, 7, 7},   {9, 70, 7, 7}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int relu = 0; relu < 2; relu++) {
            const int64_t *sh = shapes[k];
            int64_t numel = sh[0] * sh[1] * sh[2] * sh[3], len[4] = {numel, numel, sh[1], sh[1]};
            float *one[4], *two[4];
            bn_against_doubles(sh[0], sh[1], sh[2], sh[3], relu, 1, one);
            bn_against_doubles(sh[0], sh[1], sh[2], sh[3], relu, 2, two);
            for (int o = 0; o < 4; o++) {
                cr_assert(memcmp(one[o], two[o], (size_t)len[o] * sizeof(float)) == 0,
                          "%lldx%lldx%lldx%lld relu %d: result %d differs at 1 and 2 threads",
                          (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[3],
                          relu, o);
                free(one[o]), free(two[o]);
            }
        }
}

/* Channels whose mean is 10^3 and 10^4 times their spread (an uncentred input, as raw sensor
 * values): sums of x and x^2 kept nothing of the variance in float (the running variance came out
 * 3.3 times too large at 10^4); the statistics about each channel's first value keep it. Small
 * planes (2x2), 7x7 (statistics as small planes, the rest as planes) and large ones (10x10),
 * forward and backward. */
Test(tensor_batchnorm2d, channels_far_from_zero_keep_their_variance) {
    const int64_t hws[3][2] = {{2, 2}, {7, 7}, {10, 10}};
    for (int t = 0; t < 3; t++) {
        int64_t n = 16, c = 3, h = hws[t][0], w = hws[t][1], hw = h * w;
        rg_tensor *x = rgt_uniform(RG_SHAPE(n, c, h, w), -1.7320508, 1.7320508, 50); /* var ~1 */
        float *xp = rg_tensor_f32(x);
        const double offset[3] = {0.0, 1e3, 1e4};
        for (int64_t i = 0; i < n * c * hw; i++) xp[i] += (float)offset[(i / hw) % c];
        rg_tensor *rm = rgt_uniform(RG_SHAPE(c), 0, 0, 51),
                  *rv = rgt_uniform(RG_SHAPE(c), 1, 1, 52);
        rg_tensor *r = rgt_uniform(RG_SHAPE(n, c, h, w), -1, 1, 53);
        rg_tensor_set_requires_grad(x, true);
        rg_scope_begin();
        rg_tensor *y = rg_batch_norm2d(x, NULL, NULL, rm, rv, NULL, true, 1.0f, 1e-5f, NULL);
        rg_backward(rg_sum(rg_mul(y, r)));
        const float *dxp = rg_tensor_f32(x->grad), *rp = rg_tensor_f32(r);
        for (int64_t ch = 0; ch < c; ch++) {
            double s = 0, ss = 0, ys = 0, yss = 0, cnt = (double)(n * hw);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < hw; j++) s += xp[(i * c + ch) * hw + j];
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < hw; j++) {
                    double d = xp[(i * c + ch) * hw + j] - s / cnt,
                           v = rg_tensor_f32(y)[(i * c + ch) * hw + j];
                    ss += d * d, ys += v, yss += v * v;
                }
            double unbiased = ss / (cnt - 1);
            cr_assert_float_eq(rg_tensor_f32(rm)[ch], s / cnt, 1e-7 * (1 + fabs(s / cnt)),
                               "%lldx%lld channel %lld: mean", (long long)h, (long long)w,
                               (long long)ch);
            cr_assert_float_eq(rg_tensor_f32(rv)[ch], unbiased, 1e-4 * unbiased,
                               "%lldx%lld channel %lld (offset %g): running_var %g, want %g",
                               (long long)h, (long long)w, (long long)ch, offset[ch],
                               (double)rg_tensor_f32(rv)[ch], unbiased);
            cr_assert_float_eq(yss / cnt - (ys / cnt) * (ys / cnt), 1.0, 2e-3,
                               "channel %lld: y's variance", (long long)ch);
            /* the backward's dx = invstd (dy - mean(dy) - xhat mean(dy xhat)), in doubles, to
             * what a float mean allows (half its last bit at 10^4 moves dx by 6e-5) */
            double m = s / cnt, inv = 1.0 / sqrt(ss / cnt + 1e-5), sdy = 0, sdyx = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < hw; j++) {
                    int64_t at = (i * c + ch) * hw + j;
                    sdy += rp[at], sdyx += rp[at] * (xp[at] - m) * inv;
                }
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < hw; j++) {
                    int64_t at = (i * c + ch) * hw + j;
                    double dx = inv * (rp[at] - sdy / cnt - (xp[at] - m) * inv * sdyx / cnt);
                    cr_assert_float_eq(dxp[at], dx, 1e-4 * (1 + fabs(dx)),
                                       "%lldx%lld channel %lld (offset %g): dx %g, want %g",
                                       (long long)h, (long long)w, (long long)ch, offset[ch],
                                       (double)dxp[at], dx);
                }
        }
        rg_scope_end();
        rgt_free_all(4, (rg_tensor *[]){x, rm, rv, r});
    }
}

Test(tensor_batchnorm2d, a_residual_of_another_shape_is_misuse, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 4, 4), -1, 1, 1);
    rg_tensor *res = rgt_uniform(RG_SHAPE(2, 3, 4, 5), -1, 1, 2);
    rg_scope_begin();
    rg_batch_norm2d_add_relu(x, NULL, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL, res);
}

Test(tensor_batchnorm2d, one_value_per_channel_in_training_is_misuse, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(1, 3, 1, 1), -1, 1, 1);
    rgt_expect_fatal("expected more than 1 value per channel");
    rg_scope_begin();
    rg_batch_norm2d(x, NULL, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
}

Test(tensor_batchnorm2d, channel_mismatch_is_misuse, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(2, 3, 2, 2), -1, 1, 1), *g = rgt_uniform(RG_SHAPE(4), 0, 1, 2);
    rgt_expect_fatal("weight (4) for input (2,3,2,2)");
    rg_scope_begin();
    rg_batch_norm2d(x, g, NULL, NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
}

static rg_tensor *f_avg(rg_tensor *const *in, void *ctx) {
    return rg_global_avg_pool2d(in[0]);
}

Test(tensor_avgpool, global_mean_and_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(2, 3, 4, 5), -1, 1, 30);
    rg_scope_begin();
    rg_tensor *y = rg_global_avg_pool2d(x);
    cr_assert(y->ndim == 4 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 1 &&
              y->shape[3] == 1);
    for (int64_t p = 0; p < 6; p++) {
        double s = 0;
        for (int j = 0; j < 20; j++) s += rg_tensor_f32(x)[p * 20 + j];
        cr_assert_float_eq(rg_tensor_f32(y)[p], s / 20, 1e-6);
    }
    rg_scope_end();
    rgt_assert_gradcheck(f_avg, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

/* batchnorm_train_forward (training's forward in one call; on small planes one run of channels
 * at a time through statistics, finalisation and normalisation) against the three calls it
 * replaces: the same y, mean/var/count, running statistics and batch count, bit for bit, with
 * and without the residual add and the ReLU, at one and two threads. */
Test(tensor_batchnorm2d, the_one_call_forward_equals_the_three_calls) {
    const int64_t shapes[][4] = {{32, 2048, 2, 2}, {7, 300, 4, 4}, {300, 5, 2, 2}, {9, 1100, 1, 1},
                                 {3, 5, 5, 6},     {8, 60, 9, 9},  {130, 7, 7, 7}, {8, 60, 7, 7}};
    const rg_backend *be = &rg_cpu_backend;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int v = 0; v < 3; v++)
            for (int threads = 1; threads <= 2; threads++) {
                rg_set_num_threads(threads);
                int64_t n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2] * shapes[k][3];
                rg_tensor *x = rgt_uniform(RG_SHAPE(n, c, hw), -2, 3, 60 + k);
                rg_tensor *res = rgt_uniform(RG_SHAPE(n, c, hw), -1, 1, 61 + k);
                rg_tensor *w = rgt_uniform(RG_SHAPE(c), 0.5, 2, 62 + k);
                rg_tensor *b = rgt_uniform(RG_SHAPE(c), -1, 1, 63 + k);
                const float *r = v == 2 ? rg_tensor_f32(res) : NULL;
                bool relu = v > 0;
                float *st[2], *mv[2], *rm[2], *rv[2], *y[2];
                int64_t nb[2] = {3, 3};
                for (int f = 0; f < 2; f++) {
                    st[f] = calloc((size_t)(3 * c + 1), sizeof(float));
                    mv[f] = calloc((size_t)(2 * c + 1), sizeof(float));
                    rm[f] = calloc((size_t)c, sizeof(float)),
                    rv[f] = calloc((size_t)c, sizeof(float));
                    y[f] = calloc((size_t)(n * c * hw), sizeof(float));
                    for (int64_t ch = 0; ch < c; ch++) rm[f][ch] = 0.25f, rv[f][ch] = 1.5f;
                }
                const float *xp = rg_tensor_f32(x), *wp = rg_tensor_f32(w), *bp = rg_tensor_f32(b);
                be->batchnorm_stats(n, c, hw, xp, NULL, st[0]);
                be->batchnorm_finalize(c, 0.1f, st[0], mv[0], rm[0], rv[0], &nb[0]);
                be->batchnorm_apply(n, c, hw, xp, mv[0], mv[0] + c, 1e-5f, wp, bp, r, relu, y[0]);
                be->batchnorm_train_forward(n, c, hw, xp, 0.1f, 1e-5f, wp, bp, r, relu, st[1],
                                            mv[1], rm[1], rv[1], &nb[1], y[1]);
                const char *what = v == 0 ? "plain" : v == 1 ? "relu" : "add+relu";
                cr_assert(memcmp(y[0], y[1], (size_t)(n * c * hw) * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s, %d threads: y differs", (long long)n, (long long)c,
                          (long long)hw, what, threads);
                cr_assert(memcmp(mv[0], mv[1], (size_t)(2 * c + 1) * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s: mean/var differ", (long long)n, (long long)c,
                          (long long)hw, what);
                cr_assert(memcmp(rm[0], rm[1], (size_t)c * sizeof(float)) == 0 &&
                              memcmp(rv[0], rv[1], (size_t)c * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s: running statistics differ", (long long)n,
                          (long long)c, (long long)hw, what);
                cr_assert(nb[0] == 4 && nb[1] == 4, "num_batches %lld and %lld", (long long)nb[0],
                          (long long)nb[1]);
                for (int f = 0; f < 2; f++)
                    free(st[f]), free(mv[f]), free(rm[f]), free(rv[f]), free(y[f]);
                rgt_free_all(4, (rg_tensor *[]){x, res, w, b});
            }
    rg_set_num_threads(1);
}

/* batchnorm_backward (training's backward in one call; on small planes one run of channels at a
 * time through both passes) against batchnorm_backward_reduce and batchnorm_backward_data: the
 * same dx, sums and parameter gradients, bit for bit, plain, through a fused ReLU's output, and
 * accumulating into gradients that already hold values (beta 1; the bias's beta differs from the
 * weight's in the ReLU case), at one and two threads. */
Test(tensor_batchnorm2d, the_one_call_backward_equals_the_two_calls) {
    const int64_t shapes[][4] = {{32, 2048, 2, 2}, {7, 300, 4, 4}, {300, 5, 2, 2}, {9, 1100, 1, 1},
                                 {3, 5, 5, 6},     {8, 60, 9, 9},  {130, 7, 7, 7}, {8, 60, 7, 7}};
    const rg_backend *be = &rg_cpu_backend;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int v = 0; v < 3; v++)
            for (int threads = 1; threads <= 2; threads++) {
                rg_set_num_threads(threads);
                int64_t n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2] * shapes[k][3];
                int64_t numel = n * c * hw;
                rg_tensor *x = rgt_uniform(RG_SHAPE(n, c, hw), -2, 3, 70 + k);
                rg_tensor *dy = rgt_uniform(RG_SHAPE(n, c, hw), -1, 1, 71 + k);
                rg_tensor *ry = rgt_uniform(RG_SHAPE(n, c, hw), -1, 1, 72 + k);
                rg_tensor *w = rgt_uniform(RG_SHAPE(c), 0.5, 2, 73 + k);
                rg_tensor *mv = rgt_uniform(RG_SHAPE(2 * c), 0.1, 1.5, 74 + k); /* mean, var */
                const float *relu_y = v == 1 ? rg_tensor_f32(ry) : NULL;
                float beta = v == 2 ? 1.0f : 0.0f, beta_b = v > 0 ? 1.0f : 0.0f;
                float *sums[2], *dw[2], *db[2], *dx[2];
                for (int f = 0; f < 2; f++) {
                    sums[f] = calloc((size_t)(2 * c + 1), sizeof(float));
                    dw[f] = calloc((size_t)c, sizeof(float)),
                    db[f] = calloc((size_t)c, sizeof(float));
                    dx[f] = calloc((size_t)numel, sizeof(float));
                    for (int64_t ch = 0; ch < c; ch++) dw[f][ch] = 0.5f, db[f][ch] = -0.25f;
                    for (int64_t i = 0; i < numel; i++) dx[f][i] = (float)(i % 7) - 3.0f;
                }
                const float *xp = rg_tensor_f32(x), *gp = rg_tensor_f32(dy), *wp = rg_tensor_f32(w);
                const float *mean = rg_tensor_f32(mv), *var = mean + c;
                be->batchnorm_backward_reduce(n, c, hw, xp, gp, relu_y, mean, var, 1e-5f, sums[0],
                                              beta, dw[0], beta_b, db[0]);
                be->batchnorm_backward_data(n, c, hw, xp, gp, relu_y, mean, var, 1e-5f, wp, sums[0],
                                            beta, dx[0]);
                be->batchnorm_backward(n, c, hw, xp, gp, relu_y, mean, var, 1e-5f, wp, sums[1],
                                       beta, dw[1], beta_b, db[1], beta, dx[1]);
                const char *what = v == 0 ? "plain" : v == 1 ? "relu" : "accumulating";
                cr_assert(memcmp(dx[0], dx[1], (size_t)numel * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s, %d threads: dx differs", (long long)n, (long long)c,
                          (long long)hw, what, threads);
                cr_assert(memcmp(sums[0], sums[1], (size_t)(2 * c + 1) * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s: sums differ", (long long)n, (long long)c,
                          (long long)hw, what);
                cr_assert(memcmp(dw[0], dw[1], (size_t)c * sizeof(float)) == 0 &&
                              memcmp(db[0], db[1], (size_t)c * sizeof(float)) == 0,
                          "%lldx%lldx%lld %s: parameter gradients differ", (long long)n,
                          (long long)c, (long long)hw, what);
                for (int f = 0; f < 2; f++) free(sums[f]), free(dw[f]), free(db[f]), free(dx[f]);
                rgt_free_all(5, (rg_tensor *[]){x, dy, ry, w, mv});
            }
    rg_set_num_threads(1);
}
