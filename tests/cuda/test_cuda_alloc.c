/* The CUDA caching allocator on a real device: reuse without system calls, statistics, memory
 * that stays flat across training steps, pinned staging buffers, out of memory as NULL, and the
 * event timer. tests/cuda/tests.cmake also runs this program with RG_CUDA_ALLOC_CACHE=0, where
 * every allocation must reach cudaMallocAsync and nothing may stay cached. */
#include "cudatest.h"

static bool caching(void) {
    const char *e = getenv("RG_CUDA_ALLOC_CACHE");
    return !(e && strcmp(e, "0") == 0);
}

Test(cuda_alloc, freed_block_is_reused_without_a_system_call) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    size_t bytes = 1 << 20;
    rg_mem_stats s0 = g->mem_stats();
    void *p = g->alloc(bytes);
    g->free(p, bytes);
    void *q = g->alloc(bytes);
    rg_mem_stats s1 = g->mem_stats();
    cr_assert_eq(s1.in_use, s0.in_use + bytes);
    if (caching()) {
        cr_assert_eq(q, p, "the freed block comes back");
        cr_assert_eq(s1.sys_allocs, s0.sys_allocs + 1);
        cr_assert_eq(s1.reuses, s0.reuses + 1);
    } else {
        cr_assert_eq(s1.sys_allocs, s0.sys_allocs + 2, "cache off: every alloc is cudaMallocAsync");
        cr_assert_eq(s1.cached, 0);
    }
    g->free(q, bytes);
    cr_assert_eq(g->mem_stats().in_use, s0.in_use);
}

static void train_step(rg_tensor *x, rg_tensor *w1, rg_tensor *w2, rg_tensor *y) {
    rg_scope_begin();
    rg_tensor *h = rg_max_pool2d(rg_relu(rg_conv2d(x, w1, NULL, 1, 1)), 2, 2, 0);
    rg_backward(rg_cross_entropy(rg_linear(rg_flatten(h), w2, NULL), y));
    rg_scope_end();
    rg_zero_grad(w1), rg_zero_grad(w2);
}

Test(cuda_alloc, memory_stays_flat_across_training_steps) {
    RGT_REQUIRE_CUDA();
    rg_device dev = RG_CUDA_DEVICE(0);
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(8, 1, 16, 16), dev);
    rg_tensor *w1 = rg_tensor_new(RG_F32, RG_SHAPE(4, 1, 3, 3), dev);
    rg_tensor *w2 = rg_tensor_new(RG_F32, RG_SHAPE(10, 4 * 8 * 8), dev);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(8), dev); /* zeros: all class 0 */
    uint64_t off = 0;
    rg_tensor_uniform_(x, 0, 1, 1, &off), rg_tensor_uniform_(w1, -1, 1, 2, &off);
    rg_tensor_uniform_(w2, -0.1f, 0.1f, 3, &off);
    rg_tensor_set_requires_grad(w1, true), rg_tensor_set_requires_grad(w2, true);
    for (int i = 0; i < 3; i++) train_step(x, w1, w2, y); /* warm-up: gradients, cuDNN plans */
    rg_mem_stats warm = rg_mem_stats_get(dev);
    for (int i = 0; i < 30; i++) train_step(x, w1, w2, y);
    rg_mem_stats end = rg_mem_stats_get(dev);
    cr_assert_eq(end.in_use, warm.in_use, "no tensor outlives its step");
    cr_assert_eq(end.peak_in_use, warm.peak_in_use, "no step needs more than the first ones");
    if (caching())
        cr_assert_eq(end.sys_allocs, warm.sys_allocs, "steady state: no cudaMalloc");
    else
        cr_assert_eq(end.cached, 0);
    rgt_free_all(4, (rg_tensor *[]){x, w1, w2, y});
}

Test(cuda_alloc, release_cached_returns_every_block) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    void *p[4];
    for (int i = 0; i < 4; i++) p[i] = g->alloc((size_t)1000 << i);
    for (int i = 0; i < 4; i++) g->free(p[i], (size_t)1000 << i);
    g->mem_release_cached();
    rg_mem_stats s = g->mem_stats();
    cr_assert_eq(s.cached, 0);
    cr_assert_eq(s.in_use, 0);
    g->free(g->alloc(1000), 1000);
    cr_assert_eq(g->mem_stats().sys_allocs, s.sys_allocs + 1, "the cache was really emptied");
}

Test(cuda_alloc, pinned_staging_buffer_may_be_freed_once_its_copy_is_queued) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    size_t n = 16 << 20, bytes = n * sizeof(float); /* 64 MiB: the copy takes milliseconds */
    float *h = g->host_alloc(bytes);
    cr_assert(h);
    cr_assert_eq((uintptr_t)h % 64, 0, "64-byte aligned");
    for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000);
    float *d = rgt_dev(NULL, bytes);
    g->copy(d, h, bytes, RG_COPY_H2D); /* queued; h is still being read */
    g->host_free(h, bytes);
    float *h2 = g->host_alloc(bytes); /* h again only once the copy has run */
    memset(h2, 0xff, bytes);
    float *back = malloc(bytes);
    rgt_host(back, d, bytes);
    for (size_t i = 0; i < n; i += 4099)
        cr_assert_eq(back[i], (float)(i % 1000), "element %zu was overwritten before its copy", i);
    free(back), g->host_free(h2, bytes), rgt_dev_free(d, bytes);
}

Test(cuda_alloc, out_of_memory_is_null_and_recoverable) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    cr_assert_null(g->alloc((size_t)1 << 40), "1 TiB: no GPU has it");
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(1 << 20, 1 << 18), RG_CUDA_DEVICE(0));
    cr_assert_null(t);
    cr_assert(strstr(rg_last_error(), "out of memory"), "%s", rg_last_error());
    float one = 0.0f, *d = rgt_dev(NULL, 4); /* the device still works afterwards */
    g->fill(1, 1.0f, d);
    rgt_host(&one, d, 4);
    cr_assert_eq(one, 1.0f);
    rgt_dev_free(d, 4);
}

Test(cuda_alloc, event_timer_measures_queued_work) {
    RGT_REQUIRE_CUDA();
    rg_cuda_timer *t = NULL;
    cr_assert_eq(rg_cuda_timer_new(RG_CUDA_DEVICE(0), &t), RG_OK, "%s", rg_last_error());
    size_t n = 32 << 20;
    float *d = rgt_dev(NULL, n * 4);
    rg_cuda_timer_start(t);
    for (int i = 0; i < 10; i++) rgt_gpu()->fill((int64_t)n, (float)i, d);
    rg_cuda_timer_stop(t);
    float ms = rg_cuda_timer_elapsed_ms(t);
    cr_assert(ms > 0.0f && ms < 10000.0f, "10 fills of 128 MiB took %g ms", (double)ms);
    rg_cuda_timer_free(t);
    rgt_dev_free(d, n * 4);
}
