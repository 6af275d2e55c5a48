/* The timeline across ranks: every rank records its steps and the comm thread its collectives;
 * rank 0 gathers them into one file that check_timeline.py accepts: a row group per rank, the
 * main and comm threads in each, and every expected event on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist_test.h"
#include "mpitest.h"

static rg_dist *dist;
static int rank, size;
static char path[4096];

static void test_every_rank_lands_in_one_file(void) {
    rg_comm *c = rg_dist_comm(dist);
    MT_OK(rg_timeline_start(c));
    int64_t n = 1 << 16;
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    for (int step = 0; step < 3; step++) {
        rg_trace_begin("step", "compute");
        rg_comm_req *ra, *rb;
        rg_trace_begin("backward", "compute");
        MT_OK(rg_comm_allreduce_async(c, a, n, RG_COMM_F32, RG_REDUCE_AVG, &ra));
        usleep(2000 * (rank + 1)); /* ranks arrive at different times: "wait for ranks" shows it */
        MT_OK(rg_comm_allreduce_async(c, b, n / 2, RG_COMM_F32, RG_REDUCE_AVG, &rb));
        rg_trace_end();
        MT_OK(rg_comm_wait(ra));
        MT_OK(rg_comm_wait(rb));
        rg_trace_end();
    }
    free(a);
    free(b);
    rg_trace_stop();
    MT_OK(rg_timeline_write(c, path));
}

int main(int argc, char **argv) {
    dist = rg_dist_init(&argc, &argv);
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    snprintf(path, sizeof path, "%s/tests/timeline_np%d.json", RG_BINARY_DIR, size);
    MT_RUN(test_every_rank_lands_in_one_file);
    MT_OK(rg_dist_finalize(dist));
    if (rank == 0) { /* MPI is finalised: system() is safe now */
        char cmd[8300];
        snprintf(cmd, sizeof cmd,
                 "python3 %s/tests/dist/check_timeline.py %s --ranks %d --expect step "
                 "--expect backward --expect allreduce --expect 'wait for ranks'",
                 RG_SOURCE_DIR, path, size);
        MT_CHECK(system(cmd) == 0, "check_timeline.py rejected %s", path);
        if (!getenv("RG_KEEP_TIMELINE")) remove(path);
    }
    return mt_report();
}
