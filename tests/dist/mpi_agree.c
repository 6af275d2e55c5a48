/* rg_dist_opts.agree (dist/agree.c): ranks whose settings differ fail rg_dist_init_opts together,
 * before any communicator exists, with one message naming each setting and the ranks' values;
 * ranks that agree start normally. Run under -np 2 and -np 3 (rank 1 is the odd one out). The
 * program starts MPI itself, so that it can go on after a failed rg_dist_init_opts. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static void differing_values_fail_every_rank_naming_them(void) {
    int rank = mt_rank();
    char agree[128];
    snprintf(agree, sizeof agree, "--lr %s\n--seed 7\n", rank == 1 ? "0.2" : "0.1");
    rg_dist *d = rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = "mpi", .agree = agree});
    MT_CHECK(d == NULL, "rank %d: a differing --lr was accepted", rank);
    const char *m = rg_last_error();
    MT_CHECK(strstr(m, "the ranks' settings differ") && strstr(m, "--lr is 0.1 on rank 0, 0.2 on rank 1"),
             "rank %d: %s", rank, m);
    MT_CHECK(!strstr(m, "--seed"), "rank %d: names an equal setting: %s", rank, m);
}

static void a_backend_differs_before_any_comm_exists(void) {
    int rank = mt_rank();
    /* ring and mpi could not meet on either backend; the comparison runs over MPI itself */
    rg_dist *d = rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = rank == 1 ? "ring" : "mpi"});
    MT_CHECK(d == NULL, "rank %d: different backends were accepted", rank);
    MT_CHECK(strstr(rg_last_error(), "--comm/$RG_COMM is mpi on rank 0, ring on rank 1"), "rank %d: %s",
             rank, rg_last_error());
}

static void the_mpi_comms_ring_switch_must_agree(void) {
    int rank = mt_rank();
    /* one rank in MPI_Allreduce, another in the ring's sends, would wait for each other forever */
    if (rank == 1) setenv("RG_MPI_RING", "0", 1);
    rg_dist *d = rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = "mpi"});
    unsetenv("RG_MPI_RING");
    MT_CHECK(d == NULL, "rank %d: a differing RG_MPI_RING was accepted", rank);
    MT_CHECK(strstr(rg_last_error(), "$RG_MPI_RING is 1 on rank 0, 0 on rank 1"), "rank %d: %s",
             rank, rg_last_error());
}

static void a_setting_missing_on_rank_0_is_named(void) {
    int rank = mt_rank();
    rg_dist *d = rg_dist_init_opts(
        NULL, NULL, &(rg_dist_opts){.comm = "mpi", .agree = rank == 1 ? "--extra 1\n" : ""});
    MT_CHECK(d == NULL, "rank %d: an extra setting was accepted", rank);
    MT_CHECK(strstr(rg_last_error(), "--extra is (absent) on rank 0, 1 on rank 1"), "rank %d: %s",
             rank, rg_last_error());
}

static void equal_settings_start_normally(void) {
    rg_dist *d = rg_dist_init_opts(NULL, NULL, &(rg_dist_opts){.comm = "mpi", .agree = "--lr 0.1\n"});
    MT_CHECK(d, "rank %d: %s", mt_rank(), rg_last_error());
    float x = 1.0f;
    MT_OK(rg_comm_allreduce(rg_dist_comm(d), &x, 1, RG_COMM_F32, RG_REDUCE_SUM));
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MT_CHECK(x == (float)size, "allreduce gave %g", (double)x);
    MT_OK(rg_dist_finalize(d));
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MT_RUN(differing_values_fail_every_rank_naming_them);
    MT_RUN(a_backend_differs_before_any_comm_exists);
    MT_RUN(the_mpi_comms_ring_switch_must_agree);
    MT_RUN(a_setting_missing_on_rank_0_is_named);
    MT_RUN(equal_settings_start_normally);
    int rc = mt_report();
    MPI_Finalize();
    return rc;
}
