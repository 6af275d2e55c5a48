/* The CUDA entry points link and answer sensibly in every build: with the CUDA backend but no GPU
 * (this machine), without the backend (-DRG_CUDA=OFF: tensor/cuda_api_nocuda.c), and with a GPU.
 * These tests run everywhere; none is skipped. */
#include "cudatest.h"

Test(cuda_link, device_count_is_answered_without_crashing) {
    int n = rg_cuda_device_count(); /* in a CUDA build: cudaGetDeviceCount, no driver needed */
    cr_assert_geq(n, 0);
    cr_assert_eq(rg_cuda_device_count(), n, "the count does not change");
}

Test(cuda_link, device_selection_works_or_says_why_not) {
    rg_device dev = RG_CPU;
    char name[256] = "unchanged";
    if (rg_cuda_device_count() > 0) {
        cr_assert_eq(rg_cuda_set_device(0, &dev), RG_OK, "%s", rg_last_error());
        cr_assert(dev.type == RG_DEV_CUDA && dev.index == 0);
        cr_assert_eq(rg_cuda_device_name(0, name, sizeof name), RG_OK);
        cr_assert_gt(strlen(name), 0);
        cr_assert_str_eq(rg_backend_for(dev)->name, "cuda");
        return;
    }
    rg_status s = rg_cuda_set_device(0, &dev);
    cr_assert(s == RG_EDEVICE || s == RG_ENOTSUP, "got %s", rg_status_name(s));
    cr_assert_gt(strlen(rg_last_error()), 0, "the failure is explained");
    cr_assert_eq(dev.type, RG_DEV_CPU, "the device is untouched on failure");
    cr_assert_neq(rg_cuda_device_name(0, name, sizeof name), RG_OK);
    cr_assert_str_empty(name);
    rg_cuda_timer *t = (rg_cuda_timer *)&dev;
    cr_assert_neq(rg_cuda_timer_new(RG_CUDA_DEVICE(0), &t), RG_OK);
    cr_assert_null(t);
    rg_cuda_timer_free(NULL);
}

Test(cuda_link, a_cuda_device_that_is_not_there_stops_with_a_message, .signal = SIGABRT) {
    rg_backend_for(RG_CUDA_DEVICE(rg_cuda_device_count())); /* one past the last */
}

Test(cuda_link, cpu_host_alloc_is_aligned_and_counted) {
    const rg_backend *cpu = rg_backend_for(RG_CPU);
    rg_mem_stats s0 = cpu->mem_stats();
    float *p = cpu->host_alloc(1000 * sizeof(float));
    cr_assert(p);
    cr_assert_eq((uintptr_t)p % 64, 0);
    for (int i = 0; i < 1000; i++) p[i] = (float)i; /* writable (ASan checks the bounds) */
    cr_assert_geq(cpu->mem_stats().in_use, s0.in_use + 1000 * sizeof(float));
    cpu->host_free(p, 1000 * sizeof(float));
    cr_assert_eq(cpu->mem_stats().in_use, s0.in_use);
}
