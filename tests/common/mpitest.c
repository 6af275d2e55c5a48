/* mpitest.c — see mpitest.h. */
#include "mpitest.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int passed;
static int rank_seen = -1; /* remembered, so that mt_report works after MPI_Finalize */

int mt_rank(void) {
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Comm_rank(MPI_COMM_WORLD, &rank_seen);
    return rank_seen < 0 ? 0 : rank_seen;
}

_Noreturn void mt_fail(const char *file, int line, const char *expr, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d: %s:%d: check failed: %s: %s\n", mt_rank(), file, line, expr, msg);
    fflush(stderr);
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void mt_run(const char *name, void (*fn)(void)) {
    fn();
    passed++;
    if (mt_rank() == 0) {
        printf("ok %d - %s\n", passed, name);
        fflush(stdout);
    }
}

int mt_report(void) {
    if (mt_rank() == 0) printf("%d passed, 0 failed\n", passed);
    return 0;
}
