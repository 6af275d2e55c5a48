/* ps.h — parameter servers: data parallelism without an allreduce (Li et al., OSDI 2014,
 * "Scaling Distributed Machine Learning with the Parameter Server"; stale synchronous parallel
 * from Ho et al., NIPS 2013).
 *
 * The last K ranks of the communicator are servers, the first W = size - K are workers (so that
 * rank 0, which logs, evaluates and saves, is a worker). The flattened trainable weights are cut
 * into K equal shards (padded, as zero1's); server s (rank W + s) holds shard s of the weights and
 * the optimizer state for it (a registry optimizer, rg_optim_new).
 *
 *   worker, each step:   backward; for s in 0..K-1: push gradient shard s to server s, then pull
 *                        weight shard s back (point-to-point over the comm: mpi or ring); at the
 *                        end of an epoch (or of the run, or a stop), rg_ps_end
 *   server, sync:        waits for the W workers' gradients of the step (in worker order), one
 *                        optimizer step on their sum with grad scale 1/W (DDP's average), then
 *                        every worker pulls the same weights: equal to DDP on W ranks
 *   server, async:       applies each gradient as it arrives (any worker first), grad scale 1/W;
 *                        a worker's pull is answered only while it is at most max_staleness steps
 *                        ahead of the slowest worker (SSP). max_staleness 0 is synchronous: with
 *                        plain SGD the weights equal ps-sync's (a stateful optimizer takes W steps
 *                        of 1/W per round instead of one, so Adam or momentum differ).
 *
 * Staleness of an applied gradient (async): the worker's step minus the slowest worker's applied
 * steps, at that server; 0 <= staleness <= max_staleness. Counted per server into a histogram.
 *
 * Pushes go after the whole backward (no overlap with it yet), shard by shard. */
#ifndef RG_PS_H
#define RG_PS_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/comm.h"
#include "ringgrad/optim.h"
#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RG_PS_SYNC, RG_PS_ASYNC } rg_ps_mode;

typedef struct {
    rg_ps_mode mode;
    int servers;       /* K >= 1, < comm size */
    int max_staleness; /* async only: S >= 0 */
    /* sync only, 0 for none: after each step whose number (counted from rg_ps_set_step's) is a
     * multiple of save_every, the servers send rank 0 their state as rg_ps_gather_state would,
     * and rank 0 must call rg_ps_gather_state after that step (a periodic checkpoint while the
     * servers serve); the other workers take no part */
    int64_t save_every;
} rg_ps_opts;

typedef struct rg_ps rg_ps;

/* Collective over comm (mpi or ring; nccl is RG_ENOTSUP). Broadcasts rank 0's parameters and
 * buffers; on a worker makes every gradient a view into one flat buffer; on a server creates the
 * optimizer `optim` with `options` over its shard. NULL with rg_last_error() on every rank alike
 * (RG_EINVAL: bad K, S or optimizer; RG_ENOTSUP: nccl). */
RG_API rg_ps *rg_ps_new(const rg_param_list *params, rg_comm *comm, const char *optim,
                        const char *options, const rg_ps_opts *opts);

RG_API bool rg_ps_is_server(const rg_ps *ps);
RG_API int rg_ps_workers(const rg_ps *ps);
/* This rank's index among the workers (0..W-1), or among the servers (0..K-1). */
RG_API int rg_ps_index(const rg_ps *ps);

/* Worker, after a backward: pushes the gradient shards and pulls the new weights into the
 * parameters, then zeroes the gradients. `flags` (the caller's bits, below 2^24; 0 for none: a
 * caught signal, a non-finite loss) travel with the push to every server; *seen (may be NULL)
 * gets the OR of every flag the servers have received in this period, from any worker: nonzero
 * asks this worker to end its period after this step (rg_ps_end). In sync mode every worker
 * sees the same flags at the same step. RG_OK or the communicator's failure. */
RG_API RG_NODISCARD rg_status rg_ps_push_pull(rg_ps *ps, int flags, int *seen);
/* Worker: ends its period (an epoch, or early after *seen came back nonzero), telling every
 * server, with `flags`. Sync workers must end after the same number of steps. */
RG_API RG_NODISCARD rg_status rg_ps_end(rg_ps *ps, int flags);
/* Server: serves the workers' pushes until every worker has ended the period (rg_ps_end).
 * *flags (may be NULL): the OR of every flag received; *steps (may be NULL): the most steps a
 * worker took. RG_OK, or RG_EPEER when the communicator fails or the pushes break the protocol
 * (sync workers ending at different steps). */
RG_API RG_NODISCARD rg_status rg_ps_serve(rg_ps *ps, int *flags, int64_t *steps);

/* The steps already taken (a resumed run's), on every rank: the count save_every is taken of.
 * Not collective. */
RG_API void rg_ps_set_step(rg_ps *ps, int64_t step);

/* Checkpoints; collective over the comm (workers other than rank 0 return at once), between
 * steps. `full` (rank 0 only; NULL elsewhere): an optimizer over the same parameters, made with
 * the servers' optimizer name and options, so that what it holds is one process's state.
 *   gather:  every server's shard of the weights into rank 0's parameters, and of each optimizer
 *            buffer (moments, momentum) into `full`, with server 0's step count and learning
 *            rate; rank 0 then saves the model and `full` (rg_checkpoint_save): the file is the
 *            one ddp writes, and resumes under any strategy.
 *   scatter: after rank 0 loaded a checkpoint into its parameters and `full` (and rg_ps_new
 *            broadcast the weights), each server's shard of the state, the step count and the
 *            learning rate. */
RG_API RG_NODISCARD rg_status rg_ps_gather_state(rg_ps *ps, rg_optim *full);
RG_API RG_NODISCARD rg_status rg_ps_scatter_state(rg_ps *ps, rg_optim *full);

/* Server: its shard's optimizer (learning rate, schedule); NULL on a worker. Borrowed. */
RG_API rg_optim *rg_ps_optim(rg_ps *ps);
/* Bytes of optimizer state on this rank (0 on a worker). */
RG_API size_t rg_ps_state_bytes(const rg_ps *ps);
/* Bytes a worker sends and receives per step: 2 x the padded flat weights (push + pull). */
RG_API int64_t rg_ps_bytes_per_step(const rg_ps *ps);
/* Collective: hist[0..n) = the staleness histogram summed over the servers (bins 0..S; n is
 * max_staleness + 1; sync counts everything at 0). */
RG_API RG_NODISCARD rg_status rg_ps_staleness_hist(rg_ps *ps, int64_t *hist, int n);

/* Restores ordinary gradients and frees everything. NULL is a no-op. Not collective. */
RG_API void rg_ps_free(rg_ps *ps);

#ifdef __cplusplus
}
#endif

#endif
