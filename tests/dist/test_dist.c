/* A world of one: without mpirun, rg_dist_init starts no MPI at all, and every collective is
 * the identity or a copy. Backend names and environment options
 * (the nccl backend without a GPU: test_nccl.c). */
#include <mpi.h>
#include <stdlib.h>

#include "dist/comm_impl.h"
#include "rgtest.h"
#include "core/kernels.h"

/* ctest might itself run under a launcher; these tests are about running without one. */
static void no_launcher(void) {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMI_RANK");
    unsetenv("RG_COMM");
}

TestSuite(dist_world, .init = no_launcher);

Test(dist_world, one_rank_without_mpirun_and_no_mpi_init) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    cr_assert_eq(rg_dist_rank(d), 0);
    cr_assert_eq(rg_dist_size(d), 1);
    cr_assert_eq(rg_dist_local_rank(d), 0);
    cr_assert_eq(rg_dist_local_size(d), 1);
    cr_assert(!rg_dist_launched(d));
    int up = 1;
    MPI_Initialized(&up);
    cr_assert(!up, "MPI must not be initialised in a world of one");
    rg_comm *c = rg_dist_comm(d);
    cr_assert_eq(rg_comm_kind(c), RG_COMM_MPI, "default backend");
    cr_assert_eq(rg_comm_size(c), 1);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_world, collectives_of_one_are_identity_or_copy) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d);
    for (int b = 0; b < 2; b++) {
        rg_comm *c;
        cr_assert_eq(rg_comm_new(d, b ? RG_COMM_RING : RG_COMM_MPI, &c), RG_OK);
        float x[5] = {1, -2, 3.5f, 4, 5}, y[5] = {0};
        cr_assert_eq(rg_comm_allreduce(c, x, 5, RG_COMM_F32, RG_REDUCE_SUM), RG_OK);
        cr_assert_eq(rg_comm_allreduce(c, x, 5, RG_COMM_F32, RG_REDUCE_AVG), RG_OK);
        cr_assert_eq(x[2], 3.5f);
        cr_assert_eq(rg_comm_broadcast(c, x, 5, RG_COMM_F32, 0), RG_OK);
        cr_assert_eq(rg_comm_allgather(c, x, y, 5, RG_COMM_F32), RG_OK);
        cr_assert_arr_eq(x, y, sizeof x);
        memset(y, 0, sizeof y);
        cr_assert_eq(rg_comm_reduce_scatter(c, x, y, 5, RG_COMM_F32, RG_REDUCE_SUM), RG_OK);
        cr_assert_arr_eq(x, y, sizeof x);
        cr_assert_eq(rg_comm_barrier(c), RG_OK);
        rg_comm_req *r;
        cr_assert_eq(rg_comm_allreduce_async(c, x, 5, RG_COMM_F32, RG_REDUCE_SUM, &r), RG_OK);
        cr_assert_eq(rg_comm_wait(r), RG_OK);
        cr_assert_eq(x[4], 5.0f);
        cr_assert_eq(rg_comm_allreduce(c, NULL, 0, RG_COMM_F32, RG_REDUCE_SUM), RG_OK);
        rg_comm_free(c);
    }
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_world, backend_names_parse_and_print) {
    const char *names[] = {"mpi", "ring", "nccl"};
    for (int b = 0; b < RG_COMM_BACKEND_COUNT; b++) {
        rg_comm_backend got;
        cr_assert_eq(rg_comm_backend_parse(names[b], &got), RG_OK);
        cr_assert_eq(got, (rg_comm_backend)b);
        cr_assert_str_eq(rg_comm_backend_name(got), names[b]);
    }
    const char *bad[] = {"MPI", "tcp", "", "ring "};
    for (int i = 0; i < 4; i++) {
        rg_comm_backend got = RG_COMM_RING;
        cr_assert_eq(rg_comm_backend_parse(bad[i], &got), RG_EINVAL, "\"%s\"", bad[i]);
        cr_assert(strstr(rg_last_error(), "choose mpi, ring or nccl"), "%s", rg_last_error());
    }
    rg_comm_backend got;
    cr_assert_eq(rg_comm_backend_parse(NULL, &got), RG_EINVAL);
}

Test(dist_world, backend_and_stall_time_come_from_options_then_environment) {
    setenv("RG_COMM", "ring", 1);
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    cr_assert_eq(rg_comm_kind(rg_dist_comm(d)), RG_COMM_RING);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
    d = rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = "mpi"});
    cr_assert_eq(rg_comm_kind(rg_dist_comm(d)), RG_COMM_MPI, "an option beats the environment");
    cr_assert_eq(rg_dist_finalize(d), RG_OK);

    setenv("RG_COMM", "carrier-pigeon", 1);
    cr_assert_null(rg_dist_init(NULL, NULL));
    cr_assert(strstr(rg_last_error(), "carrier-pigeon"), "%s", rg_last_error());
    unsetenv("RG_COMM");

    setenv("RG_STALL_SECONDS", "soon", 1);
    cr_assert_null(rg_dist_init(NULL, NULL));
    cr_assert(strstr(rg_last_error(), "RG_STALL_SECONDS"), "%s", rg_last_error());
    setenv("RG_STALL_SECONDS", "2.5", 1);
    d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_world, root_out_of_range_is_misuse, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    int x = 0;
    RG_IGNORE(rg_comm_broadcast(rg_dist_comm(d), &x, 1, RG_COMM_I32, 1)); /* stops: misuse */
}

Test(dist_world, avg_of_integers_is_misuse, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    int x = 0;
    RG_IGNORE(rg_comm_allreduce(rg_dist_comm(d), &x, 1, RG_COMM_I32, RG_REDUCE_AVG)); /* stops */
}

Test(dist_world, message_to_self_is_misuse, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    int x = 0;
    RG_IGNORE(rg_comm_send(rg_dist_comm(d), &x, 1, RG_COMM_I32, 0, 0)); /* stops: misuse */
}

/* The float16 sum of the host reductions (vectorised with F16C where the build targets it) adds
 * in float32 and rounds once, exactly as the scalar formulas: every half against a spread of
 * others, at a length that leaves a scalar tail. */
Test(dist_world, float16_host_sum_adds_in_float32_and_rounds_once) {
    enum { N = 65536 + 7 };
    uint16_t *d = malloc(N * sizeof *d), *s = malloc(N * sizeof *s), *d0 = malloc(N * sizeof *d0);
    cr_assert(d && s && d0);
    for (int i = 0; i < N; i++) {
        d[i] = d0[i] = (uint16_t)i;
        s[i] = (uint16_t)((uint32_t)i * 2654435761u >> 16);
    }
    rg_host_reduce_sum(d, s, N, RG_COMM_F16);
    for (int i = 0; i < N; i++) {
        float sum = rg_f16_to_f32(d0[i]) + rg_f16_to_f32(s[i]);
        uint16_t want = rg_f32_to_f16(sum);
        bool nan = (d[i] & 0x7C00u) == 0x7C00u && (d[i] & 0x3FFu);
        if (sum != sum)
            cr_assert(nan, "%04x + %04x -> %04x, want a nan", d0[i], s[i], d[i]);
        else
            cr_assert_eq(d[i], want, "%04x + %04x -> %04x, want %04x", d0[i], s[i], d[i], want);
    }
    free(d), free(s), free(d0);
}
