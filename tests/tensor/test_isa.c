/* Tests of the per-instruction-set copies of the hot CPU kernels (tensor/cpu/isa_impl.h): every
 * copy this CPU runs gives the generic copy's results on the same inputs (bit for bit where the
 * arithmetic is the same, within float rounding where FMA or a different tiling changes the order
 * of a sum), and the choice is one this CPU runs. Copies the CPU lacks are left out, so the test
 * passes on any x86-64 machine; tests/tensor/tests.cmake also reruns whole test programs under
 * RG_ISA=<each set>. */
#include "rgtest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isas[] = {"avx2", "avx512", "native"};

/* n floats from Philox stream seed, uniform in [lo, hi). */
static float *rand_floats(int64_t n, float lo, float hi, uint64_t seed) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    cr_assert(x);
    /* the generic copy's draw; a -DRG_NATIVE=ON build has only its native copy */
    const rg_backend *b = rg_cpu_backend_isa("generic");
    (b ? b : &rg_cpu_backend)->uniform(n, lo, hi, seed, 0, x);
    return x;
}

static bool f16_nan(uint16_t h) {
    return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
}

static float *zeros(int64_t n) {
    float *x = calloc((size_t)(n > 0 ? n : 1), sizeof *x);
    cr_assert(x);
    return x;
}

Test(tensor_isa, the_choice_is_a_set_this_cpu_runs) {
    const char *isa = rg_cpu_isa();
    cr_assert(rg_cpu_isa_supported(isa), "%s", isa);
    cr_assert(rg_cpu_isa_init() == RG_OK);
    cr_assert_eq(rg_cpu_backend_isa(isa), &rg_cpu_backend, "%s", isa);
    cr_assert(rg_cpu_isa_supported("generic") || rg_cpu_isa_supported("native"));
    cr_assert(!rg_cpu_isa_supported("avx9000"));
    cr_assert(!rg_cpu_isa_supported(NULL));
    const char *want = getenv("RG_ISA");
    if (want && *want) cr_assert_str_eq(isa, want);
}

/* Runs one conv pass on table t. pass 0: forward, 1: backward data, 2: backward filter; 3, 4, 5:
 * the same with a fused ReLU (relu_y: its output, for the backward passes' mask); 6, 7: both
 * backward passes in one call, without and with the ReLU (out: dx, then dw). */
static void conv_pass(const rg_backend *t, int pass, const rg_conv2d_shape *shape, const float *x,
                      const float *w, const float *b, const float *dy, const float *relu_y,
                      float *out, float *db) {
    rg_conv2d_shape s = *shape;
    s.relu = pass == 3;
    s.relu_y = pass == 4 || pass == 5 || pass == 7 ? relu_y : NULL;
    if (pass >= 6)
        t->conv2d_backward(&s, x, dy, w, 0.5f, out, 1.0f, out + s.n * s.c * s.h * s.w, db);
    else if (pass % 3 == 0)
        t->conv2d_forward(&s, x, w, b, out);
    else if (pass % 3 == 1)
        t->conv2d_backward_data(&s, dy, w, 0.5f, out); /* beta: accumulate half */
    else
        t->conv2d_backward_filter(&s, x, dy, 1.0f, out, db);
}

static rg_conv2d_shape conv_shape(int64_t n, int64_t c, int64_t h, int64_t k, int64_t r, int st,
                                  int pad) {
    rg_conv2d_shape s = {.n = n,
                         .c = c,
                         .h = h,
                         .w = h + 1,
                         .k = k,
                         .r = r,
                         .s = r,
                         .stride_h = st,
                         .stride_w = st,
                         .pad_h = pad,
                         .pad_w = pad};
    s.p = (s.h + 2 * pad - r) / st + 1, s.q = (s.w + 2 * pad - r) / st + 1;
    return s;
}

Test(tensor_isa, conv2d_passes_match_generic) {
    rg_set_num_threads(2);
    const rg_conv2d_shape shapes[] = {
        conv_shape(3, 1, 28, 32, 3, 1, 1),  /* the CNN's conv1: the direct path */
        conv_shape(2, 32, 14, 64, 3, 1, 1), /* conv2: the channels-last tiles */
        conv_shape(2, 5, 9, 7, 3, 2, 1),    /* odd sizes, stride 2: partial tiles */
        conv_shape(2, 19, 8, 21, 1, 2, 0),  /* 1x1, strided */
        conv_shape(1, 3, 11, 40, 5, 1, 2),
        conv_shape(1, 37, 6, 9, 3, 1, 1), /* weights in 16-channel blocks, a rest */
    };
    const rg_backend *g = rg_cpu_backend_isa("generic");
    cr_assert(g || rg_cpu_isa_supported("native"));
    if (!g) return; /* a -DRG_NATIVE=ON build has one copy only */
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const rg_conv2d_shape *s = &shapes[si];
        int64_t nx = s->n * s->c * s->h * s->w, nw = s->k * s->c * s->r * s->s;
        int64_t ny = s->n * s->k * s->p * s->q;
        float *x = rand_floats(nx, -1, 1, 1 + si), *w = rand_floats(nw, -1, 1, 2 + si);
        float *b = rand_floats(s->k, -1, 1, 3 + si), *dy = rand_floats(ny, -1, 1, 4 + si);
        float *relu_y = rand_floats(ny, -1, 1, 5 + si); /* a ReLU's output: half zeros */
        for (int64_t i = 0; i < ny; i++) relu_y[i] = relu_y[i] < 0.0f ? 0.0f : relu_y[i];
        relu_y[0] = NAN, relu_y[ny - 1] = -0.0f; /* NaN keeps dy, -0 drops it */
        for (int pass = 0; pass < 8; pass++) {
            int64_t n = pass >= 6 ? nx + nw : pass % 3 == 0 ? ny : pass % 3 == 1 ? nx : nw;
            float *want = rand_floats(n, -1, 1, 9), *wdb = rand_floats(s->k, -1, 1, 10);
            conv_pass(g, pass, s, x, w, b, dy, relu_y, want, wdb);
            for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
                const rg_backend *t = rg_cpu_backend_isa(isas[i]);
                if (!t) continue;
                float *got = rand_floats(n, -1, 1, 9), *gdb = rand_floats(s->k, -1, 1, 10);
                conv_pass(t, pass, s, x, w, b, dy, relu_y, got, gdb);
                char what[96];
                snprintf(what, sizeof what, "%s: shape %zu, pass %d", isas[i], si, pass);
                rgt_assert_close(got, want, n, 1e-4, 1e-4, what);
                if (pass % 3 == 2 || pass >= 6) rgt_assert_close(gdb, wdb, s->k, 1e-4, 1e-4, what);
                free(got), free(gdb);
            }
            free(want), free(wdb);
        }
        free(x), free(w), free(b), free(dy), free(relu_y);
    }
}

/* A square k x k pooling window with that stride and padding; the output size as PyTorch's. */
static rg_pool2d_shape pool_shape(int64_t n, int64_t c, int64_t h, int64_t w, int k, int st,
                                  int pad) {
    return (rg_pool2d_shape){.n = n,
                             .c = c,
                             .h = h,
                             .w = w,
                             .p = (h + 2 * pad - k) / st + 1,
                             .q = (w + 2 * pad - k) / st + 1,
                             .kernel_h = k,
                             .kernel_w = k,
                             .stride_h = st,
                             .stride_w = st,
                             .pad_h = pad,
                             .pad_w = pad};
}

/* Compares the float outputs of one element-wise kernel call on every copy with generic's. */
#define FOR_EACH_COPY(t, name)                                                                     \
    for (size_t i_ = 0; i_ < sizeof isas / sizeof *isas; i_++)                                     \
        for (const rg_backend *t = rg_cpu_backend_isa(isas[i_]); t; t = NULL)                      \
            for (const char *name = isas[i_]; name; name = NULL)

Test(tensor_isa, elementwise_dropout_and_maxpool_match_generic) {
    rg_set_num_threads(2);
    const rg_backend *g = rg_cpu_backend_isa("generic");
    if (!g) return;
    const int64_t n = 100003; /* odd: every vector loop has a tail; over RG_CPU_PAR_MIN */
    float *x = rand_floats(n, -2, 2, 21), *dy = rand_floats(n, -2, 2, 22);
    float *want = zeros(n), *got = zeros(n);
    float *xs = zeros(n); /* x with special values, for the kernels that only compare or scale */
    memcpy(xs, x, n * sizeof(float));
    xs[5] = NAN, xs[6] = -0.0f, xs[7] = INFINITY, xs[8] = -INFINITY;
/* tol < 0: bit for bit; else within tol relative (a fused multiply-add rounds once where the
 * generic copy rounds twice, as in a*x + b*y) */
#define CHECK(call_g, call_t, what, tol)                                                           \
    do {                                                                                           \
        memcpy(want, dy, n * sizeof(float)), memcpy(got, dy, n * sizeof(float));                   \
        call_g;                                                                                    \
        FOR_EACH_COPY(t, isa) {                                                                    \
            memcpy(got, dy, n * sizeof(float));                                                    \
            call_t;                                                                                \
            char w_[64];                                                                           \
            snprintf(w_, sizeof w_, "%s: %s", isa, what);                                          \
            if (tol < 0)                                                                           \
                cr_assert(!memcmp(got, want, n * sizeof(float)), "%s", w_);                        \
            else                                                                                   \
                rgt_assert_close(got, want, n, tol, tol, w_);                                      \
        }                                                                                          \
    } while (0)
#define SAME(call_g, call_t, what) CHECK(call_g, call_t, what, -1.0)
#define CLOSE(call_g, call_t, what) CHECK(call_g, call_t, what, 1e-6)
    SAME(g->relu_forward(n, xs, want), t->relu_forward(n, xs, got), "relu_forward");
    SAME(g->relu_backward(n, xs, dy, 0.0f, want), t->relu_backward(n, xs, dy, 0.0f, got),
         "relu_bwd");
    CLOSE(g->relu_backward(n, x, dy, 1.0f, want), t->relu_backward(n, x, dy, 1.0f, got),
          "relu_bwd acc");
    SAME(g->dropout_forward(n, 0.3f, 5, 7, xs, want, NULL),
         t->dropout_forward(n, 0.3f, 5, 7, xs, got, NULL), "dropout_forward");
    CLOSE(g->dropout_backward(n, 0.3f, 5, 3, NULL, dy, 1.0f, want),
          t->dropout_backward(n, 0.3f, 5, 3, NULL, dy, 1.0f, got), "dropout_backward");
    uint32_t *mask = calloc((size_t)rg_dropout_mask_words(n, 3), sizeof *mask);
    g->dropout_forward(n, 0.3f, 5, 3, xs, want, mask);
    CLOSE(g->dropout_backward(n, 0.3f, 5, 3, mask, dy, 1.0f, want),
          t->dropout_backward(n, 0.3f, 5, 3, mask, dy, 1.0f, got), "dropout_backward from mask");
    free(mask);
    CLOSE(g->axpby(n, 0.5f, x, -2.0f, want), t->axpby(n, 0.5f, x, -2.0f, got), "axpby");
    SAME(g->fill(n, 3.0f, want), t->fill(n, 3.0f, got), "fill");
    CLOSE(g->uniform(n, -1, 2, 8, 3, want), t->uniform(n, -1, 2, 8, 3, got), "uniform");
    rg_bcast bc = {.ndim = 2, .shape = {n / 7, 7}, .bstride = {0, 1}, .n = n / 7 * 7, .nb = 7};
    SAME(g->binary(RG_BINARY_MUL, &bc, x, dy, want), t->binary(RG_BINARY_MUL, &bc, x, dy, got),
         "binary mul");
    /* f16 packing: the F16C copies round exactly as the scalar formula */
    uint16_t *hw = malloc(n * sizeof *hw), *ht = malloc(n * sizeof *ht);
    cr_assert(hw && ht);
    g->f32_to_f16(n, xs, hw);
    FOR_EACH_COPY(t, isa) {
        t->f32_to_f16(n, xs, ht);
        cr_assert(!memcmp(ht, hw, n * sizeof *hw), "%s: f32_to_f16", isa);
    }
    SAME(g->f16_to_f32(n, hw, want), t->f16_to_f32(n, hw, got), "f16_to_f32");
    /* every half, signalling NaNs included (F16C quiets them; the GPU ran the scalar formula,
     * which did not, until the first GPU run), and float NaNs with payloads, bit for bit; 65539
     * values: a vector tail too */
    enum { NH = 65539 };
    uint16_t *h_all = malloc(NH * sizeof *h_all);
    float *fw = malloc(NH * sizeof *fw), *ft = malloc(NH * sizeof *ft);
    cr_assert(h_all && fw && ft);
    for (int i = 0; i < NH; i++) h_all[i] = (uint16_t)(i < 65536 ? i : 0x7C01 + i);
    g->f16_to_f32(NH, h_all, fw);
    uint32_t snan;
    memcpy(&snan, &fw[0xFC01], 4);
    cr_assert_eq(snan, 0xFFC02000u, "f16 signalling nan fc01 -> %08x, want ffc02000", snan);
    FOR_EACH_COPY(t, isa) {
        t->f16_to_f32(NH, h_all, ft);
        cr_assert(!memcmp(ft, fw, NH * sizeof *fw), "%s: f16_to_f32 of every half", isa);
    }
    static const uint32_t nan_bits[] = {0x7F800001u, 0x7FA00000u, 0xFF812345u, 0x7FC00001u,
                                        0x7FFFFFFFu, 0xFFC02000u, 0x7F802000u, 0x7FBFE000u};
    for (int i = 0; i < NH; i++) memcpy(&fw[i], &nan_bits[i % 8], 4);
    g->f32_to_f16(NH, fw, hw);
    for (int i = 0; i < NH; i++) cr_assert(f16_nan(hw[i]) && (hw[i] & 0x200u), "quiet nan");
    FOR_EACH_COPY(t, isa) {
        t->f32_to_f16(NH, fw, ht);
        cr_assert(!memcmp(ht, hw, NH * sizeof *hw), "%s: f32_to_f16 of nan payloads", isa);
    }
    free(h_all), free(fw), free(ft);
    /* max-pooling, 2x2 and a padded 3x3 stride 2, forward (values and argmax) and backward */
    rg_pool2d_shape ps[4] = {
        pool_shape(4, 8, 28, 28, 2, 2, 0),
        pool_shape(2, 3, 13, 11, 3, 2, 1),
        /* the CNN's pooling (12 outputs a row, under one AVX-512 vector) and an odd 41x9 plane
         * (20 outputs a row: a full vector and a masked one; an unpooled last row and column),
         * both on tie-heavy input with NaNs (xq) */
        pool_shape(3, 5, 24, 24, 2, 2, 0),
        pool_shape(2, 3, 9, 41, 2, 2, 0),
    };
    float *xq = zeros(n); /* values in steps of 0.5 (many ties), a NaN every 97 elements */
    for (int64_t i = 0; i < n; i++) xq[i] = i % 97 == 3 ? NAN : roundf(x[i] * 2.0f) / 2.0f;
    for (int k = 0; k < 4; k++) {
        const float *in = k < 2 ? xs : xq;
        int64_t no = ps[k].n * ps[k].c * ps[k].p * ps[k].q,
                ni = ps[k].n * ps[k].c * ps[k].h * ps[k].w;
        int32_t *aw = malloc(no * sizeof *aw), *at = malloc(no * sizeof *at);
        cr_assert(aw && at);
        g->maxpool2d_forward(&ps[k], in, want, aw);
        FOR_EACH_COPY(t, isa) {
            t->maxpool2d_forward(&ps[k], in, got, at);
            cr_assert(!memcmp(got, want, no * sizeof(float)), "%s: maxpool fwd %d", isa, k);
            cr_assert(!memcmp(at, aw, no * sizeof *aw), "%s: maxpool argmax %d", isa, k);
        }
        for (int bi = 0; bi < 3; bi++) { /* beta 1 (accumulate), 0 (overwrite), 0.5 */
            float beta = bi == 0 ? 1.0f : bi == 1 ? 0.0f : 0.5f;
            memcpy(want, x, ni * sizeof(float));
            g->maxpool2d_backward(&ps[k], dy, aw, beta, want);
            FOR_EACH_COPY(t, isa) {
                memcpy(got, x, ni * sizeof(float));
                t->maxpool2d_backward(&ps[k], dy, aw, beta, got);
                cr_assert(!memcmp(got, want, ni * sizeof(float)), "%s: maxpool bwd %d beta %g", isa,
                          k, beta);
            }
        }
        free(aw), free(at);
    }
    free(xq);
    free(hw), free(ht), free(xs), free(x), free(dy), free(want), free(got);
}

Test(tensor_isa, reductions_match_generic_within_rounding) {
    rg_set_num_threads(1);
    const rg_backend *g = rg_cpu_backend_isa("generic");
    if (!g) return;
    const int64_t rows = 37, len = 1001;
    float *x = rand_floats(rows * len, -1, 1, 31), *dy = rand_floats(rows * len, -1, 1, 32);
    float sw, st;
    g->sum(rows * len, x, &sw);
    rg_bcast bc = {.ndim = 2, .shape = {rows, len}, .bstride = {0, 1}, .n = rows * len, .nb = len};
    float *dbw = rand_floats(len, -1, 1, 33), *dbt = zeros(len);
    float *dbw0 = malloc(len * sizeof *dbw0);
    cr_assert(dbw0);
    memcpy(dbw0, dbw, len * sizeof *dbw);
    g->reduce_bcast(&bc, dy, x, 1.0f, dbw);
    int64_t *amw = malloc(rows * sizeof *amw), *amt = malloc(rows * sizeof *amt);
    cr_assert(amw && amt);
    g->argmax(rows, len, x, amw);
    FOR_EACH_COPY(t, isa) {
        t->sum(rows * len, x, &st);
        cr_assert_float_eq(st, sw, 1e-3, "%s: sum %g vs %g", isa, st, sw);
        memcpy(dbt, dbw0, len * sizeof *dbt);
        t->reduce_bcast(&bc, dy, x, 1.0f, dbt);
        rgt_assert_close(dbt, dbw, len, 1e-5, 1e-5, isa);
        t->argmax(rows, len, x, amt);
        cr_assert(!memcmp(amt, amw, rows * sizeof *amw), "%s: argmax", isa);
    }
    free(x), free(dy), free(dbw), free(dbt), free(dbw0), free(amw), free(amt);
}

/* The dropout kernels test the drawn words against an integer threshold; every copy keeps exactly
 * the elements rg_dropout_keep (the formula the CUDA kernel uses) keeps, at awkward p too, in
 * forward, in the mask forward stores (bit i + offset % 8; the bits around the elements 0), in
 * backward drawing again and in backward reading that mask, also where the Philox counter's lower
 * word wraps (offset near 2^35, eight positions a counter: the AVX2 and AVX-512 copies' fused
 * blocks need one upper word, and fall back around the wrap). p = 1 - 2^-16 is the largest that the
 * fused blocks' 16-bit compare takes; 0.9999999 rounds up to 1 and keeps nothing. */
Test(tensor_isa, dropout_masks_are_the_formula_on_every_copy) {
    const float ps[] = {0.0f, 5.9604645e-08f,         0.1f,       0.25f, 1.0f / 3.0f,
                        0.5f, 1.0f - 1.0f / 65536.0f, 0.9999999f, 1.0f};
    const uint64_t offs[] = {13, ((uint64_t)1 << 35) - 8 * 1000 - 2, 1024, 2, 7};
    const char *all[] = {"generic", "avx2", "avx512", "native"};
    const int64_t n = 4099;
    float *x = zeros(n), *y = zeros(n);
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
    for (size_t c = 0; c < sizeof all / sizeof *all; c++) {
        const rg_backend *t = rg_cpu_backend_isa(all[c]);
        if (!t) continue;
        for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++) {
                int64_t words = rg_dropout_mask_words(n, offs[o]), s = (int64_t)(offs[o] & 7);
                cr_assert_eq(words, (s + n + 31) / 32, "%lld words", (long long)words);
                uint32_t *mask = malloc((size_t)words * sizeof *mask);
                memset(mask, 0xA5, (size_t)words * sizeof *mask); /* all written? */
                for (int pass = 0; pass < 3; pass++) {
                    if (pass == 0)
                        t->dropout_forward(n, ps[k], 99, offs[o], x, y, mask);
                    else
                        t->dropout_backward(n, ps[k], 99, offs[o], pass == 1 ? NULL : mask, x, 0.0f,
                                            y);
                    for (int64_t i = 0; i < n; i++)
                        cr_assert_eq(y[i] != 0.0f,
                                     rg_dropout_keep(ps[k], 99, offs[o] + (uint64_t)i),
                                     "%s: pass %d p %.9g offset %llu element %lld", all[c], pass,
                                     (double)ps[k], (unsigned long long)offs[o], (long long)i);
                }
                for (int64_t b = 0; b < 32 * words; b++) {
                    int64_t i = b - s;
                    bool want =
                        i >= 0 && i < n && rg_dropout_keep(ps[k], 99, offs[o] + (uint64_t)i);
                    cr_assert_eq((mask[b / 32] >> (b % 32)) & 1u, want,
                                 "%s: p %.9g offset %llu mask bit %lld", all[c], (double)ps[k],
                                 (unsigned long long)offs[o], (long long)b);
                }
                free(mask);
            }
        }
    }
    free(x), free(y);
}

/* Every copy's table is complete, like the one test_backend.c checks. */
Test(tensor_isa, every_table_fills_every_entry) {
    const char *all[] = {"generic", "avx2", "avx512", "native"};
    int tables = 0;
    for (size_t c = 0; c < sizeof all / sizeof *all; c++) {
        const rg_backend *t = rg_cpu_backend_isa(all[c]);
        if (!t) continue;
        tables++;
        cr_assert_str_eq(t->name, "cpu");
#define RG_CHECK_ENTRY(ret, fn, params) cr_assert(t->fn != NULL, "%s: %s", all[c], #fn);
        RG_BACKEND_KERNELS(RG_CHECK_ENTRY)
#undef RG_CHECK_ENTRY
    }
    cr_assert(tables >= 1);
}

/* The optimizer steps, every switch of their formulas (weight decay, momentum, first step,
 * Nesterov, dampening; Adam, L2 decay, AdamW) and a DDP gradient scale: every copy, the generic
 * one included, gives rg_sgd_update / rg_adam_update's results bit for bit (optim.c is compiled
 * without fused multiply-adds), over a length with tails and several parallel chunks. */
Test(tensor_isa, optimizer_steps_are_the_formula_bit_for_bit_on_every_copy) {
    rg_set_num_threads(2);
    const char *all[] = {"generic", "avx2", "avx512", "native"};
    const int64_t n = 50021;
    float *p0 = rand_floats(n, -1, 1, 41), *g = rand_floats(n, -1, 1, 42);
    float *m0 = rand_floats(n, -0.1f, 0.1f, 43), *v0 = rand_floats(n, 0, 0.01f, 44);
    float *p = zeros(n), *m = zeros(n), *v = zeros(n), *pw = zeros(n), *mw = zeros(n),
          *vw = zeros(n);
    for (int k = 0; k < 32; k++) {
        rg_sgd_hparams s = {.lr = 0.05f,
                            .weight_decay = (k & 1) ? 1e-3f : 0.0f,
                            .momentum = (k & 2) ? 0.9f : 0.0f,
                            .first_step = (k & 4) != 0,
                            .nesterov = (k & 8) != 0,
                            .dampening = (k & 16) ? 0.25f : 0.0f,
                            .grad_scale = (k & 1) ? 0.5f : 0.0f};
        memcpy(pw, p0, n * sizeof *pw), memcpy(mw, m0, n * sizeof *mw);
        for (int64_t i = 0; i < n; i++) rg_sgd_update(&s, &pw[i], g[i], &mw[i]);
        for (size_t c = 0; c < sizeof all / sizeof *all; c++) {
            const rg_backend *t = rg_cpu_backend_isa(all[c]);
            if (!t) continue;
            memcpy(p, p0, n * sizeof *p), memcpy(m, m0, n * sizeof *m);
            t->sgd_step_many(1, &(rg_sgd_tensor){.n = n,
                                                 .param = p,
                                                 .grad = g,
                                                 .momentum_buf = s.momentum != 0.0f ? m : NULL,
                                                 .h = s});
            cr_assert(!memcmp(p, pw, n * sizeof *p), "%s: sgd %d param", all[c], k);
            cr_assert(!memcmp(m, mw, n * sizeof *m), "%s: sgd %d buffer", all[c], k);
        }
    }
    for (int k = 0; k < 4; k++) {
        rg_adam_hparams a = {.lr = 1e-3f,
                             .beta1 = 0.9f,
                             .beta2 = 0.999f,
                             .eps = 1e-8f,
                             .weight_decay = k ? 0.01f : 0.0f,
                             .decoupled = k >= 2,
                             .bias_correction1 = 0.271f,
                             .bias_correction2 = 0.002997f,
                             .grad_scale = k == 3 ? 0.25f : 0.0f};
        memcpy(pw, p0, n * sizeof *pw), memcpy(mw, m0, n * sizeof *mw);
        memcpy(vw, v0, n * sizeof *vw);
        for (int64_t i = 0; i < n; i++) rg_adam_update(&a, &pw[i], g[i], &mw[i], &vw[i]);
        for (size_t c = 0; c < sizeof all / sizeof *all; c++) {
            const rg_backend *t = rg_cpu_backend_isa(all[c]);
            if (!t) continue;
            memcpy(p, p0, n * sizeof *p), memcpy(m, m0, n * sizeof *m);
            memcpy(v, v0, n * sizeof *v);
            t->adam_step(n, &a, p, g, m, v);
            cr_assert(!memcmp(p, pw, n * sizeof *p), "%s: adam %d param", all[c], k);
            cr_assert(!memcmp(m, mw, n * sizeof *m), "%s: adam %d m", all[c], k);
            cr_assert(!memcmp(v, vw, n * sizeof *v), "%s: adam %d v", all[c], k);
        }
    }
    free(p0), free(g), free(m0), free(v0), free(p), free(m), free(v), free(pw), free(mw), free(vw);
}
