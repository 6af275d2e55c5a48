/* The nccl backend where it cannot run: a build without CUDA says so (RG_ENOTSUP), and a CUDA
 * build on a machine without a GPU names the missing device (RG_EDEVICE). Neither crashes, and
 * the world is still usable afterwards. Where a GPU is present these skip: the backend itself is
 * tested by tests/cuda/test_cuda_comm.c and, across ranks, tests/dist/mpi_nccl*.c. */
#include <stdlib.h>
#include <string.h>

#include "rgtest.h"

static void skip_with_a_gpu(void) {
    if (rg_cuda_device_count() > 0) cr_skip_test("a GPU is present: test_cuda_comm covers nccl");
}

/* The message that asking for nccl here must leave in rg_last_error(). */
static void assert_clear_message(void) {
    const char *why = rg_last_error();
    if (rg_cuda_compiled()) {
        cr_assert(strstr(why, "nccl") && strstr(why, "no CUDA device"), "%s", why);
        cr_assert(strstr(why, "--comm mpi"), "the message offers a way out: %s", why);
    } else {
        cr_assert(strstr(why, "nccl") && strstr(why, "no CUDA"), "%s", why);
        cr_assert(strstr(why, "-DRG_CUDA=ON"), "the message says how to get it: %s", why);
    }
}

Test(dist_nccl, a_new_nccl_comm_without_a_usable_gpu_is_refused_clearly) {
    skip_with_a_gpu();
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    rg_comm *c = (rg_comm *)1;
    rg_status s = rg_comm_new(d, RG_COMM_NCCL, &c);
    cr_assert_eq(s, rg_cuda_compiled() ? RG_EDEVICE : RG_ENOTSUP, "got %s: %s", rg_status_name(s),
                 rg_last_error());
    assert_clear_message();
    cr_assert_null(c, "no communicator on failure");
    int64_t x[2] = {5, 6}, all[2];
    cr_assert_eq(rg_comm_allgather(rg_dist_comm(d), x, all, 2, RG_COMM_I64), RG_OK,
                 "the world still works: %s", rg_last_error());
    cr_assert(all[0] == 5 && all[1] == 6);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_nccl, a_world_asking_for_nccl_is_not_made_and_says_why) {
    skip_with_a_gpu();
    cr_assert_null(rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = "nccl"}));
    assert_clear_message();
    setenv("RG_COMM", "nccl", 1);
    cr_assert_null(rg_dist_init(NULL, NULL));
    assert_clear_message();
    unsetenv("RG_COMM");
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "a later world on mpi is fine: %s", rg_last_error());
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}
