/* Tests for step scopes: scoped tensors are freed by rg_scope_end, scopes nest, rg_tensor_keep
 * takes a tensor out of its scope, misuse stops with a message, and memory stays flat over many
 * training steps (no system allocations after warm-up, in_use back to its start at each end). */
#include "rgtest.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static size_t in_use(void) {
    return rg_mem_stats_get(RG_CPU).in_use;
}

Test(tensor_scope, scoped_tensors_are_freed_by_scope_end) {
    size_t start = in_use();
    rg_scope_begin();
    cr_assert_eq(rg_scope_depth(), 1);
    rg_tensor *t = rg_tensor_empty(RG_F32, RG_SHAPE(1000), RG_CPU);
    rg_tensor *z = rg_tensor_zeros(RG_I64, RG_SHAPE(7, 9), RG_CPU);
    cr_assert(t->flags & RG_TENSOR_SCOPED);
    cr_assert(z->flags & RG_TENSOR_SCOPED);
    for (int i = 0; i < 63; i++) cr_assert_eq(((int64_t *)z->data)[i], 0, "zeros");
    cr_assert_gt(in_use(), start);
    rg_scope_end();
    cr_assert_eq(rg_scope_depth(), 0);
    cr_assert_eq(in_use(), start, "everything the scope made was freed");
}

Test(tensor_scope, nested_scopes_free_only_their_own_tensors) {
    size_t start = in_use();
    rg_scope_begin();
    rg_tensor *outer = rg_tensor_empty(RG_F32, RG_SHAPE(64), RG_CPU);
    rg_tensor_fill_(outer, 3.0f);
    size_t mid = in_use();
    for (int rep = 0; rep < 3; rep++) {
        rg_scope_begin();
        cr_assert_eq(rg_scope_depth(), 2);
        rg_tensor *inner = rg_tensor_empty(RG_F32, RG_SHAPE(64), RG_CPU);
        rg_tensor_fill_(inner, 5.0f);
        rg_tensor *sum = rg_add(outer, inner); /* the inner scope may read the outer's tensors */
        cr_assert_eq(rg_tensor_f32(sum)[63], 8.0f);
        rg_scope_end();
        cr_assert_eq(rg_scope_depth(), 1);
        cr_assert_eq(in_use(), mid, "the inner scope freed its tensors");
        for (int i = 0; i < 64; i++) cr_assert_eq(rg_tensor_f32(outer)[i], 3.0f, "outer intact");
    }
    rg_scope_end();
    cr_assert_eq(in_use(), start);
}

Test(tensor_scope, keep_returns_a_long_lived_tensor_whose_data_survives) {
    size_t start = in_use();
    rg_tensor *w = rgt_param(RG_SHAPE(3, 4), -1, 1, 1);
    size_t with_w = in_use();
    rg_scope_begin();
    rg_tensor *y = rg_scale(w, 2.0f);
    rg_tensor *k = rg_tensor_keep(y);
    cr_assert(!(k->flags & RG_TENSOR_SCOPED), "kept tensors are long-lived");
    cr_assert(k->flags & RG_TENSOR_OWNS_DATA);
    cr_assert_null(k->grad_fn, "kept tensors are detached from the tape");
    cr_assert(!rg_tensor_requires_grad(k));
    cr_assert(rg_tensor_same_shape(k, y) && k->dtype == y->dtype);
    cr_assert_eq(rg_tensor_f32(y)[5], rg_tensor_f32(k)[5], "the scoped name still reads the data");
    rg_backward(rg_sum(y)); /* the scoped original still works on the tape */
    rg_scope_end();
    const float *wp = rg_tensor_f32(w), *kp = rg_tensor_f32(k);
    for (int i = 0; i < 12; i++) cr_assert_eq(kp[i], 2 * wp[i], "element %d survives", i);
    cr_assert_eq(rg_tensor_f32(w->grad)[0], 2.0f);
    rg_tensor_free(k);
    rg_tensor_free(w);
    cr_assert_eq(in_use(), start, "freeing the kept tensor releases its data (%zu -> %zu)", with_w,
                 in_use());
}

Test(tensor_scope, keep_of_a_long_lived_tensor_is_itself) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU);
    cr_assert_eq(rg_tensor_keep(t), t);
    rg_tensor_free(t);
}

Test(tensor_scope, keep_of_a_view_stops, .signal = SIGABRT) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(2, 3), RG_CPU);
    rg_scope_begin();
    rg_tensor *v = rg_reshape(t, RG_SHAPE(6));
    rgt_expect_fatal("rg_tensor_keep: a view cannot outlive its scope");
    rg_tensor_keep(v);
}

Test(tensor_scope, freeing_a_scoped_tensor_stops, .signal = SIGABRT) {
    rg_scope_begin();
    rg_tensor *t = rg_tensor_empty(RG_F32, RG_SHAPE(2), RG_CPU);
    rgt_expect_fatal("rg_tensor_free: tensor belongs to a step scope; rg_scope_end() frees it");
    rg_tensor_free(t);
}

Test(tensor_scope, scoped_tensor_outside_a_scope_stops, .signal = SIGABRT) {
    rgt_expect_fatal("no step scope is open; wrap the step in rg_scope_begin()/rg_scope_end()");
    rg_tensor_empty(RG_F32, RG_SHAPE(2), RG_CPU);
}

Test(tensor_scope, scope_end_without_begin_stops, .signal = SIGABRT) {
    rgt_expect_fatal("rg_scope_end: no step scope is open");
    rg_scope_end();
}

Test(tensor_scope, nesting_too_deep_stops, .signal = SIGABRT) {
    for (int i = 0; i < RG_SCOPE_MAX_DEPTH; i++) rg_scope_begin();
    rgt_expect_fatal("rg_scope_begin: scopes nested deeper than 8");
    rg_scope_begin();
}

Test(tensor_scope, arena_serves_large_and_many_headers) {
    rg_scope_begin();
    /* far more headers and tape nodes than one arena chunk or the first tape array holds */
    rg_tensor *x = rgt_param(RG_SHAPE(3), -1, 1, 2);
    rg_tensor *y = x;
    for (int i = 0; i < 5000; i++) y = rg_scale(y, 1.0f);
    cr_assert_eq(rg_tape_len(), 5000);
    void *big = rg_scope_alloc(1 << 20); /* larger than a chunk */
    memset(big, 1, 1 << 20);
    cr_assert_eq(((uintptr_t)big & 15), 0, "16-byte aligned");
    rg_backward(rg_sum(y));
    cr_assert_eq(rg_tensor_f32(x->grad)[2], 1.0f);
    rg_scope_end();
    rg_tensor_free(x);
}

/* ---- memory stays flat across training steps ---- */

typedef struct {
    rg_tensor *x, *labels, *w1, *b1, *w2, *scale;
} model;

/* One step of a small classifier that touches most ops: linear, broadcast add and mul, relu,
 * dropout, reshape, cross-entropy, mean; then backward and a plain SGD update. */
static void step(model *m, uint64_t *rng) {
    rg_tensor *h = rg_relu(rg_add(rg_matmul(m->x, m->w1), m->b1)); /* (8,6) */
    h = rg_dropout(rg_mul(h, m->scale), 0.25f, true, 5, rng);      /* (8,6) * (6) */
    h = rg_reshape(rg_flatten(rg_reshape(h, RG_SHAPE(8, 2, 3))), RG_SHAPE(8, 6));
    rg_tensor *logits = rg_linear(h, m->w2, NULL); /* (8,3) */
    rg_tensor *loss = rg_add(rg_cross_entropy(logits, m->labels), rg_mean(rg_mul(h, h)));
    rg_backward(loss);
    rg_tensor *params[] = {m->w1, m->b1, m->w2, m->scale};
    rg_sgd_hparams sgd = {.lr = 0.01f};
    for (int i = 0; i < 4; i++) {
        rg_cpu_backend.sgd_step_many(1, &(rg_sgd_tensor){.n = params[i]->numel,
                                                         .param = params[i]->data,
                                                         .grad = params[i]->grad->data,
                                                         .h = sgd});
        rg_zero_grad(params[i]);
    }
}

static bool alloc_cache_on(void) {
    const char *e = getenv("RG_ALLOC_CACHE");
    return !(e && strcmp(e, "0") == 0);
}

Test(tensor_scope, memory_stays_flat_over_100_steps) {
    model m = {rgt_uniform(RG_SHAPE(8, 5), -1, 1, 1), rg_tensor_new(RG_I64, RG_SHAPE(8), RG_CPU),
               rgt_param(RG_SHAPE(5, 6), -1, 1, 2),   rgt_param(RG_SHAPE(6), -1, 1, 3),
               rgt_param(RG_SHAPE(3, 6), -1, 1, 4),   rgt_param(RG_SHAPE(6), 0.5f, 1.5f, 5)};
    for (int i = 0; i < 8; i++) ((int64_t *)m.labels->data)[i] = i % 3;
    uint64_t rng = 0;
    for (int warm = 0; warm < 3; warm++) { /* first steps create the gradients, arena and tape */
        rg_scope_begin();
        step(&m, &rng);
        rg_scope_end();
    }
    rg_mem_stats base = rg_mem_stats_get(RG_CPU);
    size_t heap = mallinfo2().uordblks; /* the arena and the tape must be reused, too */
    for (int s = 0; s < 100; s++) {
        size_t start = in_use();
        rg_scope_begin();
        step(&m, &rng);
        cr_assert_gt(in_use(), start, "the step allocates");
        rg_scope_end();
        rg_mem_stats now = rg_mem_stats_get(RG_CPU);
        cr_assert_eq(now.in_use, start, "step %d: in_use %zu after the scope, %zu before", s,
                     now.in_use, start);
        cr_assert_eq(now.in_use, base.in_use, "step %d", s);
        if (alloc_cache_on()) {
            cr_assert_eq(now.sys_allocs, base.sys_allocs, "step %d: %llu system allocations, %llu",
                         s, (unsigned long long)now.sys_allocs,
                         (unsigned long long)base.sys_allocs);
            cr_assert_gt(now.reuses, base.reuses, "the cache serves the step");
        }
        cr_assert_eq(mallinfo2().uordblks, heap, "step %d: the C heap grew from %zu to %zu", s,
                     heap, mallinfo2().uordblks);
    }
    rgt_free_all(6, (rg_tensor *[]){m.x, m.labels, m.w1, m.b1, m.w2, m.scale});
}

/* RG_CPU_MEM_LIMIT caps what tensors hold (in use + cached): a block that would pass it first
 * sends the cached blocks back to the system, then fails with a message, not an OOM kill. The
 * limit is read at the first system allocation, which in this test's own process is below. */
Test(tensor_scope, a_memory_limit_releases_the_cache_then_refuses_with_a_message) {
    cr_assert_eq(setenv("RG_CPU_MEM_LIMIT", "1M", 1), 0);
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(160 * 1024), RG_CPU); /* 640 KiB */
    cr_assert(a, "640 KiB under a 1 MiB limit: %s", rg_last_error());
    rg_tensor_free(a);
    if (alloc_cache_on()) cr_assert_geq(rg_mem_stats_get(RG_CPU).cached, 640 * 1024);
    /* 800 KiB (an 896 KiB block): fits only once the cached 640 KiB are given back */
    rg_tensor *b = rg_tensor_new(RG_F32, RG_SHAPE(200 * 1024), RG_CPU);
    cr_assert(b, "800 KiB after freeing 640 KiB: %s", rg_last_error());
    cr_assert_eq(rg_mem_stats_get(RG_CPU).cached, 0, "the cache was released to make room");
    /* 256 KiB more would hold 1,152 KiB in all */
    rg_tensor *c = rg_tensor_new(RG_F32, RG_SHAPE(64 * 1024), RG_CPU);
    cr_assert_null(c, "past the limit");
    cr_assert_eq(rg_last_status(), RG_ENOMEM);
    cr_assert(strstr(rg_last_error(), "out of memory allocating 262 kB") &&
                  strstr(rg_last_error(), "(65536) on cpu") &&
                  strstr(rg_last_error(), "already in use by tensors"),
              "message: %s", rg_last_error());
    rg_tensor_free(b);
    c = rg_tensor_new(RG_F32, RG_SHAPE(64 * 1024), RG_CPU);
    cr_assert(c, "fits again once b is freed: %s", rg_last_error());
    rg_tensor_free(c);
}
