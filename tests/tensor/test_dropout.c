/* Tests for inverted dropout: identity in evaluation and at p = 0, all zeros at p = 1, the kept
 * fraction and scale, a mask that is a pure function of (seed, offset), an offset that moves on,
 * and a backward that applies the forward's mask. */
#include "rgtest.h"

#include <string.h>

#include <math.h>

Test(tensor_dropout, eval_and_p_zero_return_the_input) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 7), -1, 1, 1);
    uint64_t off = 12;
    rg_scope_begin();
    int64_t nodes = rg_tape_len();
    cr_assert_eq(rg_dropout(x, 0.5f, false, 1, &off), x, "evaluation returns the input itself");
    cr_assert_eq(rg_dropout(x, 0.0f, true, 1, &off), x, "p = 0 returns the input itself");
    cr_assert_eq(rg_dropout(x, 0.3f, false, 1, NULL), x, "evaluation needs no offset");
    cr_assert_eq(off, 12, "the stream does not move when nothing is drawn");
    cr_assert_eq(rg_tape_len(), nodes, "nothing recorded");
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_dropout, p_one_zeroes_everything_and_its_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(9, 11), 0.5f, 1, 2);
    uint64_t off = 0;
    rg_scope_begin();
    rg_tensor *y = rg_dropout(x, 1.0f, true, 3, &off);
    const float *yp = rg_tensor_f32(y);
    for (int i = 0; i < 99; i++) cr_assert_eq(yp[i], 0.0f, "element %d", i);
    rg_backward(rg_sum(y));
    const float *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 99; i++) cr_assert_eq(g[i], 0.0f, "grad %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_dropout, kept_fraction_is_one_minus_p_and_kept_values_are_scaled) {
    rg_set_num_threads(2); /* the multithreaded path */
    const float ps[] = {0.1f, 0.5f, 0.9f};
    int64_t n = 1000003;
    rg_tensor *x =
        rgt_uniform(RG_SHAPE(n), 0.5f, 1.5f, 4); /* never 0: a zero output means dropped */
    const float *xp = rg_tensor_f32(x);
    for (int k = 0; k < 3; k++) {
        float p = ps[k], scale = 1.0f / (1.0f - p);
        uint64_t off = 0;
        rg_scope_begin();
        const float *yp = rg_tensor_f32(rg_dropout(x, p, true, 100 + (uint64_t)k, &off));
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++) {
            if (yp[i] == 0.0f) continue;
            kept++;
            cr_assert_float_eq(yp[i], xp[i] * scale, 1e-6 * yp[i], "p %g element %lld: %g of %g",
                               (double)p, (long long)i, yp[i], xp[i]);
        }
        /* kept ~ Binomial(n, 1-p): within 6 standard deviations */
        double mean = (1.0 - p) * (double)n, sd = sqrt((double)n * p * (1.0 - p));
        cr_assert(fabs((double)kept - mean) < 6 * sd,
                  "p %g: kept %lld of %lld, expected %.0f +- %.0f", (double)p, (long long)kept,
                  (long long)n, mean, 6 * sd);
        rg_scope_end();
    }
    rg_tensor_free(x);
}

/* Which elements a dropout call kept (x has no zeros). */
static bool *mask_of(const rg_tensor *y) {
    bool *m = malloc((size_t)y->numel);
    const float *yp = rg_tensor_f32(y);
    for (int64_t i = 0; i < y->numel; i++) m[i] = yp[i] != 0.0f;
    return m;
}

Test(tensor_dropout, same_seed_and_offset_give_the_same_mask_and_the_offset_moves_on) {
    int64_t n = 1001; /* not a multiple of 8 */
    rg_tensor *x = rgt_uniform(RG_SHAPE(n), 1, 2, 5);
    rg_scope_begin();
    uint64_t o1 = 40, o2 = 40;
    bool *a = mask_of(rg_dropout(x, 0.5f, true, 7, &o1));
    bool *b = mask_of(rg_dropout(x, 0.5f, true, 7, &o2));
    cr_assert_eq(o1, 40 + 1008, "the offset advances by whole Philox counters: %llu",
                 (unsigned long long)o1);
    cr_assert_eq(o1, o2);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(a[i], b[i], "same (seed, offset): element %lld", (long long)i);
    /* the mask is the documented stream function, so the CPU and the GPU agree */
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(a[i], rg_dropout_keep(0.5f, 7, 40 + (uint64_t)i), "element %lld",
                     (long long)i);

    bool *c = mask_of(rg_dropout(x, 0.5f, true, 7, &o1)); /* consecutive call: fresh numbers */
    uint64_t o3 = 40;
    bool *d = mask_of(rg_dropout(x, 0.5f, true, 8, &o3)); /* another seed */
    int64_t same_c = 0, same_d = 0;
    for (int64_t i = 0; i < n; i++) same_c += a[i] == c[i], same_d += a[i] == d[i];
    /* independent masks agree on about half the elements; identical ones on all */
    cr_assert(same_c < n * 6 / 10, "consecutive calls agree on %lld of %lld", (long long)same_c,
              (long long)n);
    cr_assert(same_d < n * 6 / 10, "two seeds agree on %lld of %lld", (long long)same_d,
              (long long)n);
    rg_scope_end();
    free(a), free(b), free(c), free(d);
    rg_tensor_free(x);
}

Test(tensor_dropout, backward_applies_the_forward_mask) {
    int64_t n = 3 * 333;
    float p = 0.4f;
    rg_tensor *x = rgt_param(RG_SHAPE(3, 333), 1, 2, 6),
              *r = rgt_uniform(RG_SHAPE(3, 333), -1, 1, 7);
    uint64_t off = 8;
    rg_scope_begin();
    rg_tensor *y = rg_dropout(x, p, true, 9, &off);
    rg_tensor *z = rg_dropout(x, p, true, 9, &off); /* a later draw in between must not matter */
    rg_backward(rg_sum(rg_mul(y, r)));              /* dy = r */
    const float *yp = rg_tensor_f32(y), *rp = rg_tensor_f32(r), *g = rg_tensor_f32(x->grad);
    for (int64_t i = 0; i < n; i++) {
        float want = yp[i] != 0.0f ? rp[i] * (1.0f / (1.0f - p)) : 0.0f; /* dx = dy*mask/(1-p) */
        cr_assert_float_eq(g[i], want, 1e-6, "element %lld: %g, want %g", (long long)i, g[i], want);
    }
    (void)z;
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){x, r});
}

/* Forward stores the mask for backward (one bit an element); backward reads that mask instead of
 * drawing again: with the stored bits cleared, every gradient is 0 although the draw keeps most. */
Test(tensor_dropout, backward_reads_the_mask_forward_stored) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 101), 1, 2, 6);
    uint64_t off = 6; /* not a multiple of 8: element i is bit i + 6 */
    rg_scope_begin();
    rg_tensor *y = rg_dropout(x, 0.25f, true, 9, &off);
    int64_t len;
    rg_node **nodes = rg_tape_nodes(&len);
    rg_node *node = nodes[len - 1];
    cr_assert_str_eq(node->op, "dropout");
    rg_tensor *mask = node->saved[0];
    cr_assert(mask, "a recorded dropout keeps its mask");
    cr_assert_eq(mask->numel, rg_dropout_mask_words(505, 6));
    const uint32_t *bits = mask->data;
    const float *yp = rg_tensor_f32(y);
    for (int64_t i = 0; i < 505; i++)
        cr_assert_eq((bits[(i + 6) / 32] >> ((i + 6) % 32)) & 1u, yp[i] != 0.0f, "bit of %lld",
                     (long long)i);
    memset(mask->data, 0, (size_t)mask->numel * 4);
    rg_backward(rg_sum(y));
    const float *g = rg_tensor_f32(x->grad);
    for (int64_t i = 0; i < 505; i++) cr_assert_eq(g[i], 0.0f, "grad %lld", (long long)i);
    rg_scope_end();
    rg_tensor_free(x);
}

/* The mask is fixed across the checker's evaluations: the same (seed, offset) every call. */
static rg_tensor *f_dropout(rg_tensor *const *in, void *ctx) {
    uint64_t off = 16;
    return rg_dropout(in[0], 0.3f, true, 11, &off);
}

Test(tensor_dropout, gradient_matches_finite_differences_with_a_fixed_mask) {
    rg_tensor *x = rgt_param(RG_SHAPE(7, 13), -1, 1, 8);
    rgt_assert_gradcheck(f_dropout, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

Test(tensor_dropout, probability_outside_0_1_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(3), -1, 1, 1);
    uint64_t off = 0;
    rg_scope_begin();
    rgt_expect_fatal("dropout: probability 1.5 outside [0, 1]");
    rg_dropout(x, 1.5f, true, 1, &off);
}

Test(tensor_dropout, nan_probability_stops, .signal = SIGABRT) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(3), -1, 1, 1);
    uint64_t off = 0;
    rg_scope_begin();
    rgt_expect_fatal("dropout: probability nan outside [0, 1]");
    rg_dropout(x, NAN, true, 1, &off);
}
