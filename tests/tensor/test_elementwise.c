/* Tests for add, mul (every broadcast pattern, either operand the smaller), scale and relu:
 * forward against a naive broadcasting loop, gradients by central differences, gradient
 * accumulation when one tensor feeds an op twice, and misuse that must stop with a message. */
#include "rgtest.h"

#include <math.h>
#include <string.h>

typedef enum { ADD, MUL } binop;

typedef struct {
    const char *name;
    int and_, bnd;
    int64_t ashape[4], bshape[4];
} pattern;

/* Shapes with odd sizes; in the second half of the table the smaller operand comes first. */
static const pattern patterns[] = {
    {"same shape", 4, 4, {3, 5, 2, 7}, {3, 5, 2, 7}},
    {"row bias (N,C)+(C)", 2, 1, {7, 5}, {5}},
    {"channel bias (N,C,H,W)+(C,1,1)", 4, 3, {3, 5, 4, 3}, {5, 1, 1}},
    {"scalar shape ()", 3, 0, {3, 4, 5}, {0}},
    {"scalar shape (1)", 3, 1, {3, 4, 5}, {1}},
    {"leading dims (N,C,H,W)+(1,C,1,1)", 4, 4, {2, 3, 5, 3}, {1, 3, 1, 1}},
    {"column (N,C)+(N,1)", 2, 2, {9, 4}, {9, 1}},
    {"middle (N,C,H,W)+(N,1,H,1)", 4, 4, {2, 3, 5, 3}, {2, 1, 5, 1}},
    {"trailing (N,C,H,W)+(N,C,1,1)", 4, 4, {3, 5, 2, 3}, {3, 5, 1, 1}},
    {"size-1 dims (1,5,1,3)+(5,1,3)", 4, 3, {1, 5, 1, 3}, {5, 1, 3}},
    {"first (C)+(N,C)", 1, 2, {5}, {7, 5}},
    {"first (C,1,1)+(N,C,H,W)", 3, 4, {5, 1, 1}, {3, 5, 4, 3}},
    {"first ()+(N,C)", 0, 2, {0}, {4, 3}},
    {"first (1)+(N,C)", 1, 2, {1}, {4, 3}},
    {"first (1,C,1,1)+(N,C,H,W)", 4, 4, {1, 3, 1, 1}, {2, 3, 5, 3}},
};
#define N_PATTERNS (int)(sizeof patterns / sizeof patterns[0])

static rg_tensor *apply(binop op, rg_tensor *a, rg_tensor *b) {
    return op == ADD ? rg_add(a, b) : rg_mul(a, b);
}

static void check_forward(binop op, const pattern *p, uint64_t seed) {
    rg_tensor *a = rgt_uniform(p->and_, p->ashape, -2, 2, seed);
    rg_tensor *b = rgt_uniform(p->bnd, p->bshape, -2, 2, seed + 1000);
    bool a_big = a->numel >= b->numel;
    const rg_tensor *big = a_big ? a : b, *small = a_big ? b : a;
    float *want = malloc((size_t)big->numel * sizeof *want);
    const float *ap = rg_tensor_f32(a), *bp = rg_tensor_f32(b);
    for (int64_t i = 0; i < big->numel; i++) {
        int64_t j = rgt_bcast_index(big->ndim, big->shape, small->ndim, small->shape, i);
        float x = a_big ? ap[i] : ap[j], y = a_big ? bp[j] : bp[i];
        want[i] = op == ADD ? x + y : x * y;
    }
    rg_scope_begin();
    rg_tensor *y = apply(op, a, b);
    cr_assert(rg_tensor_same_shape(y, big), "%s: result shape %s, want %s", p->name,
              rg_shape_str(y->ndim, y->shape, (char[96]){0}, 96),
              rg_shape_str(big->ndim, big->shape, (char[96]){0}, 96));
    rgt_assert_close(rg_tensor_f32(y), want, y->numel, 0, 0, p->name);
    rg_scope_end();
    free(want);
    rgt_free_all(2, (rg_tensor *[]){a, b});
}

Test(tensor_elementwise, add_matches_naive_for_every_broadcast_pattern) {
    for (int i = 0; i < N_PATTERNS; i++) check_forward(ADD, &patterns[i], 10 + (uint64_t)i);
}

Test(tensor_elementwise, mul_matches_naive_for_every_broadcast_pattern) {
    for (int i = 0; i < N_PATTERNS; i++) check_forward(MUL, &patterns[i], 50 + (uint64_t)i);
}

Test(tensor_elementwise, add_matches_naive_on_random_shapes) {
    for (uint64_t t = 0; t < 40; t++) {
        pattern p = {"random", 0, 0, {0}, {0}};
        p.and_ = (int)rgt_randint(1, 4, 7, 100 * t);
        for (int d = 0; d < p.and_; d++) p.ashape[d] = rgt_randint(1, 9, 7, 100 * t + 1 + d);
        p.bnd = (int)rgt_randint(0, p.and_, 7, 100 * t + 10);
        for (int d = 0; d < p.bnd; d++) /* each of b's dims: a's size or 1 */
            p.bshape[d] = rgt_randint(0, 1, 7, 100 * t + 20 + d) ? p.ashape[p.and_ - p.bnd + d] : 1;
        if (t % 3 == 0) { /* the smaller operand first */
            pattern q = {"random, smaller first", p.bnd, p.and_, {0}, {0}};
            memcpy(q.ashape, p.bshape, sizeof q.ashape);
            memcpy(q.bshape, p.ashape, sizeof q.bshape);
            p = q;
        }
        check_forward(t % 2 ? ADD : MUL, &p, 200 + t);
    }
}

typedef struct {
    binop op;
} binop_ctx;

static rg_tensor *f_binary(rg_tensor *const *in, void *ctx) {
    return apply(((binop_ctx *)ctx)->op, in[0], in[1]);
}

Test(tensor_elementwise, add_and_mul_gradients_match_finite_differences) {
    for (int op = ADD; op <= MUL; op++) {
        for (int i = 0; i < N_PATTERNS; i++) {
            const pattern *p = &patterns[i];
            rg_tensor *a = rgt_param(p->and_, p->ashape, -2, 2, 300 + (uint64_t)i);
            rg_tensor *b = rgt_param(p->bnd, p->bshape, -2, 2, 400 + (uint64_t)i);
            binop_ctx c = {(binop)op};
            rg_status s = rg_gradcheck(f_binary, &c, 2, (rg_tensor *[]){a, b}, NULL);
            cr_assert_eq(s, RG_OK, "%s %s: %s", op == ADD ? "add" : "mul", p->name,
                         rg_last_error());
            rgt_free_all(2, (rg_tensor *[]){a, b});
        }
    }
}

Test(tensor_elementwise, broadcast_gradient_is_summed_over_stretched_dims) {
    /* y = x (N,C) * b (C): db[c] = sum_n dy[n,c] x[n,c]; with L = sum(y), dy = 1 */
    int64_t n = 37, c = 5;
    rg_tensor *x = rgt_param(RG_SHAPE(n, c), -1, 1, 1), *b = rgt_param(RG_SHAPE(c), -1, 1, 2);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(x, b)));
    const float *xp = rg_tensor_f32(x), *bp = rg_tensor_f32(b);
    const float *dx = rg_tensor_f32(x->grad), *db = rg_tensor_f32(b->grad);
    for (int64_t j = 0; j < c; j++) {
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += xp[i * c + j];
        cr_assert_float_eq(db[j], s, 1e-5, "db[%lld]", (long long)j);
    }
    for (int64_t i = 0; i < n * c; i++) cr_assert_eq(dx[i], bp[i % c], "dx[%lld]", (long long)i);
    rg_scope_end();
    rgt_free_all(2, (rg_tensor *[]){x, b});
}

/* ---- one tensor used twice ---- */

Test(tensor_elementwise, x_times_x_gradient_is_2x) {
    rg_tensor *x = rgt_param(RG_SHAPE(3, 7), -2, 2, 3);
    rg_scope_begin();
    rg_backward(rg_sum(rg_mul(x, x)));
    const float *xp = rg_tensor_f32(x), *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 21; i++) cr_assert_float_eq(g[i], 2 * xp[i], 1e-6, "element %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_elementwise, x_plus_x_gradient_is_2) {
    rg_tensor *x = rgt_param(RG_SHAPE(11), -2, 2, 4);
    rg_scope_begin();
    rg_backward(rg_sum(rg_add(x, x)));
    const float *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 11; i++) cr_assert_eq(g[i], 2.0f, "element %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

static rg_tensor *f_reuse(rg_tensor *const *in, void *ctx) {
    /* x*x + x, then (x*x) * b + b: every input used twice, once broadcast */
    rg_tensor *x = in[0], *b = in[1];
    rg_tensor *xx = rg_mul(x, x);
    return rg_add(rg_mul(rg_add(xx, x), b), b);
}

Test(tensor_elementwise, reused_inputs_gradients_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(4, 3), -2, 2, 5), *b = rgt_param(RG_SHAPE(3), -2, 2, 6);
    rgt_assert_gradcheck(f_reuse, NULL, 2, (rg_tensor *[]){x, b}, NULL);
    rgt_free_all(2, (rg_tensor *[]){x, b});
}

/* Residual adds whose first operand is an op result take the add's gradient itself (no copy).
 * Here every add is its operands' last use, so they share: u + u@m (the matmul's backward reads
 * its own gradient while it adds into u's: had both operands shared the add's, it would read what
 * it writes), r + r, s*w + s and t + t*t, each followed by ops that add into the shared
 * gradient. */
static rg_tensor *f_residual(rg_tensor *const *in, void *ctx) {
    (void)ctx;
    rg_tensor *x = in[0], *w = in[1], *m = in[2];
    rg_tensor *u = rg_relu(rg_mul(x, w));
    rg_tensor *r = rg_add(u, rg_matmul(u, m));
    rg_tensor *s = rg_add(r, r);
    rg_tensor *t = rg_add(rg_mul(s, w), s);
    return rg_add(t, rg_mul(t, t));
}

Test(tensor_elementwise, residual_adds_sharing_their_gradient_match_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(4, 5), -2, 2, 8), *w = rgt_param(RG_SHAPE(4, 5), -2, 2, 9),
              *m = rgt_param(RG_SHAPE(5, 5), -1, 1, 10);
    rgt_assert_gradcheck(f_residual, NULL, 3, (rg_tensor *[]){x, w, m}, NULL);
    rgt_free_all(3, (rg_tensor *[]){x, w, m});
}

Test(tensor_elementwise, intermediate_used_twice_accumulates) {
    /* h = 3x; L = sum(h * h) -> dL/dx = 2 * 3x * 3 = 18x */
    rg_tensor *x = rgt_param(RG_SHAPE(6), -1, 1, 7);
    rg_scope_begin();
    rg_tensor *h = rg_scale(x, 3.0f);
    rg_backward(rg_sum(rg_mul(h, h)));
    const float *xp = rg_tensor_f32(x), *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(g[i], 18 * xp[i], 1e-5, "element %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

/* ---- scale and relu ---- */

Test(tensor_elementwise, scale_forward_and_gradient) {
    rg_tensor *x = rgt_param(RG_SHAPE(5, 3), -2, 2, 8);
    rg_scope_begin();
    rg_tensor *y = rg_scale(x, -1.5f);
    const float *xp = rg_tensor_f32(x), *yp = rg_tensor_f32(y);
    for (int i = 0; i < 15; i++) cr_assert_eq(yp[i], -1.5f * xp[i], "element %d", i);
    rg_backward(rg_sum(y));
    const float *g = rg_tensor_f32(x->grad);
    for (int i = 0; i < 15; i++) cr_assert_eq(g[i], -1.5f, "grad %d", i);
    rg_scope_end();
    rg_tensor_free(x);
}

static rg_tensor *f_scale(rg_tensor *const *in, void *ctx) {
    return rg_scale(in[0], 0.75f);
}

Test(tensor_elementwise, scale_gradient_matches_finite_differences) {
    rg_tensor *x = rgt_param(RG_SHAPE(3, 5, 7), -2, 2, 9);
    rgt_assert_gradcheck(f_scale, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

Test(tensor_elementwise, relu_forward_matches_naive) {
    rg_tensor *x = rgt_uniform(RG_SHAPE(13, 17), -1, 1, 10);
    float *xp = rg_tensor_f32(x);
    xp[0] = 0.0f, xp[1] = -0.0f, xp[2] = INFINITY, xp[3] = -INFINITY;
    rg_scope_begin();
    rg_tensor *y = rg_relu(x);
    const float *yp = rg_tensor_f32(y);
    for (int i = 0; i < 13 * 17; i++)
        cr_assert_eq(yp[i], xp[i] > 0 ? xp[i] : 0.0f, "element %d: relu(%g) = %g", i, xp[i], yp[i]);
    rg_scope_end();
    rg_tensor_free(x);
}

Test(tensor_elementwise, relu_gradient_is_zero_at_zero_like_pytorch) {
    float v[] = {-1.0f, 0.0f, -0.0f, 1e-30f, 2.0f};
    rg_tensor *x = rgt_tensor(RG_SHAPE(5), v);
    rg_tensor_set_requires_grad(x, true);
    rg_scope_begin();
    rg_backward(rg_sum(rg_scale(rg_relu(x), 3.0f)));
    float want[] = {0, 0, 0, 3, 3};
    rgt_assert_close(rg_tensor_f32(x->grad), want, 5, 0, 0, "relu'");
    rg_scope_end();
    rg_tensor_free(x);
}

/* torch.relu(nan) is nan and its gradient there is dy (threshold_backward tests x <= 0): a NaN
 * must travel on, not become a plausible 0 that hides a broken run. */
Test(tensor_elementwise, relu_propagates_nan_like_pytorch) {
    float v[] = {NAN, -1.0f, 2.0f};
    rg_tensor *x = rgt_tensor(RG_SHAPE(3), v);
    rg_tensor_set_requires_grad(x, true);
    rg_scope_begin();
    rg_tensor *y = rg_relu(x);
    const float *yp = rg_tensor_f32(y);
    cr_assert(isnan(yp[0]), "relu(nan) = %g, want nan", yp[0]);
    cr_assert_eq(yp[1], 0.0f);
    cr_assert_eq(yp[2], 2.0f);
    rg_backward(rg_sum(rg_scale(y, 3.0f)));
    float want[] = {3, 0, 3};
    rgt_assert_close(rg_tensor_f32(x->grad), want, 3, 0, 0, "relu' at nan");
    rg_scope_end();
    rg_tensor_free(x);
}

static rg_tensor *f_relu(rg_tensor *const *in, void *ctx) {
    return rg_relu(in[0]);
}

Test(tensor_elementwise, relu_gradient_matches_finite_differences) {
    /* values at least 0.1 away from the kink at 0, so that x +- eps stays on one side */
    rg_tensor *x = rgt_param(RG_SHAPE(7, 9), 0.1f, 2, 11);
    float *xp = rg_tensor_f32(x);
    for (int i = 0; i < 63; i += 2) xp[i] = -xp[i];
    rgt_assert_gradcheck(f_relu, NULL, 1, &x, NULL);
    rg_tensor_free(x);
}

/* ---- misuse ---- */

Test(tensor_elementwise, incompatible_shapes_stop_with_a_message, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(3, 4), -1, 1, 1),
              *b = rgt_uniform(RG_SHAPE(4, 3), -1, 1, 2);
    rg_scope_begin();
    rgt_expect_fatal("add: shapes (3,4) and (4,3) do not broadcast");
    rg_add(a, b);
}

Test(tensor_elementwise, mismatched_trailing_dim_stops, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(2, 3), -1, 1, 1), *b = rgt_uniform(RG_SHAPE(2), -1, 1, 2);
    rg_scope_begin();
    rgt_expect_fatal("mul: shapes (2,3) and (2) do not broadcast");
    rg_mul(a, b);
}

Test(tensor_elementwise, mutual_broadcast_is_refused_with_a_message, .signal = SIGABRT) {
    /* (3,1) + (1,4) would be (3,4) in NumPy; ringgrad needs one operand of the result's shape */
    rg_tensor *a = rgt_uniform(RG_SHAPE(3, 1), -1, 1, 1),
              *b = rgt_uniform(RG_SHAPE(1, 4), -1, 1, 2);
    rg_scope_begin();
    rgt_expect_fatal("one of them must have the result's shape");
    rg_add(a, b);
}

Test(tensor_elementwise, non_float_operand_stops, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(3), -1, 1, 1);
    rg_tensor *b = rg_tensor_new(RG_I64, RG_SHAPE(3), RG_CPU);
    rg_scope_begin();
    rgt_expect_fatal("add: b must be float32, got int64 (3)");
    rg_add(a, b);
}

Test(tensor_elementwise, ops_outside_a_scope_stop_with_a_message, .signal = SIGABRT) {
    rg_tensor *a = rgt_uniform(RG_SHAPE(3), -1, 1, 1);
    rgt_expect_fatal("no step scope is open; wrap the step in rg_scope_begin()/rg_scope_end()");
    rg_relu(a);
}

/* ---- large tensors: the multithreaded paths of the CPU kernels ---- */

/* Forward and both gradients of a*b against double loops, with dy = r (a fixed random tensor). */
static void check_large_mul(const pattern *p) {
    rg_tensor *a = rgt_param(p->and_, p->ashape, -1, 1, 600),
              *b = rgt_param(p->bnd, p->bshape, -1, 1, 601);
    rg_tensor *r = rgt_uniform(p->and_, p->ashape, -1, 1, 602);
    const float *ap = rg_tensor_f32(a), *bp = rg_tensor_f32(b), *rp = rg_tensor_f32(r);
    double *db = calloc((size_t)b->numel, sizeof *db);
    for (int64_t i = 0; i < a->numel; i++)
        db[rgt_bcast_index(a->ndim, a->shape, b->ndim, b->shape, i)] += (double)rp[i] * ap[i];
    rg_scope_begin();
    rg_tensor *y = rg_mul(a, b);
    rg_backward(rg_sum(rg_mul(y, r)));
    const float *yp = rg_tensor_f32(y), *ga = rg_tensor_f32(a->grad), *gb = rg_tensor_f32(b->grad);
    for (int64_t i = 0; i < a->numel; i++) {
        float bv = bp[rgt_bcast_index(a->ndim, a->shape, b->ndim, b->shape, i)];
        cr_assert_eq(yp[i], ap[i] * bv, "%s: y[%lld]", p->name, (long long)i);
        cr_assert_float_eq(ga[i], rp[i] * bv, 1e-6, "%s: da[%lld]", p->name, (long long)i);
    }
    for (int64_t j = 0; j < b->numel; j++)
        cr_assert(fabs(gb[j] - db[j]) <= 1e-4 * (1 + fabs(db[j])), "%s: db[%lld] = %g, want %g",
                  p->name, (long long)j, gb[j], db[j]);
    rg_scope_end();
    free(db);
    rgt_free_all(3, (rg_tensor *[]){a, b, r});
}

Test(tensor_elementwise, large_broadcasts_match_naive_with_threads) {
    rg_set_num_threads(2);
    const pattern large[] = {
        {"channel bias", 4, 3, {8, 16, 31, 33}, {16, 1, 1}},
        {"row bias", 2, 1, {1001, 77}, {77}},
        {"wide row bias", 2, 1, {67, 1029}, {1029}},
        {"middle", 3, 3, {9, 301, 37}, {9, 1, 37}},
        {"scalar", 2, 0, {301, 129}, {0}},
        {"same shape", 2, 2, {301, 129}, {301, 129}},
    };
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) check_large_mul(&large[i]);
}

Test(tensor_elementwise, large_relu_and_scale_with_threads) {
    rg_set_num_threads(2);
    rg_tensor *x = rgt_param(RG_SHAPE(3, 40001), -1, 1, 603);
    rg_scope_begin();
    rg_tensor *y = rg_relu(rg_scale(x, 2.0f));
    rg_backward(rg_sum(y));
    const float *xp = rg_tensor_f32(x), *yp = rg_tensor_f32(y), *g = rg_tensor_f32(x->grad);
    for (int64_t i = 0; i < x->numel; i++) {
        cr_assert_eq(yp[i], xp[i] > 0 ? 2 * xp[i] : 0.0f, "y[%lld]", (long long)i);
        cr_assert_eq(g[i], xp[i] > 0 ? 2.0f : 0.0f, "dx[%lld]", (long long)i);
    }
    rg_scope_end();
    rg_tensor_free(x);
}
