/* Tests for the BatchNorm2d layer against PyTorch 1.13 (tests/data/nn/bn_ref.safetensors, made by
 * scripts/make_reference_bn.py): training output, gradients, running statistics over two steps,
 * num_batches_tracked, evaluation with the running statistics; the state_dict names; and the
 * SyncBatchNorm hook (called once per forward and backward with 2C+1 numbers; a world of two
 * identical ranks gives the same output and the unbiased variance of the doubled count). */
#include <string.h>

#include "rgtest.h"
#include "tests/models/nn_ref.h"

#define C 3

static rg_tensor *ref_tensor(rg_safetensors *f, const char *name, int ndim, const int64_t *shape) {
    float *d = nn_ref_read(f, name, "F32", rg_shape_numel(ndim, shape));
    rg_tensor *t = rgt_tensor(ndim, shape, d);
    free(d);
    return t;
}

static void expect(rg_safetensors *f, const char *name, const rg_tensor *got, double tol) {
    float *want = nn_ref_read(f, name, "F32", got->numel);
    rgt_assert_close(rg_tensor_f32(got), want, got->numel, tol, tol, name);
    free(want);
}

/* A BatchNorm2d layer with PyTorch's weight and bias; its tensors in state_dict order. */
static rg_layer *ref_layer(rg_safetensors *f) {
    rg_layer *bn = rg_batchnorm2d_new("bn", C);
    const rg_param_list *p = rg_layer_params(bn);
    float *w = nn_ref_read(f, "bn.weight", "F32", C), *b = nn_ref_read(f, "bn.bias", "F32", C);
    memcpy(rg_tensor_f32(p->items[0].tensor), w, sizeof(float) * C);
    memcpy(rg_tensor_f32(p->items[1].tensor), b, sizeof(float) * C);
    free(w), free(b);
    return bn;
}

Test(layers_batchnorm, state_dict_is_pytorchs) {
    rg_layer *bn = rg_batchnorm2d_new("layer1.0.bn1", 4);
    const rg_param_list *p = rg_layer_params(bn);
    static const char *names[] = {"weight", "bias", "running_mean", "running_var",
                                  "num_batches_tracked"};
    static const float init[] = {1, 0, 0, 1};
    cr_assert_eq(p->n, 5);
    for (int i = 0; i < 5; i++) {
        char want[64];
        snprintf(want, sizeof want, "layer1.0.bn1.%s", names[i]);
        cr_assert_str_eq(p->items[i].name, want);
        cr_assert_eq(p->items[i].is_buffer, i >= 2, "%s", want);
        if (i < 4) {
            cr_assert_eq(p->items[i].tensor->numel, 4);
            for (int k = 0; k < 4; k++) cr_assert_eq(rg_tensor_f32(p->items[i].tensor)[k], init[i]);
        }
    }
    cr_assert_eq(p->items[4].tensor->dtype, RG_I64);
    cr_assert_eq(p->items[4].tensor->ndim, 0);
    cr_assert_eq(*(int64_t *)p->items[4].tensor->data, 0);
    rg_layer_free(bn);
}

Test(layers_batchnorm, matches_pytorch_in_training_and_evaluation) {
    rg_safetensors *f = nn_ref_open("bn_ref.safetensors");
    rg_layer *bn = ref_layer(f);
    const rg_param_list *p = rg_layer_params(bn);
    rg_tensor *x1 = ref_tensor(f, "bn.x1", RG_SHAPE(4, C, 5, 5));
    rg_tensor *x2 = ref_tensor(f, "bn.x2", RG_SHAPE(4, C, 5, 5));
    rg_tensor *dy = ref_tensor(f, "bn.dy", RG_SHAPE(4 * C * 25));
    rg_tensor_set_requires_grad(x1, true);

    rg_scope_begin();
    rg_tensor *y1 = rg_layer_forward(bn, x1, RG_TRAIN);
    expect(f, "bn.y1", y1, 1e-5);
    rg_backward(rg_sum(rg_mul(rg_reshape(y1, RG_SHAPE(4 * C * 25)), dy)));
    expect(f, "bn.dx1", x1->grad, 1e-4);
    expect(f, "bn.dweight1", p->items[0].tensor->grad, 1e-4);
    expect(f, "bn.dbias1", p->items[1].tensor->grad, 1e-4);
    rg_scope_end();
    expect(f, "bn.running_mean1", p->items[2].tensor, 1e-6);
    expect(f, "bn.running_var1", p->items[3].tensor, 1e-5);

    rg_scope_begin();
    rg_layer_forward(bn, x2, RG_TRAIN);
    rg_scope_end();
    expect(f, "bn.running_mean2", p->items[2].tensor, 1e-6);
    expect(f, "bn.running_var2", p->items[3].tensor, 1e-5);
    int64_t *nbt = nn_ref_read(f, "bn.num_batches_tracked", "I64", 1);
    cr_assert_eq(*(int64_t *)p->items[4].tensor->data, *nbt);
    cr_assert_eq(*nbt, 2);
    free(nbt);

    rg_tensor *x3 = ref_tensor(f, "bn.x3", RG_SHAPE(2, C, 4, 4));
    rg_tensor *dy3 = ref_tensor(f, "bn.dy3", RG_SHAPE(2 * C * 16));
    rg_tensor_set_requires_grad(x3, true);
    rg_scope_begin();
    rg_tensor *y3 = rg_layer_forward(bn, x3, RG_EVAL);
    expect(f, "bn.y3", y3, 1e-5);
    rg_backward(rg_sum(rg_mul(rg_reshape(y3, RG_SHAPE(2 * C * 16)), dy3)));
    expect(f, "bn.dx3", x3->grad, 1e-5);
    rg_scope_end();
    cr_assert_eq(*(int64_t *)p->items[4].tensor->data, 2, "evaluation does not count batches");
    expect(f, "bn.running_mean2", p->items[2].tensor, 1e-6);

    rgt_free_all(5, (rg_tensor *[]){x1, x2, dy, x3, dy3});
    rg_layer_free(bn);
    rg_safetensors_close(f);
}

/* The affine gradients come from the backward's reduction (no separate accumulation): a second
 * backward over the same batch adds the same amounts, so they double, and dx, fresh per backward,
 * stays PyTorch's. */
Test(layers_batchnorm, affine_gradients_accumulate_over_backwards) {
    rg_safetensors *f = nn_ref_open("bn_ref.safetensors");
    rg_layer *bn = ref_layer(f);
    const rg_param_list *p = rg_layer_params(bn);
    rg_tensor *x1 = ref_tensor(f, "bn.x1", RG_SHAPE(4, C, 5, 5));
    rg_tensor *dy = ref_tensor(f, "bn.dy", RG_SHAPE(4 * C * 25));
    for (int pass = 0; pass < 2; pass++) {
        rg_scope_begin();
        rg_tensor *y = rg_layer_forward(bn, x1, RG_TRAIN);
        rg_backward(rg_sum(rg_mul(rg_reshape(y, RG_SHAPE(4 * C * 25)), dy)));
        rg_scope_end();
    }
    const char *names[2] = {"bn.dweight1", "bn.dbias1"};
    for (int k = 0; k < 2; k++) {
        float *want = nn_ref_read(f, names[k], "F32", C);
        for (int i = 0; i < C; i++) want[i] *= 2.0f;
        rgt_assert_close(rg_tensor_f32(p->items[k].tensor->grad), want, C, 1e-4, 1e-4, names[k]);
        free(want);
    }
    rgt_free_all(2, (rg_tensor *[]){x1, dy});
    rg_layer_free(bn);
    rg_safetensors_close(f);
}

/* A fake world of `ranks` identical ranks: the sum over ranks is the local value times ranks. */
typedef struct {
    int calls;
    int64_t last_n;
    float ranks;
} fake_world;

static rg_status fake_allreduce(void *ctx, float *buf, int64_t n, rg_device dev) {
    fake_world *w = ctx;
    w->calls++, w->last_n = n;
    for (int64_t i = 0; i < n; i++) buf[i] *= w->ranks;
    return RG_OK;
}

Test(layers_batchnorm, sync_hook_sums_statistics_once_each_way) {
    fake_world world = {.ranks = 2.0f};
    rg_bn_sync sync = {.allreduce_sum = fake_allreduce, .ctx = &world};
    rg_layer *plain = rg_batchnorm2d_new("bn", C), *synced = rg_batchnorm2d_new("bn", C);
    cr_assert(rg_batchnorm2d_set_sync(synced, &sync));
    rg_layer *relu = rg_relu_new("r");
    cr_assert(!rg_batchnorm2d_set_sync(relu, &sync), "only a BatchNorm2d takes the hook");
    rg_tensor *x = rgt_param(RG_SHAPE(2, C, 3, 3), -1, 2, 5);
    rg_tensor *x2 = rgt_param(RG_SHAPE(2, C, 3, 3), -1, 2, 5);
    rg_scope_begin();
    rg_tensor *ya = rg_layer_forward(plain, x, RG_TRAIN);
    rg_tensor *yb = rg_layer_forward(synced, x2, RG_TRAIN);
    cr_assert_eq(world.calls, 1);
    cr_assert_eq(world.last_n, 2 * C + 1);
    rgt_assert_close(rg_tensor_f32(yb), rg_tensor_f32(ya), ya->numel, 1e-5, 1e-5, "sync y");
    rg_backward(rg_add(rg_sum(rg_mul(ya, ya)), rg_sum(rg_mul(yb, yb))));
    cr_assert_eq(world.calls, 2, "backward sums the two gradient sums once");
    rgt_assert_close(rg_tensor_f32(x2->grad), rg_tensor_f32(x->grad), x->numel, 1e-5, 1e-5,
                     "sync dx");
    rg_scope_end();
    /* running_var uses the global count: var * m/(m-1) with m = 2 * 18 instead of 18 */
    const float *va = rg_tensor_f32(rg_layer_params(plain)->items[3].tensor);
    const float *vb = rg_tensor_f32(rg_layer_params(synced)->items[3].tensor);
    for (int c = 0; c < C; c++) {
        double var = (va[c] - 0.9) / 0.1 * 17.0 / 18.0; /* biased batch variance */
        double want = 0.9 + 0.1 * var * 36.0 / 35.0;
        cr_assert_float_eq(vb[c], want, 1e-5, "channel %d: %g, want %g", c, (double)vb[c], want);
    }
    rgt_free_all(2, (rg_tensor *[]){x, x2});
    rg_layer_free(plain), rg_layer_free(synced), rg_layer_free(relu);
}

/* SyncBatchNorm's arithmetic, two emulated ranks: the images of a batch dealt out as the sampler
 * does (even to rank 0, odd to rank 1), each rank's statistics (about a shift both share) and
 * gradient sums added as the allreduce would, must give the full batch's output and input
 * gradient (whose statistics are about each channel's first value). */
Test(layers_batchnorm, two_ranks_summing_statistics_equal_one_batch) {
    const rg_backend *be = &rg_cpu_backend;
    enum { N = 8, CH = 5, HW = 36, PLANE = CH * HW };
    rg_tensor *x = rgt_uniform(RG_SHAPE(N, CH, 6, 6), -1, 3, 40);
    rg_tensor *dy = rgt_uniform(RG_SHAPE(N, CH, 6, 6), -1, 1, 41);
    rg_tensor *w = rgt_uniform(RG_SHAPE(CH), 0.5, 2, 42), *b = rgt_uniform(RG_SHAPE(CH), -1, 1, 43);
    const float *xp = x->data, *dyp = dy->data, *wp = w->data, *bp = b->data;
    static float st[3 * CH + 1], mv[2 * CH + 1], sums[2 * CH + 1], y[N * PLANE], dx[N * PLANE];
    be->batchnorm_stats(N, CH, HW, xp, NULL, st);
    be->batchnorm_finalize(CH, 0.1f, st, mv, NULL, NULL, NULL);
    be->batchnorm_apply(N, CH, HW, xp, mv, mv + CH, 1e-5f, wp, bp, NULL, false, y);
    be->batchnorm_backward_reduce(N, CH, HW, xp, dyp, NULL, mv, mv + CH, 1e-5f, sums, 0, NULL, 0,
                                  NULL);
    be->batchnorm_backward_data(N, CH, HW, xp, dyp, NULL, mv, mv + CH, 1e-5f, wp, sums, 0.0f, dx);

    static float rx[2][N / 2 * PLANE], rdy[2][N / 2 * PLANE], rst[2][3 * CH + 1],
        rsum[2][2 * CH + 1], ry[2][N / 2 * PLANE], rdx[2][N / 2 * PLANE];
    for (int i = 0; i < N; i++) {
        memcpy(rx[i % 2] + i / 2 * PLANE, xp + i * PLANE, sizeof(float) * PLANE);
        memcpy(rdy[i % 2] + i / 2 * PLANE, dyp + i * PLANE, sizeof(float) * PLANE);
    }
    float gst[3 * CH + 1], gmv[2 * CH + 1], gsum[2 * CH + 1], shift[CH];
    for (int k = 0; k < CH; k++) shift[k] = 0.25f * (float)k; /* any, as long as both share it */
    for (int r = 0; r < 2; r++) be->batchnorm_stats(N / 2, CH, HW, rx[r], shift, rst[r]);
    for (int k = 0; k < 2 * CH + 1; k++) gst[k] = rst[0][k] + rst[1][k]; /* the allreduce */
    for (int k = 0; k < CH; k++) { /* the shift each rank used rides along, not summed */
        cr_assert_eq(rst[0][2 * CH + 1 + k], shift[k]);
        gst[2 * CH + 1 + k] = rst[0][2 * CH + 1 + k];
    }
    be->batchnorm_finalize(CH, 0.1f, gst, gmv, NULL, NULL, NULL);
    for (int r = 0; r < 2; r++) {
        be->batchnorm_apply(N / 2, CH, HW, rx[r], gmv, gmv + CH, 1e-5f, wp, bp, NULL, false, ry[r]);
        be->batchnorm_backward_reduce(N / 2, CH, HW, rx[r], rdy[r], NULL, gmv, gmv + CH, 1e-5f,
                                      rsum[r], 0, NULL, 0, NULL);
    }
    for (int k = 0; k < 2 * CH + 1; k++) gsum[k] = rsum[0][k] + rsum[1][k];
    for (int r = 0; r < 2; r++)
        be->batchnorm_backward_data(N / 2, CH, HW, rx[r], rdy[r], NULL, gmv, gmv + CH, 1e-5f, wp,
                                    gsum, 0.0f, rdx[r]);
    cr_assert_eq(gst[2 * CH], (float)(N * HW), "the counts add up");
    rgt_assert_close(gsum, sums, 2 * CH + 1, 1e-5, 1e-5, "gradient sums");
    for (int i = 0; i < N; i++) {
        rgt_assert_close(ry[i % 2] + i / 2 * PLANE, y + i * PLANE, PLANE, 1e-5, 1e-5, "y");
        rgt_assert_close(rdx[i % 2] + i / 2 * PLANE, dx + i * PLANE, PLANE, 1e-5, 1e-5, "dx");
    }
    rgt_free_all(4, (rg_tensor *[]){x, dy, w, b});
}
