/* mpitest.h — assertions for the MPI test programs (tests/<module>/mpi_*.c), which CTest runs
 * under `scripts/rg-mpirun -np 2` and `-np 3`.
 *
 * A failed check prints the rank, file:line and the message, then MPI_Abort()s, so the whole job
 * fails at once and no rank is left waiting in a collective. Each test case runs through
 * MT_RUN; at the end rank 0 prints "N passed, 0 failed" (a failure never gets that far). */
#ifndef RG_MPITEST_H
#define RG_MPITEST_H

#include <stdint.h>

#include "ringgrad.h"
#include "autograd/autograd_impl.h" /* tests are white-box */
#include "tensor/backend_impl.h"

#define MT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) mt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                              \
    } while (0)

/* Checks that an rg_status expression is RG_OK; the message includes rg_last_error(). */
#define MT_OK(expr)                                                                                \
    do {                                                                                           \
        rg_status mt_s_ = (expr);                                                                  \
        if (mt_s_ != RG_OK)                                                                        \
            mt_fail(__FILE__, __LINE__, #expr, "%s: %s", rg_status_name(mt_s_), rg_last_error());  \
    } while (0)

#define MT_RUN(fn) mt_run(#fn, fn)

_Noreturn void mt_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Runs one test case and counts it. */
void mt_run(const char *name, void (*fn)(void));
/* Rank 0 prints "N passed, 0 failed". Returns the exit code for main (0). */
int mt_report(void);
/* This process's rank in MPI_COMM_WORLD, or 0 without MPI. */
int mt_rank(void);

#endif
