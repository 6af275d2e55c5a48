/* Tests for tensors themselves: creation (zero-filled, freeable), wrapping, views, copies, fills,
 * rg_tensor_item, dtypes, device names, shape strings, and the shape checks that must stop. */
#include "rgtest.h"

#include <stdlib.h>
#include <string.h>

static bool all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

Test(tensor_tensor, new_is_zero_filled_long_lived_and_freeable) {
    const rg_dtype dts[] = {RG_F32, RG_I32, RG_I64, RG_U8};
    for (int k = 0; k < 4; k++) {
        /* dirty the allocator's cache first, so that zeros are not an accident of fresh pages */
        rg_tensor *dirty = rg_tensor_new(RG_U8, RG_SHAPE(3 * 5 * 7 * 8), RG_CPU);
        memset(dirty->data, 0xAB, rg_tensor_nbytes(dirty));
        rg_tensor_free(dirty);
        rg_tensor *t = rg_tensor_new(dts[k], RG_SHAPE(3, 5, 7), RG_CPU);
        cr_assert(t, "%s", rg_last_error());
        cr_assert_eq(t->numel, 105);
        cr_assert_eq(rg_tensor_nbytes(t), 105 * rg_dtype_size(dts[k]));
        cr_assert(all_zero(t->data, rg_tensor_nbytes(t)), "%s tensor is zero-filled",
                  rg_dtype_name(dts[k]));
        cr_assert(!(t->flags & RG_TENSOR_SCOPED), "rg_tensor_new is long-lived");
        cr_assert(t->flags & RG_TENSOR_OWNS_DATA);
        cr_assert_null(t->grad);
        cr_assert_null(t->grad_fn);
        cr_assert(((uintptr_t)t->data & 63) == 0, "data is 64-byte aligned");
        rg_tensor_free(t);
    }
}

/* RG_HUGEPAGES=1 (tensor/cpu/alloc.c): a block of 2 MiB or more starts on a 2 MiB boundary (and
 * asks for huge pages, which the host may or may not grant), is zero-filled, usable to its end,
 * and cached for the next tensor of its size; smaller ones are as before. */
Test(tensor_tensor, with_rg_hugepages_1_large_blocks_are_2_mib_aligned_and_reused) {
    setenv("RG_HUGEPAGES", "1", 1);     /* read at this process's first system allocation */
    const int64_t n = (int64_t)3 << 18; /* 3 MiB of floats: a 3.75 MiB class */
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(n), RG_CPU);
    cr_assert(t, "%s", rg_last_error());
    cr_assert(((uintptr_t)t->data & ((2u << 20) - 1)) == 0, "3 MiB tensor at %p", t->data);
    cr_assert(all_zero(t->data, rg_tensor_nbytes(t)));
    float *x = t->data;
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    cr_assert_eq(x[n - 1], (float)(n - 1));
    void *first = t->data;
    rg_tensor_free(t);
    t = rg_tensor_new(RG_F32, RG_SHAPE(n), RG_CPU);
    cr_assert_eq(t->data, first, "the cached block is reused");
    cr_assert(all_zero(t->data, rg_tensor_nbytes(t)), "and zero-filled again");
    rg_tensor *small = rg_tensor_new(RG_F32, RG_SHAPE(1000), RG_CPU);
    cr_assert(((uintptr_t)small->data & 63) == 0);
    rg_tensor_free(small);
    rg_tensor_free(t);
}

Test(tensor_tensor, new_works_without_a_scope_and_for_empty_and_scalar_shapes) {
    cr_assert_eq(rg_scope_depth(), 0);
    rg_tensor *e = rg_tensor_new(RG_F32, RG_SHAPE(0, 4), RG_CPU);
    cr_assert(e);
    cr_assert_eq(e->numel, 0);
    rg_tensor *s = rg_tensor_new(RG_F32, 0, NULL, RG_CPU);
    cr_assert(s);
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(s->numel, 1, "shape () holds one element");
    cr_assert_eq(rg_tensor_item(s), 0.0f);
    rgt_free_all(2, (rg_tensor *[]){e, s});
}

Test(tensor_tensor, free_null_is_a_no_op) {
    rg_tensor_free(NULL);
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU);
    rg_tensor_free(t);
}

Test(tensor_tensor, free_releases_data_and_gradient) {
    rg_mem_stats before = rg_mem_stats_get(RG_CPU);
    rg_tensor *w = rgt_param(RG_SHAPE(33, 7), -1, 1, 1);
    rg_scope_begin();
    rg_backward(rg_sum(w));
    rg_scope_end();
    cr_assert(w->grad && !(w->grad->flags & RG_TENSOR_SCOPED),
              "a parameter's gradient is long-lived");
    cr_assert_gt(rg_mem_stats_get(RG_CPU).in_use, before.in_use);
    rg_tensor_free(w);
    cr_assert_eq(rg_mem_stats_get(RG_CPU).in_use, before.in_use, "tensor and gradient freed");
}

Test(tensor_tensor, wrap_uses_caller_memory_and_never_frees_it) {
    float buf[6] = {1, 2, 3, 4, 5, 6};
    rg_mem_stats before = rg_mem_stats_get(RG_CPU);
    rg_tensor *t = rg_tensor_wrap(RG_F32, RG_SHAPE(2, 3), RG_CPU, buf);
    cr_assert_eq(t->data, (void *)buf);
    cr_assert(!(t->flags & RG_TENSOR_OWNS_DATA));
    rg_tensor_f32(t)[4] = 50;
    rg_tensor_free(t);
    cr_assert_eq(buf[4], 50.0f, "the caller's memory outlives the tensor");
    cr_assert_eq(rg_mem_stats_get(RG_CPU).in_use, before.in_use, "nothing was allocated for data");
}

Test(tensor_tensor, views_share_data) {
    rg_tensor *t = rgt_uniform(RG_SHAPE(4, 6), -1, 1, 2);
    rg_scope_begin();
    rg_tensor *v = rg_tensor_view(t, RG_SHAPE(2, 3, 4));
    cr_assert_eq(v->data, t->data);
    cr_assert_eq(v->ndim, 3);
    cr_assert(v->flags & RG_TENSOR_SCOPED);
    cr_assert(!(v->flags & RG_TENSOR_OWNS_DATA));
    rg_tensor_f32(v)[23] = 7;
    cr_assert_eq(rg_tensor_f32(t)[23], 7.0f);
    rg_scope_end();
    cr_assert_eq(rg_tensor_f32(t)[23], 7.0f, "ending the view's scope leaves the data alone");
    rg_tensor_free(t);
}

Test(tensor_tensor, copies_are_independent) {
    rg_tensor *t = rgt_uniform(RG_SHAPE(5, 3), -1, 1, 3);
    float host[15];
    rg_tensor_copy_to_host(t, host);
    rgt_assert_close(host, rg_tensor_f32(t), 15, 0, 0, "copy_to_host");
    rg_scope_begin();
    rg_tensor *c = rg_tensor_to(t, RG_CPU);
    cr_assert_neq(c->data, t->data, "rg_tensor_to makes a copy");
    cr_assert(rg_tensor_same_shape(c, t));
    rgt_assert_close(rg_tensor_f32(c), host, 15, 0, 0, "rg_tensor_to");
    rg_tensor_f32(c)[0] = 99;
    cr_assert_neq(rg_tensor_f32(t)[0], 99.0f);
    rg_tensor *d = rg_tensor_zeros(RG_F32, RG_SHAPE(5, 3), RG_CPU);
    rg_tensor_copy_(d, t);
    rgt_assert_close(rg_tensor_f32(d), host, 15, 0, 0, "copy_");
    rg_tensor_copy_(d, d); /* self-copy is harmless */
    rgt_assert_close(rg_tensor_f32(d), host, 15, 0, 0, "self copy");
    rg_tensor *h = rg_tensor_from_f32(RG_SHAPE(15), host, RG_CPU);
    rgt_assert_close(rg_tensor_f32(h), host, 15, 0, 0, "from_f32");
    rg_tensor *e = rg_tensor_empty_like(t);
    cr_assert(rg_tensor_same_shape(e, t) && e->dtype == t->dtype && e->data != t->data);
    rg_scope_end();
    rg_tensor_free(t);
}

Test(tensor_tensor, fill_and_zero) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(7, 3), RG_CPU);
    rg_tensor_fill_(t, -2.5f);
    for (int i = 0; i < 21; i++) cr_assert_eq(rg_tensor_f32(t)[i], -2.5f);
    rg_tensor_zero_(t);
    cr_assert(all_zero(t->data, rg_tensor_nbytes(t)));
    rg_tensor_free(t);
}

Test(tensor_tensor, item_reads_one_element) {
    float v = -3.25f;
    rg_tensor *a = rgt_tensor(RG_SHAPE(1, 1, 1), &v), *b = rgt_tensor(0, NULL, &v);
    cr_assert_eq(rg_tensor_item(a), -3.25f);
    cr_assert_eq(rg_tensor_item(b), -3.25f);
    rgt_free_all(2, (rg_tensor *[]){a, b});
}

Test(tensor_tensor, item_of_many_elements_stops, .signal = SIGABRT) {
    rg_tensor *t = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU);
    rgt_expect_fatal("item: tensor has 2 elements, not 1");
    rg_tensor_item(t);
}

Test(tensor_tensor, item_of_an_int_tensor_stops, .signal = SIGABRT) {
    rg_tensor *t = rg_tensor_new(RG_I64, RG_SHAPE(1), RG_CPU);
    rgt_expect_fatal("item: needs a float32 tensor, got int64");
    rg_tensor_item(t);
}

Test(tensor_tensor, dtype_sizes_and_names) {
    cr_assert_eq(rg_dtype_size(RG_F32), 4);
    cr_assert_eq(rg_dtype_size(RG_I32), 4);
    cr_assert_eq(rg_dtype_size(RG_I64), 8);
    cr_assert_eq(rg_dtype_size(RG_U8), 1);
    cr_assert_str_eq(rg_dtype_name(RG_F32), "float32");
    cr_assert_str_eq(rg_dtype_name(RG_I64), "int64");
    cr_assert_str_eq(rg_dtype_name((rg_dtype)99), "<bad dtype>");
}

Test(tensor_tensor, shape_strings) {
    char buf[96];
    cr_assert_str_eq(rg_shape_str(RG_SHAPE(128, 1, 28, 28), buf, sizeof buf), "(128,1,28,28)");
    cr_assert_str_eq(rg_shape_str(0, NULL, buf, sizeof buf), "()");
    cr_assert_str_eq(rg_shape_str(RG_SHAPE(5), buf, sizeof buf), "(5)");
    char tiny[6];
    rg_shape_str(RG_SHAPE(123456, 7), tiny, sizeof tiny); /* truncates, stays terminated */
    cr_assert_eq(strlen(tiny), 5);
    cr_assert_eq(rg_shape_numel(RG_SHAPE(3, 0, 5)), 0);
    cr_assert_eq(rg_shape_numel(0, NULL), 1);
}

/* ---- devices ---- */

Test(tensor_tensor, device_names_parse) {
    rg_device d = {RG_DEV_CUDA, 9};
    cr_assert_eq(rg_device_parse("cpu", &d), RG_OK);
    cr_assert(rg_device_eq(d, RG_CPU));
    cr_assert_eq(rg_device_parse("cuda", &d), RG_OK);
    cr_assert(rg_device_eq(d, RG_CUDA_DEVICE(0)));
    cr_assert_eq(rg_device_parse("cuda:3", &d), RG_OK);
    cr_assert(rg_device_eq(d, RG_CUDA_DEVICE(3)));
    cr_assert_eq(rg_device_parse("cuda:0", &d), RG_OK);
    cr_assert(rg_device_eq(d, RG_CUDA_DEVICE(0)));
    char buf[16];
    cr_assert_str_eq(rg_device_str(RG_CUDA_DEVICE(3), buf, sizeof buf), "cuda:3");
    cr_assert_str_eq(rg_device_str(RG_CPU, buf, sizeof buf), "cpu");
    cr_assert(!rg_device_eq(RG_CUDA_DEVICE(0), RG_CUDA_DEVICE(1)));
    cr_assert(!rg_device_eq(RG_CPU, RG_CUDA_DEVICE(0)));
}

Test(tensor_tensor, garbage_device_names_are_refused_with_a_message) {
    const char *bad[] = {
        "",       "gpu",     "CPU",     "cpu0",    "cuda:",   "cuda:-1",          "cuda:3x",
        "cuda:x", "cuda::1", "cuda: 3", "cuda:+3", " cuda:1", "cuda:99999999999", "cuda:2147483648",
        "cudax"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rg_device d = RG_CUDA_DEVICE(5);
        rg_status s = rg_device_parse(bad[i], &d);
        cr_assert_eq(s, RG_EINVAL, "'%s' was accepted as %s", bad[i],
                     rg_device_str(d, (char[16]){0}, 16));
        cr_assert(strstr(rg_last_error(), "expected cpu, cuda or cuda:N"), "'%s': %s", bad[i],
                  rg_last_error());
        cr_assert(rg_device_eq(d, RG_CUDA_DEVICE(5)), "'%s': the output is left alone", bad[i]);
    }
    cr_assert_eq(rg_device_parse(NULL, &(rg_device){0}), RG_EINVAL);
}

Test(tensor_tensor, cuda_tensor_without_cuda_stops_with_a_message, .signal = SIGABRT) {
    if (rg_cuda_device_count() > 0) abort(); /* a real device: nothing to refuse */
    rgt_expect_fatal(rg_cuda_compiled() ? "cuda:0: no such device" /* the backend, no GPU */
                                        : "device cuda:0: this build has no CUDA backend");
    rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CUDA_DEVICE(0));
}

/* ---- shape checks that stop ---- */

Test(tensor_tensor, negative_size_stops, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: bad size -3 in dimension 1");
    rg_tensor_new(RG_F32, RG_SHAPE(2, -3), RG_CPU);
}

Test(tensor_tensor, too_many_dims_stop, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: 7 dimensions (at most 6)");
    rg_tensor_new(RG_F32, RG_SHAPE(1, 1, 1, 1, 1, 1, 1), RG_CPU);
}

Test(tensor_tensor, negative_ndim_stops, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: -1 dimensions");
    rg_tensor_new(RG_F32, -1, (int64_t[]){1}, RG_CPU);
}

Test(tensor_tensor, huge_size_stops, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: bad size");
    rg_tensor_new(RG_F32, RG_SHAPE(INT64_C(1) << 41), RG_CPU);
}

Test(tensor_tensor, element_count_overflow_stops, .signal = SIGABRT) {
    /* each size passes on its own; the product (2^120) would overflow int64 */
    rgt_expect_fatal(
        "tensor: shape (1099511627776,1099511627776,1099511627776) has too many elements");
    rg_tensor_new(RG_F32, RG_SHAPE(INT64_C(1) << 40, INT64_C(1) << 40, INT64_C(1) << 40), RG_CPU);
}

Test(tensor_tensor, null_shape_stops, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: NULL shape for 2 dimensions");
    rg_tensor_new(RG_F32, 2, NULL, RG_CPU);
}

/* NULL host data used to be a segfault inside the copy, with no message */
Test(tensor_tensor, null_host_data_stops, .signal = SIGABRT) {
    rg_tensor_free(rg_tensor_from_f32(RG_SHAPE(0), NULL, RG_CPU)); /* nothing to read: fine */
    rgt_expect_fatal("rg_tensor_from_f32: NULL data");
    rg_tensor_from_f32(RG_SHAPE(2, 3), NULL, RG_CPU);
}

Test(tensor_tensor, bad_dtype_stops, .signal = SIGABRT) {
    rgt_expect_fatal("tensor: bad dtype 9");
    rg_tensor_new((rg_dtype)9, RG_SHAPE(2), RG_CPU);
}

Test(tensor_tensor, copy_shape_mismatch_stops, .signal = SIGABRT) {
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(2, 3), RG_CPU),
              *b = rg_tensor_new(RG_F32, RG_SHAPE(3, 2), RG_CPU);
    rgt_expect_fatal("copy: float32 (3,2) into float32 (2,3)");
    rg_tensor_copy_(a, b);
}

Test(tensor_tensor, copy_dtype_mismatch_stops, .signal = SIGABRT) {
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(2), RG_CPU),
              *b = rg_tensor_new(RG_I32, RG_SHAPE(2), RG_CPU);
    rgt_expect_fatal("copy: int32 (2) into float32 (2)");
    rg_tensor_copy_(a, b);
}

Test(tensor_tensor, view_with_another_element_count_stops, .signal = SIGABRT) {
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(2, 3), RG_CPU);
    rg_scope_begin();
    rgt_expect_fatal("view: cannot view (2,3) as (7)");
    rg_tensor_view(a, RG_SHAPE(7));
}

Test(tensor_tensor, float_pointer_of_an_int_tensor_stops, .signal = SIGABRT) {
    rg_tensor *a = rg_tensor_new(RG_I32, RG_SHAPE(2), RG_CPU);
    rgt_expect_fatal("rg_tensor_f32: needs a float32 tensor, got int32");
    rg_tensor_f32(a);
}

Test(tensor_tensor, gradients_only_for_float_tensors, .signal = SIGABRT) {
    rg_tensor *a = rg_tensor_new(RG_I64, RG_SHAPE(2), RG_CPU);
    rgt_expect_fatal("requires_grad: only float32 tensors have gradients");
    rg_tensor_set_requires_grad(a, true);
}

/* ---- running out of memory is a status, not a crash ---- */

/* Under AddressSanitizer a huge request must come back NULL instead of stopping the program. */
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1";
}

Test(tensor_tensor, out_of_memory_returns_null_with_a_message) {
    rg_mem_stats before = rg_mem_stats_get(RG_CPU);
    /* 4 TiB and 8 TiB: far beyond this machine, and the second beyond the allocator's largest
     * size class */
    rg_tensor *a = rg_tensor_new(RG_F32, RG_SHAPE(INT64_C(1) << 40), RG_CPU);
    cr_assert_null(a, "a 4 TiB tensor was allocated");
    cr_assert_eq(rg_last_status(), RG_ENOMEM, "%s", rg_status_name(rg_last_status()));
    cr_assert(strstr(rg_last_error(), "out of memory allocating 4.40 TB for a float32 "
                                      "tensor (1099511627776) on cpu"),
              "%s", rg_last_error());
    rg_tensor *b = rg_tensor_new(RG_I64, RG_SHAPE(INT64_C(1) << 20, INT64_C(1) << 20), RG_CPU);
    cr_assert_null(b, "an 8 TiB tensor was allocated");
    cr_assert(strstr(rg_last_error(), "8.80 TB for a int64 tensor"), "%s", rg_last_error());
    rg_mem_stats after = rg_mem_stats_get(RG_CPU);
    cr_assert_eq(after.in_use, before.in_use);
}

#include "core/sanitize.h"
#if RG_ASAN
/* Under ASan the caching allocator marks what is not in use (tensor/cpu/alloc.c): a block's slack
 * past the size asked for, and a cached block, so overruns and uses after free are reported even
 * though the block itself stays allocated. (Only in sanitizer builds: elsewhere nothing is marked.)
 */
Test(tensor_tensor, asan_sees_the_cached_allocators_slack_and_freed_blocks) {
    const rg_backend *cpu = rg_backend_for(RG_CPU);
    char *p = cpu->alloc(1000); /* a class of 1024 bytes: 24 bytes of slack */
    cr_assert_not_null(p);
    cr_assert_null(__asan_region_is_poisoned(p, 1000), "the bytes asked for are usable");
    cr_assert(__asan_address_is_poisoned(p + 1000), "the slack is off limits");
    cr_assert(__asan_address_is_poisoned(p + 1023));
    memset(p, 1, 1000);
    cpu->free(p, 1000);
    if (!getenv("RG_ALLOC_CACHE") || strcmp(getenv("RG_ALLOC_CACHE"), "0") != 0) {
        cr_assert(__asan_address_is_poisoned(p + 8), "a cached block is off limits");
        cr_assert(__asan_address_is_poisoned(p + 999));
        char *q = cpu->alloc(900); /* the same class: the block comes back */
        cr_assert_eq(q, p);
        cr_assert_null(__asan_region_is_poisoned(q, 900));
        cr_assert(__asan_address_is_poisoned(q + 900));
        cpu->free(q, 900);
    }
}
#endif
