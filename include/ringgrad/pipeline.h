/* pipeline.h — pipeline parallelism: a Sequential model cut into S stages, one stage per rank,
 * trained with the GPipe schedule (Huang et al. 2019, "GPipe: Efficient Training of Giant Neural
 * Networks using Pipeline Parallelism").
 *
 *   rg_pipeline *p = rg_pipeline_new(rg_model_root(net), comm, &(rg_pipeline_opts){
 *                                    .micro_batches = 4});
 *   rg_optim *opt = rg_optim_new("sgd", rg_pipeline_params(p), "lr=0.01");   this stage's only
 *   for each batch:
 *       rg_pipeline_step(p, x, y, RG_TRAIN, &r);  M forwards, then M backwards; gradients add up
 *       rg_optim_step(opt); rg_optim_zero_grad(opt);
 *
 * Rank s runs the children [first(s), first(s+1)) of the root Sequential. The batch is cut into M
 * micro-batches; stage s receives each micro-batch's activation from stage s-1, runs its children
 * and sends the result to stage s+1 (the last stage computes the loss instead). When all M
 * forwards are done, the backwards run in reverse order: the last stage backpropagates its loss,
 * every other stage the activation gradient it receives (rg_backward_grad), and each stage sends
 * the gradient of its input back. Each micro-batch's loss is weighted by its share of the batch,
 * so the accumulated gradients are those of the whole batch on one process (tests/dist/
 * mpi_pipeline.c checks it). The price is the bubble: with equal stages each rank idles for a
 * fraction (S-1)/(M+S-1) of the step (docs/LABS.md, lab 5). */
#ifndef RG_PIPELINE_H
#define RG_PIPELINE_H

#include "ringgrad/export.h"

#include <stdint.h>

#include "ringgrad/comm.h"
#include "ringgrad/layer.h"
#include "ringgrad/optim.h"
#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_PIPELINE_MAX_STAGES 8

typedef struct {
    int micro_batches; /* M >= 1 (default 1); a batch of B < M images runs as B micro-batches */
    /* first child of stages 1..S-1; all 0: chosen to balance the parameters of the stages */
    int split[RG_PIPELINE_MAX_STAGES];
} rg_pipeline_opts;

typedef struct rg_pipeline rg_pipeline;

/* What a step's last stage measured, handed to every stage. */
typedef struct {
    float loss;      /* mean cross-entropy over the batch */
    int64_t correct; /* argmax(logits) == label over the batch */
} rg_pipeline_result;

/* Cuts `root` (a Sequential, borrowed: it must outlive the pipeline) into comm's size stages,
 * rank r holding stage r, and broadcasts rank 0's parameters and buffers to every rank (so that
 * --init on rank 0 reaches every stage). Collective. Returns NULL with rg_last_error() set
 * (RG_EINVAL: fewer children than stages, more than RG_PIPELINE_MAX_STAGES stages, a bad split;
 * RG_ENOMEM; the comm's failure). */
RG_API rg_pipeline *rg_pipeline_new(rg_layer *root, rg_comm *comm, const rg_pipeline_opts *opts);

/* This rank's stage, the number of stages, and stage s's first child (s in [0, S]; S gives the
 * number of children). */
RG_API int rg_pipeline_stage(const rg_pipeline *p);
RG_API int rg_pipeline_stages(const rg_pipeline *p);
RG_API int rg_pipeline_first_child(const rg_pipeline *p, int s);

/* "stage 0: conv1..flatten (18816 parameters) | stage 1: fc1..fc2 (1199882 parameters)" into buf
 * (truncated to n bytes). Returns buf. */
RG_API const char *rg_pipeline_describe(const rg_pipeline *p, char *buf, size_t n);

/* This stage's parameters (for its optimizer), in forward order. Borrowed from p. */
RG_API const rg_param_list *rg_pipeline_params(const rg_pipeline *p);

/* One batch through the pipeline. x: (B,...) float32 and y: (B) int64, both on the host and the
 * same on every stage (stage 0 reads x, the last stage y). RG_TRAIN: M forwards then M
 * backwards, adding d loss / d w into this stage's gradients (loss = the batch's mean
 * cross-entropy); RG_EVAL: the forwards only, recording nothing. *out (may be NULL) gets the
 * last stage's loss and count of correct predictions on every stage. Collective over the stages;
 * must be called inside a step scope. Returns RG_OK or the comm's failure (a dead stage). */
RG_API RG_NODISCARD rg_status rg_pipeline_step(rg_pipeline *p, rg_tensor *x, rg_tensor *y,
                                               rg_mode mode, rg_pipeline_result *out);

/* Copies every stage's parameters, buffers (BatchNorm statistics) and dropout stream positions
 * into rank 0's model (rank 0 holds the whole model, the other stages only their own part
 * current), e.g. before rank 0 saves a checkpoint. Collective. */
RG_API RG_NODISCARD rg_status rg_pipeline_gather(rg_pipeline *p);

/* Checkpoints of the optimizer. `opt` is this stage's optimizer (over rg_pipeline_params);
 * `full`, on rank 0 only (NULL elsewhere), an optimizer over the whole model's parameters made
 * with the same name and options, so that what it holds is a 1-process run's state:
 *   gather:  every stage's state (moments, momentum buffers, step counters) into `full`, with
 *            stage 0's step count and learning rate; rank 0 then saves it with the weights
 *            (rg_pipeline_gather + rg_checkpoint_save), and the file resumes under any strategy.
 *   scatter: the reverse, after rank 0 loaded a checkpoint into `full`: each stage's part of the
 *            state to its `opt`, and the step count and learning rate to every stage.
 * Collective. Returns RG_OK or the comm's failure. */
RG_API RG_NODISCARD rg_status rg_pipeline_gather_state(rg_pipeline *p, rg_optim *opt,
                                                       rg_optim *full);
RG_API RG_NODISCARD rg_status rg_pipeline_scatter_state(rg_pipeline *p, rg_optim *opt,
                                                        rg_optim *full);

/* Frees p (not the layers). NULL is a no-op. Not collective. */
RG_API void rg_pipeline_free(rg_pipeline *p);

#ifdef __cplusplus
}
#endif

#endif
