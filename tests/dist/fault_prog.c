/* fault_prog — an MPI program that fails on purpose, for tests/dist/fault.sh, which checks that
 * the whole job ends quickly with a non-zero exit and a message instead of hanging:
 *   fault_prog kill    the last rank SIGKILLs itself in the middle of repeated allreduces, from
 *                      a thread, so the signal lands while its comm thread is inside one
 *   fault_prog exit    the last rank exit(3)s there, without finalising
 *   fault_prog exit0   the last rank exit(0)s there, without finalising
 *   fault_prog check   the last rank trips an RG_CHECK there (the fatal handler calls MPI_Abort)
 *   fault_prog stall   the last rank stops there for good; the others report it and time out
 *                      (run with short RG_STALL_SECONDS and RG_STALL_ABORT_SECONDS)
 *   fault_prog early   the last rank finalises early; the others get RG_EMISMATCH
 *   fault_prog freeze  the last rank SIGSTOPs itself from a thread while its comm thread runs
 *                      allreduces small enough for MPI_Allreduce: mostly inside one, after the
 *                      join, where only the watchdog (dist/mpi_watchdog.c) sees it (run with
 *                      short RG_STALL_SECONDS and RG_STALL_ABORT_SECONDS)
 * Without a failure it would print "done" and exit 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringgrad.h"

static void *kill_soon(void *arg) {
    usleep(3000);
    raise(SIGKILL);
    return NULL;
}

static void *stop_soon(void *arg) {
    usleep(3000);
    raise(SIGSTOP);
    return NULL;
}

static void fail_now(const char *mode, rg_dist *d) {
    rg_comm *c = rg_dist_comm(d);
    pthread_t t;
    if (strcmp(mode, "kill") == 0) pthread_create(&t, NULL, kill_soon, NULL);
    if (strcmp(mode, "freeze") == 0) pthread_create(&t, NULL, stop_soon, NULL);
    if (strcmp(mode, "exit") == 0) exit(3);
    if (strcmp(mode, "exit0") == 0) exit(0);
    if (strcmp(mode, "check") == 0) {
        int x = 0;
        RG_IGNORE(rg_comm_broadcast(c, &x, 1, RG_COMM_I32, rg_dist_size(d))); /* root out of range */
    }
    if (strcmp(mode, "stall") == 0)
        for (;;) pause();
    if (strcmp(mode, "early") == 0) exit(rg_dist_finalize(d) == RG_OK ? 0 : 4);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "kill";
    rg_dist *d = rg_dist_init(&argc, &argv);
    if (!d) {
        fprintf(stderr, "fault_prog: %s\n", rg_last_error());
        return 1;
    }
    int64_t n = strcmp(mode, "freeze") == 0 ? 1 << 16 : 1 << 18; /* 256 KiB: MPI_Allreduce's */
    float *buf = calloc(n, sizeof *buf);
    for (int it = 0; it < 200; it++) {
        if (it == 20 && rg_dist_rank(d) == rg_dist_size(d) - 1) fail_now(mode, d);
        rg_status s = rg_comm_allreduce(rg_dist_comm(d), buf, n, RG_COMM_F32, RG_REDUCE_SUM);
        if (s != RG_OK) {
            fprintf(stderr, "fault_prog: rank %d: %s\n", rg_dist_rank(d), rg_last_error());
            RG_IGNORE(rg_dist_finalize(d)); /* the error above is the one to report */
            return 2;
        }
    }
    free(buf);
    if (rg_dist_rank(d) == 0) printf("done\n");
    return rg_dist_finalize(d) == RG_OK ? 0 : 1;
}
