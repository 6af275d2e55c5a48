/* dist.h — the distributed world: who we are, and the thread that talks to the other ranks.
 *
 * rg_dist_init is the one call a program makes to become distributed. Started by mpirun, it
 * initialises MPI (MPI_THREAD_SERIALIZED: one request runs at a time), learns its rank and its
 * host-local rank, starts the comm thread and opens the default communicator. Started any other
 * way, it is a world of one: no MPI start-up at all, and every collective is a local copy. So the
 * same program runs alone and under `mpirun -np N` unchanged.
 *
 * It also installs the fatal handler: an RG_CHECK failure on any rank calls MPI_Abort, which ends
 * every rank of the job instead of leaving the others waiting in a collective.
 *
 * Stall policy (dist/join.c): before each collective the ranks check in with rank 0. A collective
 * that has waited stall_seconds for late ranks is reported (rank 0 names the ranks that have not
 * joined; the report repeats every stall_seconds) and it goes on waiting; after
 * stall_abort_seconds it fails with RG_ETIMEDOUT, the communicator is broken, and
 * rg_dist_finalize then aborts the job, since MPI_Finalize would wait for the missing rank forever.
 * The nccl backend applies the same two times to collectives queued on the GPU that never finish
 * (dist/cuda/nccl_watchdog.c), aborting the NCCL communicator after stall_abort_seconds, and the
 * mpi backend to its blocking MPI calls, which a rank that stops after the join never lets finish
 * (dist/mpi_watchdog.c): reported after stall_seconds, and after stall_abort_seconds the job ends
 * through rg_fatal_timeout (MPI_Abort, exit status 1), since the blocked call cannot return.
 * A rank that dies is handled by mpirun, which kills the whole job within about a second. */
#ifndef RG_DIST_H
#define RG_DIST_H

#include "ringgrad/export.h"

#include <stdbool.h>

#include "ringgrad/comm.h"
#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called with a one-line stall report (no trailing newline), on the thread running the collective
 * (the comm thread, or a thread waiting for it: comm.h), or, for a collective that the GPU never
 * finishes or a blocking MPI call that never returns, on the nccl or mpi backend's watchdog
 * thread. */
typedef void (*rg_stall_fn)(const char *msg, void *ctx);

typedef struct {
    /* public: options; a zero field takes its default */
    const char *comm;           /* backend of the default comm; NULL: $RG_COMM, else "mpi" */
    double stall_seconds;       /* 0: $RG_STALL_SECONDS, else 60; < 0: no stall check at all */
    double stall_abort_seconds; /* 0: $RG_STALL_ABORT_SECONDS, else 600; < 0: wait forever */
    /* (either variable at 0 or below turns its check off, as a negative option does) */
    rg_stall_fn on_stall;       /* NULL: print the report to stderr */
    void *on_stall_ctx;
    /* Settings every rank must share, as "name value" lines ("--lr 0.001\n--seed 42\n"); NULL:
     * none. rg_dist_init_opts compares them (and the backend name) across the ranks over MPI
     * before it creates the communicator, and fails on every rank alike with RG_EMISMATCH and a
     * message naming each differing setting and the ranks with their values. */
    const char *agree;
    /* Called on every rank that fails rg_dist_init_opts, with the message rg_last_error() will
     * then hold, before MPI is finalised: mpirun ends the whole job as soon as one rank exits with
     * an error, so a rank that reported only after the finalisation could be killed first and its
     * message lost. NULL: not called. (Same signature as on_stall.) */
    rg_stall_fn on_init_error;
    void *on_init_error_ctx;
} rg_dist_opts;

/* Joins the job (or makes a world of one) with default options; see rg_dist_init_opts. */
RG_API rg_dist *rg_dist_init(int *argc, char ***argv);
/* argc/argv are passed to MPI_Init_thread (may be NULL). opts may be NULL. Returns the world,
 * owned by the caller (rg_dist_finalize), or NULL with rg_last_error() set: a bad backend name or
 * environment variable, or "nccl" in a build without CUDA (RG_ENOTSUP). Call it once per process,
 * before starting threads that use the library. */
RG_API rg_dist *rg_dist_init_opts(int *argc, char ***argv, const rg_dist_opts *opts);
/* Collective. Closes the default communicator, stops the comm thread and finalises MPI (if
 * rg_dist_init started it). The close is checked in like a collective, so MPI_Finalize runs only
 * once every rank has arrived; a rank that is still missing after stall_abort_seconds (or a
 * default communicator that timed out before) makes it abort the job instead, as MPI_Finalize
 * would wait forever. Returns RG_OK, or the error that broke the world (for example a rank that
 * finalised while another was in a collective: RG_EMISMATCH). NULL is a no-op. */
RG_API RG_NODISCARD rg_status rg_dist_finalize(rg_dist *d);

/* The default communicator, owned by d. */
RG_API rg_comm *rg_dist_comm(rg_dist *d);
RG_API int rg_dist_rank(const rg_dist *d);
RG_API int rg_dist_size(const rg_dist *d);
RG_API int rg_dist_local_rank(const rg_dist *d); /* rank among the processes on this host */
RG_API int rg_dist_local_size(const rg_dist *d);
/* Whether this process was started by an MPI launcher (and MPI is initialised). */
RG_API bool rg_dist_launched(const rg_dist *d);

#ifdef __cplusplus
}
#endif

#endif
