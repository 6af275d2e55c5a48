/* The stall check: a collective that waits longer than stall_seconds for a late rank is reported
 * (rank 0 names the late rank, the others say they wait for rank 0) and then completes; one that
 * waits longer than stall_abort_seconds fails with RG_ETIMEDOUT on every rank. */
#include <stdio.h>
#include <unistd.h>

#include "dist_test.h"
#include "mpitest.h"

#define WARN_S 0.25
#define ABORT_S 2.0

static rg_dist *dist;
static int rank, size;

/* The reports this rank's comm thread made (the callback runs on the comm thread; the main
 * thread reads them only after the collective has returned). */
static char reports[16][1024];
static int nreports;

static void on_stall(const char *msg, void *ctx) {
    if (nreports < 16) snprintf(reports[nreports], sizeof reports[0], "%s", msg);
    nreports++;
}

static void test_late_rank_is_named_and_collective_completes(void) {
    rg_comm *c = rg_dist_comm(dist);
    int late = size - 1;
    nreports = 0;
    if (rank == late) usleep(1200 * 1000);
    float x = 1;
    MT_OK(rg_comm_allreduce(c, &x, 1, RG_COMM_F32, RG_REDUCE_SUM));
    MT_CHECK(x == (float)size, "sum %g after the stall", x);
    if (rank == late) {
        MT_CHECK(nreports == 0, "the late rank itself reported: %s", reports[0]);
        return;
    }
    MT_CHECK(nreports >= 1, "rank %d: no stall report after waiting 1.2 s (stall_seconds %.2f)",
             rank, WARN_S);
    char want[64];
    if (rank == 0)
        snprintf(want, sizeof want, "not joined yet: rank %d", late);
    else
        snprintf(want, sizeof want, "on rank %d for rank 0", rank);
    for (int i = 0; i < nreports && i < 16; i++) {
        MT_CHECK(strstr(reports[i], want), "report \"%s\" lacks \"%s\"", reports[i], want);
        MT_CHECK(strstr(reports[i], "allreduce(1 x f32, sum)"), "report \"%s\" lacks the call",
                 reports[i]);
        if (rank == 0 && size > 2)
            MT_CHECK(!strstr(reports[i], "rank 1,") && !strstr(reports[i], ": rank 1"),
                     "report \"%s\" names rank 1, which had joined", reports[i]);
    }
}

/* Past stall_abort_seconds everyone gives up, the late rank too (rank 0 no longer answers). */
static void test_waiting_past_abort_time_fails_with_timeout(void) {
    rg_comm *c;
    MT_OK(rg_comm_new(dist, RG_COMM_RING, &c));
    int late = size - 1;
    if (rank == late) usleep((useconds_t)((ABORT_S + 1.0) * 1e6));
    float x = 1;
    rg_status s = rg_comm_allreduce(c, &x, 1, RG_COMM_F32, RG_REDUCE_SUM);
    MT_CHECK(s == RG_ETIMEDOUT, "got %s: %s", rg_status_name(s), rg_last_error());
    MT_CHECK(strstr(rg_last_error(), "gave up after 2 s"), "message: %s", rg_last_error());
    if (rank == 0) {
        char want[64];
        snprintf(want, sizeof want, "not joined yet: rank %d", late);
        MT_CHECK(strstr(rg_last_error(), want), "message lacks \"%s\": %s", want, rg_last_error());
    }
    s = rg_comm_barrier(c);
    MT_CHECK(s == RG_ETIMEDOUT && strstr(rg_last_error(), "broken"),
             "a broken comm fails at once: %s", rg_last_error());
    rg_comm_free(c);
    /* Line the ranks up again. The late rank gives up ABORT_S + 1 s after the others; arriving
     * at the barrier before that would be a stall of its own. */
    if (rank != late) usleep((useconds_t)((ABORT_S + 0.5) * 1e6));
    MT_OK(rg_comm_barrier(rg_dist_comm(dist)));
}

int main(int argc, char **argv) {
    dist = rg_dist_init_opts(&argc, &argv,
                             &(rg_dist_opts){.stall_seconds = WARN_S,
                                             .stall_abort_seconds = ABORT_S,
                                             .on_stall = on_stall});
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);

    MT_RUN(test_late_rank_is_named_and_collective_completes);
    MT_RUN(test_waiting_past_abort_time_fails_with_timeout);

    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
