/* Every differentiable op on cuda:0 against the CPU backend, through the op front-end: the same
 * random inputs on both devices, the forward output and every input gradient compared. The loss
 * is sum(y * r) with a fixed random r, so each backward kernel sees a non-trivial dy; backward
 * runs twice, so the second pass checks the accumulate path (beta = 1) of every kernel as well.
 *
 * Bounds (|gpu - cpu| <= atol + rtol |cpu|), and why:
 *   elementwise (add, mul, relu, scale, dropout, max pool)   1e-6 + 1e-6  (one rounding; FMA)
 *   reductions (sum, broadcast gradients, cross entropy)     1e-5 + 1e-5  (another summation order)
 *   matmul, linear (K <= 100)                                1e-4 + 1e-4  (cuBLAS blocking order)
 *   conv2d                                                   1e-2 + 1e-3  (cuDNN may pick FFT or
 *                                                                          Winograd algorithms)
 * The convolution's absolute bound is for its FFT algorithms, whose error grows with the sum of
 * the magnitudes of the terms rather than with the result: the H200 gave 0.0067 against the CPU
 * on a 5x5 filter gradient of 2.84 that sums 1568 products of [-1, 1] values (1.7e-5 of their
 * magnitudes), when cudnnFind happened to time an FFT algorithm fastest. A wrong index or a lost
 * accumulation is off by O(1), far outside it.
 * TF32 is off unless RG_CUDA_TF32=1, which these bounds do not allow for. */
#include "cudatest.h"
#ifdef RG_CUDA
#include "tensor/cuda/cuda_backend.h" /* rg_cuda_conv_graph_count */
#endif

typedef rg_tensor *(*op_fn)(rg_tensor *const *in, void *ctx);

/* A long-lived copy of t on dev, with t's requires_grad. */
static rg_tensor *copy_to(const rg_tensor *t, rg_device dev) {
    rg_tensor *c = rg_tensor_new(t->dtype, t->ndim, t->shape, dev);
    cr_assert(c, "%s", rg_last_error());
    rg_tensor_copy_(c, t);
    if (rg_tensor_requires_grad(t)) rg_tensor_set_requires_grad(c, true);
    return c;
}

static float *to_host(const rg_tensor *t) {
    float *h = malloc(rg_tensor_nbytes(t) + 1);
    rg_tensor_copy_to_host(t, h);
    return h;
}

/* Runs f on inputs (on the CPU) and on their cuda:0 copies; compares outputs and gradients. */
static void compare(const char *what, op_fn f, void *ctx, int n, rg_tensor **in, double atol,
                    double rtol) {
    rg_tensor *gin[8] = {0}; /* an op may read in[n] as an absent input (conv2d's bias) */
    for (int i = 0; i < n; i++) {
        rg_zero_grad(in[i]); /* the CPU side starts from zero, the GPU side from no gradient */
        gin[i] = copy_to(in[i], RG_CUDA_DEVICE(0));
    }
    float *want = NULL, *got = NULL;
    int64_t numel = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int side = 0; side < 2; side++) {
            rg_tensor **args = side ? gin : in;
            rg_scope_begin();
            rg_tensor *y = f(args, ctx);
            rg_tensor *r = rgt_uniform(y->ndim, y->shape, -1, 1, 99);
            rg_tensor *rd = rg_tensor_to(r, y->device);
            rg_backward(rg_sum(rg_mul(y, rd)));
            if (pass == 0) *(side ? &got : &want) = to_host(y), numel = y->numel;
            rg_scope_end();
            rg_tensor_free(r);
        }
        if (pass == 0) rgt_assert_close(got, want, numel, atol, rtol, what);
        for (int i = 0; i < n; i++) {
            if (!in[i]->grad) continue;
            float *gw = to_host(in[i]->grad), *gg = to_host(gin[i]->grad);
            char msg[128];
            snprintf(msg, sizeof msg, "%s: gradient of input %d after %d backward(s)", what, i,
                     pass + 1);
            rgt_assert_close(gg, gw, in[i]->numel, atol, rtol, msg);
            free(gw), free(gg);
        }
    }
    free(want), free(got);
    for (int i = 0; i < n; i++) rg_tensor_free(gin[i]);
}

static rg_tensor *f_add(rg_tensor *const *in, void *ctx) {
    return rg_add(in[0], in[1]);
}
static rg_tensor *f_mul(rg_tensor *const *in, void *ctx) {
    return rg_mul(in[0], in[1]);
}

Test(cuda_ops, broadcast_add_and_mul_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    int64_t shapes[][2][4] = {
        {{7, 5, 0, 0}, {5, 0, 0, 0}},       /* a bias */
        {{7, 5, 0, 0}, {7, 1, 0, 0}},       /* a column */
        {{2, 3, 4, 5}, {3, 1, 1, 0}},       /* per channel */
        {{4, 6, 0, 0}, {4, 6, 0, 0}},       /* same shape */
        {{3, 1, 5, 2}, {1, 5, 1, 0}},       /* alternating */
        {{300, 129, 0, 0}, {129, 0, 0, 0}}, /* many rows: block reduction of the gradient */
    };
    int nd[][2] = {{2, 1}, {2, 2}, {4, 3}, {2, 2}, {4, 3}, {2, 1}};
    for (size_t t = 0; t < sizeof nd / sizeof nd[0]; t++) {
        rg_tensor *a = rgt_param(nd[t][0], shapes[t][0], -1, 1, 1 + t);
        rg_tensor *b = rgt_param(nd[t][1], shapes[t][1], -1, 1, 50 + t);
        compare("add", f_add, NULL, 2, (rg_tensor *[]){a, b}, 1e-5, 1e-5);
        compare("mul", f_mul, NULL, 2, (rg_tensor *[]){a, b}, 1e-5, 1e-5);
        rgt_free_all(2, (rg_tensor *[]){a, b});
    }
}

static rg_tensor *f_scalar_chain(rg_tensor *const *in, void *ctx) {
    /* relu, scale and a scalar operand (b broadcast over everything), then mean */
    return rg_mean(rg_mul(rg_scale(rg_relu(in[0]), 0.5f), in[1]));
}

Test(cuda_ops, relu_scale_and_mean_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_tensor *x = rgt_param(RG_SHAPE(37, 41), -1, 1, 3), *s = rgt_param(RG_SHAPE(1), 0, 1, 4);
    compare("relu/scale/mean", f_scalar_chain, NULL, 2, (rg_tensor *[]){x, s}, 1e-5, 1e-5);
    rgt_free_all(2, (rg_tensor *[]){x, s});
}

static rg_tensor *f_matmul(rg_tensor *const *in, void *ctx) {
    return rg_matmul(in[0], in[1]);
}
static rg_tensor *f_linear(rg_tensor *const *in, void *ctx) {
    return rg_linear(in[0], in[1], in[2]);
}

Test(cuda_ops, matmul_and_linear_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    int64_t sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 1}, {64, 100, 65}};
    for (size_t t = 0; t < 4; t++) {
        int64_t m = sizes[t][0], k = sizes[t][1], n = sizes[t][2];
        rg_tensor *a = rgt_param(RG_SHAPE(m, k), -1, 1, 10 + t),
                  *b = rgt_param(RG_SHAPE(k, n), -1, 1, 20 + t);
        compare("matmul", f_matmul, NULL, 2, (rg_tensor *[]){a, b}, 1e-4, 1e-4);
        rg_tensor *w = rgt_param(RG_SHAPE(n, k), -1, 1, 30 + t),
                  *bias = rgt_param(RG_SHAPE(n), -1, 1, 40 + t);
        compare("linear", f_linear, NULL, 3, (rg_tensor *[]){a, w, bias}, 1e-4, 1e-4);
        rgt_free_all(4, (rg_tensor *[]){a, b, w, bias});
    }
}

typedef struct {
    int stride, pad;
} conv_cfg;

static rg_tensor *f_conv(rg_tensor *const *in, void *ctx) {
    const conv_cfg *c = ctx;
    return rg_conv2d(in[0], in[1], in[2], c->stride, c->pad);
}

static rg_tensor *f_conv_relu(rg_tensor *const *in, void *ctx) {
    const conv_cfg *c = ctx;
    return rg_conv2d_relu(in[0], in[1], in[2], c->stride, c->pad);
}

/* with the CNN's 2x2/2 max-pool fused after the ReLU (the CUDA backend runs the three kernels) */
static rg_tensor *f_conv_relu_pool(rg_tensor *const *in, void *ctx) {
    const conv_cfg *c = ctx;
    return rg_conv2d_relu_maxpool2d(in[0], in[1], in[2], c->stride, c->pad, 2, 2, 0);
}

static void conv_cases(void) {
    struct {
        int64_t n, c, h, w, k, r;
        conv_cfg cfg;
        bool bias;
    } cases[] = {
        {2, 1, 28, 28, 8, 5, {1, 2}, true}, /* the seed CNN's first layer */
        {3, 8, 14, 14, 16, 3, {1, 1}, true},
        {2, 4, 9, 11, 6, 3, {2, 1}, false}, /* odd sizes, stride 2 */
        {1, 3, 7, 7, 5, 1, {1, 0}, true},   /* 1x1 */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        rg_tensor *x =
            rgt_param(RG_SHAPE(cases[t].n, cases[t].c, cases[t].h, cases[t].w), -1, 1, 60 + t);
        rg_tensor *w =
            rgt_param(RG_SHAPE(cases[t].k, cases[t].c, cases[t].r, cases[t].r), -1, 1, 70 + t);
        rg_tensor *b = cases[t].bias ? rgt_param(RG_SHAPE(cases[t].k), -1, 1, 80 + t) : NULL;
        compare("conv2d", f_conv, &cases[t].cfg, b ? 3 : 2, (rg_tensor *[]){x, w, b}, 1e-2, 1e-3);
        compare("conv2d_relu", f_conv_relu, &cases[t].cfg, b ? 3 : 2, (rg_tensor *[]){x, w, b},
                1e-2, 1e-3);
        compare("conv2d_relu_maxpool2d", f_conv_relu_pool, &cases[t].cfg, b ? 3 : 2,
                (rg_tensor *[]){x, w, b}, 1e-2, 1e-3);
        rgt_free_all(3, (rg_tensor *[]){x, w, b});
    }
}

/* The default: each shape and direction on whichever of cudnnFind's legacy algorithm and the
 * graph API's plan timed faster. */
Test(cuda_ops, conv2d_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    conv_cases();
}

/* The legacy API alone (RG_CUDA_CONV_API=legacy), whose algorithms the default still takes
 * where they time faster and which runs every beta != 0 call. */
Test(cuda_ops, conv2d_through_the_legacy_api_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    setenv("RG_CUDA_CONV_API", "legacy", 1);
    conv_cases();
#ifdef RG_CUDA
    cr_assert_eq(rg_cuda_conv_graph_count(), 0, "RG_CUDA_CONV_API=legacy built graph plans");
#endif
}

/* The same cases through cuDNN's graph API (tensor/cuda/conv2d_graph.cu): graph-only takes its
 * plan wherever one was built; each test runs in a process of its own, whose GPU context reads
 * the variable when it is made. The forward and weight-gradient passes run with beta 0, so every
 * case must have put at least those two directions on a graph plan. */
Test(cuda_ops, conv2d_through_the_graph_api_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    setenv("RG_CUDA_CONV_API", "graph-only", 1);
    conv_cases();
#ifdef RG_CUDA /* (a build without CUDA skipped above) */
    int plans = rg_cuda_conv_graph_count();
    cr_assert_geq(plans, 2 * 4,
                  "%d directions on graph-API plans (RG_CUDA_CONV_VERBOSE=1 says why)", plans);
#endif
}

static rg_tensor *f_pool(rg_tensor *const *in, void *ctx) {
    const int *k = ctx; /* kernel, stride, padding */
    return rg_max_pool2d(in[0], k[0], k[1], k[2]);
}

Test(cuda_ops, max_pool2d_matches_the_cpu_exactly) {
    RGT_REQUIRE_CUDA();
    int cfgs[][3] = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 3, 0}}; /* overlapping and gapped */
    for (int t = 0; t < 4; t++) {
        rg_tensor *x = rgt_param(RG_SHAPE(2, 3, 11, 9), -1, 1, 90 + t);
        float *xp = rg_tensor_f32(x);
        for (int i = 0; i < 40; i++) xp[i * 7] = 0.25f; /* ties: the first maximum wins */
        compare("max_pool2d", f_pool, cfgs[t], 1, &x, 0.0, 0.0);
        rg_tensor_free(x);
    }
}

static rg_tensor *f_dropout(rg_tensor *const *in, void *ctx) {
    uint64_t offset = 12; /* not a multiple of 4: a partial first Philox counter */
    return rg_dropout(in[0], 0.3f, true, 1234, &offset);
}

Test(cuda_ops, dropout_drops_the_same_elements_as_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_tensor *x = rgt_param(RG_SHAPE(33, 65), 0.5f, 1, 5);
    compare("dropout", f_dropout, NULL, 1, &x, 0.0, 1e-6);
    rg_tensor_free(x);
}

static rg_tensor *f_xent(rg_tensor *const *in, void *ctx) {
    return rg_cross_entropy(in[0], in[1]);
}

Test(cuda_ops, cross_entropy_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    int64_t shapes[][2] = {{1, 1}, {8, 10}, {128, 10}, {5, 1000}};
    for (int t = 0; t < 4; t++) {
        int64_t n = shapes[t][0], c = shapes[t][1];
        rg_tensor *z = rgt_param(RG_SHAPE(n, c), -5, 5, 100 + t);
        rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(n), RG_CPU);
        for (int64_t i = 0; i < n; i++) ((int64_t *)y->data)[i] = (i * 7 + 3) % c;
        compare("cross_entropy", f_xent, NULL, 2, (rg_tensor *[]){z, y}, 1e-5, 1e-5);
        rgt_free_all(2, (rg_tensor *[]){z, y});
    }
}

static rg_tensor *f_cnn(rg_tensor *const *in, void *ctx) {
    /* conv -> relu -> pool -> flatten -> linear -> cross entropy: the seed CNN in small */
    rg_tensor *h = rg_max_pool2d(rg_relu(rg_conv2d(in[0], in[1], in[2], 1, 1)), 2, 2, 0);
    rg_tensor *logits = rg_linear(rg_flatten(h), in[3], in[4]);
    return rg_cross_entropy(logits, in[5]);
}

Test(cuda_ops, small_cnn_step_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 1, 12, 12), 0, 1, 1);
    rg_tensor *w1 = rgt_param(RG_SHAPE(6, 1, 3, 3), -0.5f, 0.5f, 2),
              *b1 = rgt_param(RG_SHAPE(6), -0.1f, 0.1f, 3);
    rg_tensor *w2 = rgt_param(RG_SHAPE(10, 6 * 6 * 6), -0.1f, 0.1f, 4),
              *b2 = rgt_param(RG_SHAPE(10), -0.1f, 0.1f, 5);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(4), RG_CPU);
    for (int i = 0; i < 4; i++) ((int64_t *)y->data)[i] = 3 * i;
    compare("cnn", f_cnn, NULL, 6, (rg_tensor *[]){x, w1, b1, w2, b2, y}, 1e-3, 1e-3);
    rgt_free_all(6, (rg_tensor *[]){x, w1, b1, w2, b2, y});
}

static rg_tensor *f_xent_smooth(rg_tensor *const *in, void *ctx) {
    return rg_cross_entropy_smooth(in[0], in[1], 0.1f);
}

Test(cuda_ops, label_smoothed_cross_entropy_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_tensor *z = rgt_param(RG_SHAPE(16, 10), -5, 5, 140);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(16), RG_CPU);
    for (int64_t i = 0; i < 16; i++) ((int64_t *)y->data)[i] = (i * 7 + 3) % 10;
    compare("cross_entropy smoothed", f_xent_smooth, NULL, 2, (rg_tensor *[]){z, y}, 1e-5, 1e-5);
    rgt_free_all(2, (rg_tensor *[]){z, y});
}

static rg_tensor *f_avgpool(rg_tensor *const *in, void *ctx) {
    return rg_global_avg_pool2d(in[0]);
}

/* Training-mode batch norm (no running statistics: each side would update its own) */
static rg_tensor *f_bn_train(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d(in[0], in[1], in[2], NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
}

/* Evaluation-mode batch norm: in[3], in[4] are the running mean and variance */
static rg_tensor *f_bn_eval(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d(in[0], in[1], in[2], in[3], in[4], NULL, false, 0.1f, 1e-5f, NULL);
}
/* The same with the ReLU fused (rg_batch_norm2d_relu: the apply kernel's relu flag; backward's
 * reduce and data kernels mask dy by the output as they load it) */
static rg_tensor *f_bn_relu_train(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d_relu(in[0], in[1], in[2], NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL);
}
static rg_tensor *f_bn_relu_eval(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d_relu(in[0], in[1], in[2], in[3], in[4], NULL, false, 0.1f, 1e-5f, NULL);
}
/* ... and with the residual add before the ReLU (rg_batch_norm2d_add_relu: the apply kernel adds
 * in[3] / in[5]; backward writes its gradient with the ReLU's mask) */
static rg_tensor *f_bn_add_relu_train(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d_add_relu(in[0], in[1], in[2], NULL, NULL, NULL, true, 0.1f, 1e-5f, NULL,
                                    in[3]);
}
static rg_tensor *f_bn_add_relu_eval(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d_add_relu(in[0], in[1], in[2], in[3], in[4], NULL, false, 0.1f, 1e-5f,
                                    NULL, in[5]);
}
/* ... without weight and bias: in[1], in[2] are the running statistics (dx needs no sums) */
static rg_tensor *f_bn_eval_x(rg_tensor *const *in, void *ctx) {
    return rg_batch_norm2d(in[0], NULL, NULL, in[1], in[2], NULL, false, 0.1f, 1e-5f, NULL);
}

/* The shapes cover the kernels' walk: planes of one chunk (7x7, 1x1, 1x3), planes that end
 * inside a chunk (11x13 = 143), planes of many chunks with few channels (40x40 with C = 8: the
 * reductions split each channel over several blocks), and a batch larger than a block. */
Test(cuda_ops, batch_norm_and_global_avg_pool_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    int64_t shapes[][4] = {{2, 3, 4, 5},   {8, 64, 7, 7},  {4, 16, 1, 1},
                           {4, 8, 40, 40}, {3, 5, 11, 13}, {300, 2, 1, 3}};
    for (int t = 0; t < 6; t++) {
        int64_t *s = shapes[t];
        rg_tensor *x = rgt_param(RG_SHAPE(s[0], s[1], s[2], s[3]), -2, 3, 150 + t);
        rg_tensor *g = rgt_param(RG_SHAPE(s[1]), 0.5, 2, 160 + t);
        rg_tensor *b = rgt_param(RG_SHAPE(s[1]), -1, 1, 170 + t);
        compare("batch_norm2d train", f_bn_train, NULL, 3, (rg_tensor *[]){x, g, b}, 1e-4, 1e-4);
        compare("batch_norm2d_relu train", f_bn_relu_train, NULL, 3, (rg_tensor *[]){x, g, b}, 1e-4,
                1e-4);
        rg_tensor *res = rgt_param(RG_SHAPE(s[0], s[1], s[2], s[3]), -1, 1, 185 + t);
        compare("batch_norm2d_add_relu train", f_bn_add_relu_train, NULL, 4,
                (rg_tensor *[]){x, g, b, res}, 1e-4, 1e-4);
        compare("global_avg_pool2d", f_avgpool, NULL, 1, &x, 1e-5, 1e-5);
        rg_tensor *rm = rgt_uniform(RG_SHAPE(s[1]), -1, 1, 175 + t);
        rg_tensor *rv = rgt_uniform(RG_SHAPE(s[1]), 0.5, 2, 178 + t);
        compare("batch_norm2d eval", f_bn_eval, NULL, 5, (rg_tensor *[]){x, g, b, rm, rv}, 1e-4,
                1e-4);
        compare("batch_norm2d_relu eval", f_bn_relu_eval, NULL, 5, (rg_tensor *[]){x, g, b, rm, rv},
                1e-4, 1e-4);
        compare("batch_norm2d_add_relu eval", f_bn_add_relu_eval, NULL, 6,
                (rg_tensor *[]){x, g, b, rm, rv, res}, 1e-4, 1e-4);
        compare("batch_norm2d eval, no affine", f_bn_eval_x, NULL, 3, (rg_tensor *[]){x, rm, rv},
                1e-4, 1e-4);
        rgt_free_all(6, (rg_tensor *[]){x, g, b, rm, rv, res});
    }
}

/* On the GPU too, the fused BatchNorm + ReLU and BatchNorm + add + ReLU give
 * rg_relu(rg_batch_norm2d) and rg_relu(rg_add(...)) bit for bit, forward and every gradient: the
 * mask of y > 0 must be the ReLU's own, including where y is 0 (the CPU's test,
 * rgt_bn_fused_matches_unfused). First run on a GPU in the twenty-seventh session (an H200). */
Test(cuda_ops, fused_batch_norm_relu_is_the_unfused_ops_bit_for_bit) {
    RGT_REQUIRE_CUDA();
    rgt_bn_fused_matches_unfused(RG_CUDA_DEVICE(0), false);
    rgt_bn_fused_matches_unfused(RG_CUDA_DEVICE(0), true);
}

/* Channels whose mean is 10^4 times their spread: the statistics about each channel's first value
 * (batchnorm_stats) keep the variance on both sides, where sums of x and x^2 lost it. */
Test(cuda_ops, batch_norm_of_channels_far_from_zero_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    const int64_t planes[2] = {2, 10};
    for (int t = 0; t < 2; t++) {
        int64_t p = planes[t], hw = p * p;
        rg_tensor *x = rgt_uniform(RG_SHAPE(8, 3, p, p), -1.7320508, 1.7320508, 190 + t);
        float *xp = rg_tensor_f32(x);
        for (int64_t i = 0; i < x->numel; i++) xp[i] += (i / hw) % 3 == 1 ? 1e4f : 0.0f;
        rg_tensor *cpu[2] = {rgt_uniform(RG_SHAPE(3), 0, 0, 191),
                             rgt_uniform(RG_SHAPE(3), 1, 1, 192)};
        rg_tensor *gpu[2] = {copy_to(cpu[0], RG_CUDA_DEVICE(0)),
                             copy_to(cpu[1], RG_CUDA_DEVICE(0))};
        float *y[2];
        for (int side = 0; side < 2; side++) {
            rg_tensor **st = side ? gpu : cpu;
            rg_scope_begin();
            rg_tensor *xd = rg_tensor_to(x, st[0]->device);
            y[side] = to_host(
                rg_batch_norm2d(xd, NULL, NULL, st[0], st[1], NULL, true, 1.0f, 1e-5f, NULL));
            rg_scope_end();
        }
        /* x near 10^4 is a float to 0.001, so y to about that */
        rgt_assert_close(y[1], y[0], x->numel, 4e-3, 1e-3, "y");
        /* With momentum 1 the running variance is the batch's unbiased variance, here taken in
         * double about the channel's mean: the CPU must give it too (a uniform sample of 32 values
         * can be 10% off the distribution's variance of 1, so that is no reference). */
        float *want = to_host(cpu[1]), *got = to_host(gpu[1]);
        for (int ch = 0; ch < 3; ch++) {
            double sum = 0, ss = 0, n = 0;
            for (int64_t i = 0; i < x->numel; i++)
                if ((i / hw) % 3 == ch) sum += xp[i], n++;
            for (int64_t i = 0; i < x->numel; i++)
                if ((i / hw) % 3 == ch) ss += (xp[i] - sum / n) * (xp[i] - sum / n);
            double var = ss / (n - 1);
            cr_assert(fabs(want[ch] - var) < 2e-3 * var, "CPU running_var %g, batch's %g",
                      (double)want[ch], var);
        }
        rgt_assert_close(got, want, 3, 1e-5, 1e-4, "running_var");
        free(want), free(got), free(y[0]), free(y[1]);
        rgt_free_all(2, cpu), rgt_free_all(2, gpu), rg_tensor_free(x);
    }
}

Test(cuda_ops, batch_norm_running_statistics_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_tensor *x = rgt_uniform(RG_SHAPE(4, 8, 5, 5), -2, 3, 180);
    rg_tensor *cpu[3] = {rgt_uniform(RG_SHAPE(8), -1, 1, 181),
                         rgt_uniform(RG_SHAPE(8), 0.5, 2, 182),
                         rg_tensor_new(RG_I64, 0, NULL, RG_CPU)};
    rg_tensor *gpu[3];
    for (int i = 0; i < 3; i++) gpu[i] = copy_to(cpu[i], RG_CUDA_DEVICE(0));
    for (int side = 0; side < 2; side++) {
        rg_tensor **st = side ? gpu : cpu;
        rg_scope_begin();
        rg_tensor *xd = rg_tensor_to(x, st[0]->device);
        for (int k = 0; k < 3; k++)
            (void)rg_batch_norm2d(xd, NULL, NULL, st[0], st[1], st[2], true, 0.1f, 1e-5f, NULL);
        rg_scope_end();
    }
    for (int i = 0; i < 2; i++) {
        float *want = to_host(cpu[i]), *got = to_host(gpu[i]);
        rgt_assert_close(got, want, 8, 1e-5, 1e-5, i ? "running_var" : "running_mean");
        free(want), free(got);
    }
    int64_t n_gpu = 0;
    rg_tensor_copy_to_host(gpu[2], &n_gpu);
    cr_assert_eq(n_gpu, 3, "num_batches_tracked on the GPU: %lld", (long long)n_gpu);
    cr_assert_eq(*(int64_t *)cpu[2]->data, 3);
    rgt_free_all(3, cpu), rgt_free_all(3, gpu), rg_tensor_free(x);
}
