/* The CUDA backend table entry by entry against the CPU table, on raw buffers: the cases the op
 * front-end does not reach (transposed and strided GEMMs, k = 0, beta = 0 over garbage, NaN in
 * argmax, misaligned Philox offsets, optimizer variants, float16 specials, copies).
 *
 * Bounds (|gpu - cpu| <= atol + rtol |cpu|):
 *   exact: fill, argmax, f32<->f16, dropout masks, copies, relu
 *   gemm 1e-4 + 1e-4 (K <= 300, inputs in [-1, 1]);  sum 1e-5 relative (float tree vs double);
 *   uniform 1e-6 (one FMA); normal 1e-5 (device logf/cosf are within 2 ulp, not glibc's);
 *   sgd, adam 1e-6 (same formulas; division and sqrt are correctly rounded on both). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cudatest.h"

static void gemm_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                      uint64_t seed) {
    int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5; /* strided rows */
    int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc;
    float *a = rgt_rand(na, -1, 1, seed), *b = rgt_rand(nb, -1, 1, seed + 1);
    float *c = rgt_rand(nc, -1, 1, seed + 2);
    if (beta == 0.0f)
        for (int64_t i = 0; i < nc; i++) c[i] = NAN; /* beta 0: C must not be read */
    float *da = rgt_dev(a, na * 4), *db = rgt_dev(b, nb * 4), *dc = rgt_dev(c, nc * 4);
    rg_cpu_backend.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    rgt_gpu()->gemm(ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %lldx%lldx%lld beta=%g", ta, tb, (long long)m,
             (long long)n, (long long)k, (double)beta);
    float *got = malloc(nc * 4);
    rgt_host(got, dc, nc * 4);
    for (int64_t i = 0; i < m; i++) /* only the (m,n) part: the padding of each row is not C's */
        rgt_assert_close(got + i * ldc, c + i * ldc, n, 1e-4, 1e-4, what);
    free(got), free(a), free(b), free(c);
    rgt_dev_free(da, na * 4), rgt_dev_free(db, nb * 4), rgt_dev_free(dc, nc * 4);
}

Test(cuda_kernels, gemm_matches_the_cpu_for_every_transpose_and_stride) {
    RGT_REQUIRE_CUDA();
    int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {33, 17, 300}, {128, 10, 64}};
    for (int t = 0; t < 4; t++)
        for (int tr = 0; tr < 4; tr++) {
            gemm_case(tr & 1, tr & 2, sizes[t][0], sizes[t][1], sizes[t][2], 1.0f, 0.0f, 10 * t);
            gemm_case(tr & 1, tr & 2, sizes[t][0], sizes[t][1], sizes[t][2], 0.5f, 1.0f,
                      10 * t + 5);
        }
    gemm_case(false, false, 4, 6, 0, 1.0f, 0.0f, 7); /* k = 0: C = 0, even over NaN */
    gemm_case(true, false, 4, 6, 0, 1.0f, 0.5f, 8);  /* k = 0: C = beta*C */
}

Test(cuda_kernels, sum_is_close_to_the_cpu_and_deterministic) {
    RGT_REQUIRE_CUDA();
    int64_t sizes[] = {0, 1, 1000, 4097, (1 << 20) + 3};
    for (int t = 0; t < 5; t++) {
        int64_t n = sizes[t];
        float *x = rgt_rand(n, -1, 2, t), want, got1, got2;
        float *dx = rgt_dev(x, n * 4), *dout = rgt_dev(NULL, 4);
        rg_cpu_backend.sum(n, x, &want);
        rgt_gpu()->sum(n, dx, dout);
        rgt_host(&got1, dout, 4);
        rgt_gpu()->sum(n, dx, dout);
        rgt_host(&got2, dout, 4);
        rgt_assert_close(&got1, &want, 1, 1e-6, 1e-5, "sum");
        cr_assert(memcmp(&got1, &got2, 4) == 0, "sum of %lld elements: %.9g then %.9g",
                  (long long)n, (double)got1, (double)got2);
        free(x), rgt_dev_free(dx, n * 4), rgt_dev_free(dout, 4);
    }
}

Test(cuda_kernels, argmax_matches_the_cpu_on_ties_and_nan) {
    RGT_REQUIRE_CUDA();
    int64_t cols_list[] = {1, 10, 33, 1000};
    for (int t = 0; t < 4; t++) {
        int64_t rows = 9, cols = cols_list[t], n = rows * cols;
        float *x = rgt_rand(n, -1, 1, 40 + t);
        for (int64_t j = 0; j < cols; j++) x[1 * cols + j] = 0.5f;      /* all tied */
        x[2 * cols] = NAN;                                              /* NaN first */
        if (cols > 3) x[3 * cols + 2] = NAN, x[3 * cols + 3] = 5.0f;    /* NaN inside */
        for (int64_t j = 0; j < cols; j++) x[4 * cols + j] = -INFINITY; /* all -inf */
        if (cols > 20) x[5 * cols + 7] = 3.0f, x[5 * cols + 20] = 3.0f; /* late tie */
        int64_t want[9], *dout = rgt_dev(NULL, sizeof want);
        float *dx = rgt_dev(x, n * 4);
        rg_cpu_backend.argmax(rows, cols, x, want);
        rgt_gpu()->argmax(rows, cols, dx, dout);
        rgt_assert_dev_equal(dout, want, sizeof want, "argmax");
        free(x), rgt_dev_free(dx, n * 4), rgt_dev_free(dout, sizeof want);
    }
}

Test(cuda_kernels, random_fills_follow_the_same_philox_stream) {
    RGT_REQUIRE_CUDA();
    uint64_t offsets[] = {0, 7, 1ull << 33};
    for (int t = 0; t < 3; t++) {
        int64_t n = 1001;
        float want[1001], *d = rgt_dev(NULL, sizeof want);
        rg_cpu_backend.uniform(n, -2, 3, 77, offsets[t], want);
        rgt_gpu()->uniform(n, -2, 3, 77, offsets[t], d);
        rgt_assert_dev_close(d, want, n, 0, 1e-6, "uniform");
        rg_cpu_backend.normal(n, 1, 2, 78, offsets[t], want);
        rgt_gpu()->normal(n, 1, 2, 78, offsets[t], d);
        rgt_assert_dev_close(d, want, n, 1e-5, 1e-5, "normal");
        rgt_dev_free(d, sizeof want);
    }
}

Test(cuda_kernels, dropout_masks_are_identical_for_any_offset) {
    RGT_REQUIRE_CUDA();
    int64_t n = 999;
    float *x = rgt_rand(n, 0.5f, 1, 1), want[999], *dx = rgt_dev(x, n * 4),
          *dy = rgt_dev(NULL, n * 4);
    uint32_t mask[40];
    uint32_t *dmask = rgt_dev(NULL, sizeof mask);
    float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
    for (int t = 0; t < 4; t++)
        for (int o = 0; o < 4; o++) {
            /* 0 and 4: whole counters as float4s; 3 and 6 element by element */
            uint64_t off = (const uint64_t[]){0, 3, 4, 6}[o];
            int64_t words = rg_dropout_mask_words(n, off);
            cr_assert(words <= 40);
            rg_cpu_backend.dropout_forward(n, ps[t], 9, off, x, want, mask);
            rgt_gpu()->dropout_forward(n, ps[t], 9, off, dx, dy, dmask);
            rgt_assert_dev_equal(dy, want, sizeof want, "dropout forward");
            rgt_assert_dev_equal(dmask, mask, (size_t)words * 4, "dropout mask");
            rg_cpu_backend.dropout_backward(n, ps[t], 9, off, NULL, x, 1.0f, want); /* accumulate */
            rgt_gpu()->dropout_backward(n, ps[t], 9, off, NULL, dx, 1.0f, dy);
            rgt_assert_dev_close(dy, want, n, 0, 1e-6, "dropout backward");
            rg_cpu_backend.dropout_backward(n, ps[t], 9, off, mask, x, 1.0f, want);
            rgt_gpu()->dropout_backward(n, ps[t], 9, off, dmask, dx, 1.0f, dy);
            rgt_assert_dev_close(dy, want, n, 0, 1e-6, "dropout backward from the mask");
        }
    free(x), rgt_dev_free(dx, n * 4), rgt_dev_free(dy, n * 4), rgt_dev_free(dmask, sizeof mask);
}

static void optim_case(const rg_sgd_hparams *sgd, const rg_adam_hparams *adam, uint64_t seed) {
    int64_t n = 5000;
    size_t b = n * 4;
    float *p = rgt_rand(n, -1, 1, seed), *g = rgt_rand(n, -1, 1, seed + 1);
    float *m = rgt_rand(n, -1, 1, seed + 2), *v = rgt_rand(n, 0, 1, seed + 3);
    float *dp = rgt_dev(p, b), *dg = rgt_dev(g, b), *dm = rgt_dev(m, b), *dv = rgt_dev(v, b);
    for (int step = 0; step < 3; step++) {
        if (sgd) {
            bool mom = sgd->momentum != 0.0f;
            rg_sgd_tensor cpu = {
                .n = n, .param = p, .grad = g, .momentum_buf = mom ? m : NULL, .h = *sgd};
            rg_sgd_tensor gpu = {
                .n = n, .param = dp, .grad = dg, .momentum_buf = mom ? dm : NULL, .h = *sgd};
            rg_cpu_backend.sgd_step_many(1, &cpu);
            rgt_gpu()->sgd_step_many(1, &gpu);
        } else {
            rg_cpu_backend.adam_step(n, adam, p, g, m, v);
            rgt_gpu()->adam_step(n, adam, dp, dg, dm, dv);
        }
    }
    rgt_assert_dev_close(dp, p, n, 1e-6, 1e-6, sgd ? "sgd param" : "adam param");
    rgt_assert_dev_close(dm, m, n, 1e-6, 1e-6, sgd ? "sgd momentum" : "adam m");
    if (adam) rgt_assert_dev_close(dv, v, n, 1e-6, 1e-6, "adam v");
    free(p), free(g), free(m), free(v);
    rgt_dev_free(dp, b), rgt_dev_free(dg, b), rgt_dev_free(dm, b), rgt_dev_free(dv, b);
}

/* Zeroing many tensors: 300 ranges of one buffer (three launches of at most 128), sizes around
 * the kernel's 16384-float chunk and empty ones, with a gap of 3 floats after each that must keep
 * its values. */
Test(cuda_kernels, zeroing_many_tensors_zeroes_exactly_them) {
    RGT_REQUIRE_CUDA();
    enum { T = 300, GAP = 3 };
    static const int64_t pattern[] = {0, 1, 255, 16383, 16384, 16385, 40000, 7, 64, 2048};
    int64_t n[T], total = 0;
    for (int t = 0; t < T; t++) total += (n[t] = pattern[t % 10]) + GAP;
    size_t bytes = (size_t)total * 4;
    float *host = rgt_rand(total, 1, 2, 81), *want = malloc(bytes);
    float *dev = rgt_dev(host, bytes), *p[T];
    memcpy(want, host, bytes);
    int64_t off = 0;
    for (int t = 0; t < T; t++) {
        p[t] = dev + off;
        for (int64_t i = 0; i < n[t]; i++) want[off + i] = 0.0f;
        off += n[t] + GAP;
    }
    rgt_gpu()->zero_f32_many(T, p, n);
    rgt_assert_dev_equal(dev, want, bytes, "zeroed ranges and untouched gaps");
    free(host), free(want), rgt_dev_free(dev, bytes);
}

/* The multi-tensor SGD step against the CPU's: 120 tensors, 108 of them not empty (three launches
 * of at most 48, the last one partial), sizes around the kernel's 16384-float chunk, per-tensor
 * hyper-parameters, and tensors without a momentum buffer; three steps, so that the buffers carry.
 */
Test(cuda_kernels, multi_tensor_sgd_step_matches_the_cpu) {
    RGT_REQUIRE_CUDA();
    enum { T = 120 };
    static const int64_t pattern[] = {0, 1, 255, 16383, 16384, 16385, 40000, 7, 64, 2048};
    int64_t sizes[T], total = 0;
    for (int t = 0; t < T; t++) total += sizes[t] = pattern[t % 10];
    size_t bytes = (size_t)total * 4;
    float *p = rgt_rand(total, -1, 1, 71), *g = rgt_rand(total, -1, 1, 72),
          *m = rgt_rand(total, -1, 1, 73);
    float *dp = rgt_dev(p, bytes), *dg = rgt_dev(g, bytes), *dm = rgt_dev(m, bytes);
    rg_sgd_tensor host[T], dev[T];
    for (int step = 0; step < 3; step++) {
        int64_t off = 0;
        for (int t = 0; t < T; t++) {
            bool momentum = t % 7 != 3;
            rg_sgd_hparams h = {.lr = 0.05f + 0.001f * (float)t,
                                .momentum = momentum ? 0.9f : 0.0f,
                                .dampening = t % 5 == 1 ? 0.1f : 0.0f,
                                .weight_decay = t % 3 == 0 ? 0.0f : 1e-2f,
                                .nesterov = t % 5 == 2,
                                .first_step = step == 0,
                                .grad_scale = t % 4 == 0 ? 0.25f : 0.0f};
            host[t] = (rg_sgd_tensor){sizes[t], p + off, g + off, momentum ? m + off : NULL, h};
            dev[t] = (rg_sgd_tensor){sizes[t], dp + off, dg + off, momentum ? dm + off : NULL, h};
            off += sizes[t];
        }
        rg_cpu_backend.sgd_step_many(T, host);
        rgt_gpu()->sgd_step_many(T, dev);
    }
    rgt_assert_dev_close(dp, p, total, 1e-6, 1e-6, "multi-tensor sgd param");
    rgt_assert_dev_close(dm, m, total, 1e-6, 1e-6, "multi-tensor sgd momentum");
    free(p), free(g), free(m);
    rgt_dev_free(dp, bytes), rgt_dev_free(dg, bytes), rgt_dev_free(dm, bytes);
}

Test(cuda_kernels, sgd_and_adam_updates_match_the_cpu) {
    RGT_REQUIRE_CUDA();
    rg_sgd_hparams sgd[] = {
        {.lr = 0.1f},
        {.lr = 0.1f, .momentum = 0.9f, .first_step = true},
        {.lr = 0.05f, .momentum = 0.9f, .dampening = 0.1f, .weight_decay = 1e-2f, .nesterov = true},
        {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-2f, .grad_scale = 0.25f},
    };
    for (int t = 0; t < 4; t++) optim_case(&sgd[t], NULL, 10 * t);
    rg_adam_hparams adam[] = {
        {.lr = 1e-3f,
         .beta1 = 0.9f,
         .beta2 = 0.999f,
         .eps = 1e-8f,
         .weight_decay = 1e-2f,
         .bias_correction1 = 0.1f,
         .bias_correction2 = 0.001f},
        {.lr = 1e-3f,
         .beta1 = 0.9f,
         .beta2 = 0.999f,
         .eps = 1e-8f,
         .weight_decay = 1e-2f,
         .decoupled = true,
         .bias_correction1 = 0.271f,
         .bias_correction2 = 0.003f},
        {.lr = 1e-3f,
         .beta1 = 0.9f,
         .beta2 = 0.999f,
         .eps = 1e-8f,
         .bias_correction1 = 0.1f,
         .bias_correction2 = 0.001f,
         .grad_scale = 1.0f / 3.0f},
    };
    for (int t = 0; t < 3; t++) optim_case(NULL, &adam[t], 100 + 10 * t);
}

Test(cuda_kernels, float16_packing_is_bit_exact) {
    RGT_REQUIRE_CUDA();
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *want16 = malloc(N * 2);
    float *f = malloc(N * 4), *want = malloc(N * 4);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i; /* every half, NaNs and subnormals included */
    uint16_t *dh = rgt_dev(h, N * 2);
    float *df = rgt_dev(NULL, N * 4);
    rg_cpu_backend.f16_to_f32(N, h, want);
    rgt_gpu()->f16_to_f32(N, dh, df);
    rgt_assert_dev_equal(df, want, N * 4, "f16_to_f32");
    for (int i = 0; i < N; i++) /* wide exponents, ties and specials */
        f[i] = ldexpf(1.0f + (float)(i % 1024) / 1024.0f, i % 80 - 40) * (i & 1 ? -1.0f : 1.0f);
    f[0] = INFINITY, f[1] = NAN, f[2] = 65520.0f, f[3] = 65519.0f, f[4] = 1e-8f, f[5] = -0.0f;
    rgt_gpu()->copy(df, f, N * 4, RG_COPY_H2D);
    rg_cpu_backend.f32_to_f16(N, f, want16);
    rgt_gpu()->f32_to_f16(N, df, dh);
    rgt_assert_dev_equal(dh, want16, N * 2, "f32_to_f16");
    free(h), free(want16), free(f), free(want);
    rgt_dev_free(dh, N * 2), rgt_dev_free(df, N * 4);
}

/* Op `op` of the test below on backend be, over n floats of out from offset off; x and dy are
 * that backend's copies of the inputs. */
static void stream_op(const rg_backend *be, int op, int64_t n, int off, const float *x,
                      const float *dy, float *out) {
    switch (op) {
    case 0:
        be->axpby(n, 1.5f, x + off, 0.0f, out + off);
        break;
    case 1:
        be->axpby(n, 1.5f, x + off, -0.5f, out + off);
        break;
    case 2:
        be->relu_forward(n, x + off, out + off);
        break;
    case 3:
        be->relu_backward(n, x + off, dy + 1, 0.5f, out + off);
        break; /* dy misaligned */
    case 4:
        be->relu_forward(n, out + off, out + off);
        break; /* in place */
    default:
        be->relu_backward(n, x + off, dy + 1, 0.0f, out + off);
        break;
    }
}

/* axpby and relu move float4s when every pointer is 16-byte aligned and single floats
 * otherwise, with a scalar tail: each offset 0..3 and lengths around multiples of 4, for every op
 * of stream_op; the whole buffer is compared, so nothing outside the range may change. */
Test(cuda_kernels, streams_match_the_cpu_at_any_alignment_and_length) {
    RGT_REQUIRE_CUDA();
    enum { N = 1040 };
    float *x = rgt_rand(N, -1, 1, 11), *dy = rgt_rand(N, -1, 1, 12), *y0 = rgt_rand(N, -1, 1, 13);
    float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    float *dx = rgt_dev(x, N * 4), *ddy = rgt_dev(dy, N * 4), *dout = rgt_dev(y0, N * 4);
    int64_t lens[] = {1, 3, 4, 7, 37, 1029};
    for (int off = 0; off < 4; off++)
        for (int l = 0; l < 6; l++)
            for (int op = 0; op < 6; op++) {
                const float *init = op == 4 ? x : y0; /* op 4 works in place on a copy of x */
                memcpy(want, init, N * sizeof *want);
                rgt_gpu()->copy(dout, init, N * 4, RG_COPY_H2D);
                stream_op(&rg_cpu_backend, op, lens[l], off, x, dy, want);
                stream_op(rgt_gpu(), op, lens[l], off, dx, ddy, dout);
                rgt_host(got, dout, N * 4);
                char msg[96];
                snprintf(msg, sizeof msg, "op %d, offset %d, length %lld", op, off,
                         (long long)lens[l]);
                rgt_assert_close(got, want, N, 1e-6, 1e-6, msg);
            }
    free(x), free(dy), free(y0), free(want), free(got);
    rgt_dev_free(dx, N * 4), rgt_dev_free(ddy, N * 4), rgt_dev_free(dout, N * 4);
}

Test(cuda_kernels, beta_zero_never_reads_the_output) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    float nans[64], got[64];
    for (int i = 0; i < 64; i++) nans[i] = NAN;
    float *x = rgt_rand(64, -1, 1, 3), *dx = rgt_dev(x, sizeof nans),
          *out = rgt_dev(nans, sizeof nans);
    rg_bcast bc = {.ndim = 2, .shape = {8, 8}, .bstride = {0, 1}, .n = 64, .nb = 8};
    g->reduce_bcast(&bc, dx, NULL, 0.0f, out);   /* out[0, 8) */
    g->relu_backward(16, dx, dx, 0.0f, out + 8); /* out[8, 24) */
    g->axpby(40, 2.0f, dx, 0.0f, out + 24);      /* out[24, 64) */
    rgt_host(got, out, sizeof got);
    for (int i = 0; i < 64; i++) cr_assert(!isnan(got[i]), "element %d read the NaN output", i);
    g->copy(out, nans, sizeof nans, RG_COPY_H2D);
    rg_conv2d_shape cs = {.n = 0,
                          .c = 2,
                          .h = 4,
                          .w = 4,
                          .k = 3,
                          .r = 3,
                          .s = 3,
                          .p = 2,
                          .q = 2,
                          .stride_h = 1,
                          .stride_w = 1};
    g->conv2d_backward_filter(&cs, dx, dx, 0.0f, out, out + 60); /* empty batch: dw = db = 0 */
    rgt_host(got, out, sizeof got);
    for (int i = 0; i < 54; i++) cr_assert_eq(got[i], 0.0f, "dw[%d] of an empty batch", i);
    for (int i = 60; i < 63; i++) cr_assert_eq(got[i], 0.0f, "db[%d] of an empty batch", i - 60);
    free(x), rgt_dev_free(dx, sizeof nans), rgt_dev_free(out, sizeof nans);
}

Test(cuda_kernels, bad_label_gives_a_nan_loss_not_a_bad_read) {
    RGT_REQUIRE_CUDA();
    float z[6] = {1, 2, 3, 4, 5, 6}, loss;
    int64_t labels[2] = {1, 17};
    float *dz = rgt_dev(z, sizeof z), *dp = rgt_dev(NULL, sizeof z), *dl = rgt_dev(NULL, 4);
    int64_t *dy = rgt_dev(labels, sizeof labels);
    rgt_gpu()->cross_entropy_forward(2, 3, dz, dy, 0.0f, dp, dl);
    rgt_host(&loss, dl, 4);
    cr_assert(isnan(loss), "loss %g with a label outside [0, 3)", (double)loss);
    rgt_dev_free(dz, sizeof z), rgt_dev_free(dp, sizeof z), rgt_dev_free(dl, 4);
    rgt_dev_free(dy, sizeof labels);
}

Test(cuda_kernels, copies_memset_and_fill_round_trip) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    enum { N = 3000 };
    float *x = rgt_rand(N, -1, 1, 5), back[N];
    float *a = rgt_dev(x, sizeof back), *b = rgt_dev(NULL, sizeof back);
    g->copy(b, a, sizeof back, RG_COPY_D2D);
    rgt_assert_dev_equal(b, x, sizeof back, "H2D then D2D");
    g->memset0(b, 100 * 4);
    g->fill(N - 200, 2.5f, b + 200);
    rgt_host(back, b, sizeof back);
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], i < 100 ? 0.0f : i < 200 ? x[i] : 2.5f, "element %d", i);
    free(x), rgt_dev_free(a, sizeof back), rgt_dev_free(b, sizeof back);
}
