/* ddp.h — the DDP reducer: data-parallel training with gradient buckets that are reduced while
 * backward is still running (PyTorch DDP's Reducer, Horovod's tensor fusion).
 *
 *   rg_ddp *ddp = rg_ddp_new(rg_model_params(net), comm, &(rg_ddp_opts){.bucket_mb = 25});
 *   for each step:
 *       rg_backward(loss);      gradient-ready hooks fill buckets; full buckets start reducing
 *       rg_ddp_wait(ddp);       every bucket reduced and averaged over the ranks (or summed,
 *                               with .defer_average: then the optimizer applies the 1/N)
 *       rg_optim_step(opt);
 *
 * Wrapping a model broadcasts rank 0's parameters and buffers, so every replica starts equal, and
 * checks through an allgathered fingerprint that every rank built the same model (names, dtypes,
 * shapes, which tensors train) with the same options: a mismatch is an error on every rank,
 * naming the first tensor or setting that differs, instead of a hang or silently wrong sums. */
#ifndef RG_DDP_H
#define RG_DDP_H

#include "ringgrad/export.h"

#include <stdbool.h>

#include "ringgrad/comm.h"
#include "ringgrad/ops.h"
#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* public: options; a zero field takes its default */
    double bucket_mb;       /* bucket capacity in MiB (default 25, as PyTorch) */
    double first_bucket_mb; /* the first bucket (the last layers) is small so that communication
                               starts early (default 1) */
    int accum_steps;        /* reduce only on every accum_steps-th backward (default 1) */
    bool compress_fp16;     /* send gradients as float16 (half the bytes, ~3 significant digits) */
    bool no_overlap;        /* the baseline without overlap: every gradient in one flat bucket,
                               reduced by one allreduce after backward (for benchmarks) */
    bool no_allreduce;      /* the compute-only baseline: no gradient is sent; rg_ddp_wait is a
                               barrier, so the ranks keep in step as they otherwise would, while
                               each keeps its own gradients and the replicas drift apart (for
                               benchmarks: bench/overlap.sh) */
    bool defer_average;     /* sum the buckets, leave the 1/N to the reader of the gradients:
                               rg_optim_set_grad_scale(opt, rg_ddp_grad_scale(ddp)) folds it into
                               the optimizer's kernel, which saves a pass over every gradient
                               (fused optimizers do the same). Ignored with compress_fp16, whose
                               float16 sums are averaged on the wire to stay in range. */
    bool compress_powersgd; /* PowerSGD (Vogels et al. 2019) with error feedback, as PyTorch's comm
                               hook, for the large matrices (where (n+m)r <= nm/2, e.g. fc1.weight):
                               each is sent as two rank-r factors after backward; the rest goes
                               through the buckets exactly. Host (CPU) gradients only. */
    int powersgd_rank;      /* r, default 4 */
} rg_ddp_opts;

typedef struct rg_ddp rg_ddp;

/* Wraps the tensors in `params` (borrowed: they must outlive the reducer): checks the model
 * and the options match on every rank, broadcasts parameters and buffers from rank 0, builds the
 * buckets and makes each parameter's gradient a view into its bucket. Collective. Returns NULL
 * on failure, on every rank alike (a model or option mismatch: RG_EMISMATCH; a rank out of
 * memory: RG_ENOMEM there, RG_EPEER elsewhere; a peer failure: RG_EPEER), that status in
 * rg_last_status(), its message in rg_last_error(), and the gradients as they were. opts may be NULL for the defaults. */
RG_API rg_ddp *rg_ddp_new(const rg_param_list *params, rg_comm *comm, const rg_ddp_opts *opts);

/* Finishes the step's reduction: launches the buckets not yet launched (parameters unused in
 * this backward contribute zeros), waits for all of them and averages. Collective. On a step
 * that only accumulates (accum_steps > 1) it returns at once. Returns RG_OK or the
 * communicator's failure.
 * Call it after each rg_backward, and run each model's backward in a step scope of its own: a
 * backward fires the hooks of every parameter its scope used, so a gradient made final twice
 * before the wait stops the program (RG_CHECK) rather than send its bucket twice. */
RG_API RG_NODISCARD rg_status rg_ddp_wait(rg_ddp *ddp);

/* The factor the gradients still need after rg_ddp_wait to be the average: 1/N with
 * defer_average (they hold the sum over the N ranks), else 1. */
RG_API float rg_ddp_grad_scale(const rg_ddp *ddp);

/* Floats handed to allreduces by the last reducing step (buckets, and PowerSGD's P and Q), times
 * their size on the wire (4 bytes; 2 with fp16): the payload each rank contributes per step. A
 * ring moves 2(N-1)/N times this over each link. */
RG_API int64_t rg_ddp_bytes_per_step(const rg_ddp *ddp);
/* Number of matrices PowerSGD compresses (0 without compress_powersgd). */
RG_API int rg_ddp_num_compressed(const rg_ddp *ddp);

/* True when the coming backward is the one that reduces (always, with accum_steps 1). */
RG_API bool rg_ddp_will_sync(const rg_ddp *ddp);

/* Number of buckets, and bucket i's parameter count and size in bytes (for tests and tools). */
RG_API int rg_ddp_num_buckets(const rg_ddp *ddp);
RG_API int rg_ddp_bucket_params(const rg_ddp *ddp, int i);
RG_API size_t rg_ddp_bucket_bytes(const rg_ddp *ddp, int i);
/* How many buckets had been launched when backward finished in the last step, i.e. reduced while
 * backward was still running (the overlap). */
RG_API int rg_ddp_launched_during_backward(const rg_ddp *ddp);
/* Buckets launched so far in the running step (read it from a hook to watch the overlap). */
RG_API int rg_ddp_num_launched(const rg_ddp *ddp);

/* PyTorch DDP's broadcast_buffers: rank 0's buffers (BatchNorm running statistics,
 * num_batches_tracked) copied to every rank, so that all ranks evaluate and save the same model.
 * Collective; call it before each training forward. Sends nothing in a world of one or for a
 * model without buffers. Returns RG_OK or the communicator's failure. */
RG_API RG_NODISCARD rg_status rg_ddp_broadcast_buffers(rg_ddp *ddp);

/* The SyncBatchNorm hook over comm (borrowed; it must outlive the layers using the hook): an
 * in-place float32 sum allreduce, for rg_batchnorm2d_set_sync. Every rank must run the same
 * BatchNorm layers in the same order, as with any collective. */
RG_API rg_bn_sync rg_ddp_sync_bn_hook(rg_comm *comm);

/* Restores ordinary gradient buffers (holding the current values) and frees the reducer.
 * Buckets launched but not waited for are waited for first, as the comm thread may still write
 * into them. NULL is a no-op. Not collective. */
RG_API void rg_ddp_free(rg_ddp *ddp);

#ifdef __cplusplus
}
#endif

#endif
