/* zero.h — ZeRO stage 1: data parallelism with the optimizer state sharded over the ranks
 * (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
 * Models"; llm.c's zero_stage 1).
 *
 *   rg_zero1 *z = rg_zero1_new(rg_model_params(net), comm, "adam", "lr=1e-3", NULL);
 *   for each step:
 *       rg_backward(loss);      gradients land in one flat buffer (each grad is a view into it),
 *                               cut into DDP's buckets; as each bucket's last gradient is final,
 *                               its reduce-scatter starts on the comm thread (overlapping the rest
 *                               of backward): rank r gets the sum of piece r of every bucket
 *       rg_zero1_step(z);       waits for the reduce-scatters; the optimizer updates this rank's
 *                               pieces of the weights only; allgather the weights: every rank has
 *                               all of them again
 *
 * Each rank keeps the optimizer state (Adam's two moments, SGD's momentum) for 1/N of the
 * weights, so that memory is divided by N. The bytes on the wire per step are those of an
 * allreduce (a reduce-scatter and an allgather are its two halves), and the weights after each
 * step are DDP's, up to float rounding: tests/train/equiv.sh compares them.
 *
 * After an rg_backward on a step that syncs (rg_zero1_will_sync), call rg_zero1_step on every
 * rank before the next rg_backward: reduce-scatters may be in flight. */
#ifndef RG_ZERO_H
#define RG_ZERO_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>

#include "ringgrad/comm.h"
#include "ringgrad/optim.h"
#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int accum_steps;        /* step only on every accum_steps-th rg_zero1_step call (default 1) */
    double bucket_mb;       /* bucket capacity in MiB (default 25), as rg_ddp_opts */
    double first_bucket_mb; /* the first bucket's (default 1, or bucket_mb when smaller) */
    bool no_overlap;        /* one bucket, reduce-scattered in rg_zero1_step after backward */
} rg_zero1_opts;

typedef struct rg_zero1 rg_zero1;

/* Wraps the trainable tensors of `params` (borrowed: they must outlive it): broadcasts rank 0's
 * parameters and buffers, makes every gradient a view into one flat buffer and hooks it, and
 * creates the optimizer `optim` (a registry name, rg_optim_new, with its "key=value" options)
 * over this rank's pieces of the weights. Collective. Returns NULL with rg_last_error() set
 * (RG_EINVAL: an unknown optimizer or option; RG_ENOMEM; RG_EPEER; RG_EMISMATCH: the ranks' models,
 * bucket sizes or accum_steps differ) on every rank alike. */
RG_API rg_zero1 *rg_zero1_new(const rg_param_list *params, rg_comm *comm, const char *optim,
                              const char *options, const rg_zero1_opts *opts);

/* True when the coming rg_zero1_step updates the weights (always, with accum_steps 1). */
RG_API bool rg_zero1_will_sync(const rg_zero1 *z);

/* After a backward: on an accumulating micro-step returns at once; otherwise finishes the
 * gradients' reduce-scatters (sum; the optimizer applies the 1/N), steps the shard's optimizer,
 * allgathers the weights into every parameter and zeroes the gradients. Collective. Returns RG_OK
 * or the communicator's failure. */
RG_API RG_NODISCARD rg_status rg_zero1_step(rg_zero1 *z);

/* The shard's optimizer: for its learning rate and schedule (rg_optim_set_lr,
 * rg_optim_set_schedule); its state holds this rank's shard only. Borrowed. */
RG_API rg_optim *rg_zero1_optim(rg_zero1 *z);

/* Bytes of optimizer state on this rank (moments, momentum buffers; counters excluded), and the
 * elements of the flattened weights this rank updates (about numel / N). */
RG_API size_t rg_zero1_state_bytes(const rg_zero1 *z);
RG_API int64_t rg_zero1_shard_numel(const rg_zero1 *z);
/* The bytes of a step's collectives in allreduce terms: the flat gradient (padded to N shards)
 * that the reduce-scatter and the allgather move between them, as an allreduce of it would. */
RG_API int64_t rg_zero1_bytes_per_step(const rg_zero1 *z);

/* The buckets, and how many of them the last step's backward launched from its gradient hooks
 * (the rest went in rg_zero1_step: the last layers' bucket, unused parameters, no_overlap). */
RG_API int rg_zero1_num_buckets(const rg_zero1 *z);
RG_API int rg_zero1_launched_during_backward(const rg_zero1 *z);

/* Checkpoints: the whole optimizer state, as DDP's optimizer would hold it, so that a zero1
 * checkpoint resumes under zero1 on any number of ranks or under ddp (and a ddp one under
 * zero1). `full` is an optimizer of the same name and options over the same parameters
 * (rg_optim_new), needed on rank 0 only (NULL elsewhere).
 * gather: every rank's shard of each buffer (moments, momentum) into full's state, with its step
 * counters and learning rate (then rg_checkpoint_save(path, model, full, meta) on rank 0);
 * scatter: the inverse, after rank 0's rg_checkpoint_load into full: each rank takes its shard,
 * the step counters and the learning rate. Collective (an allgather, or a broadcast, of the state
 * once per buffer kind). Returns RG_OK or the communicator's failure. */
RG_API RG_NODISCARD rg_status rg_zero1_gather_state(rg_zero1 *z, rg_optim *full);
RG_API RG_NODISCARD rg_status rg_zero1_scatter_state(rg_zero1 *z, rg_optim *full);

/* Restores ordinary gradients (holding the current values), frees the optimizer and the buffers.
 * NULL is a no-op. Not collective. */
RG_API void rg_zero1_free(rg_zero1 *z);

#ifdef __cplusplus
}
#endif

#endif
