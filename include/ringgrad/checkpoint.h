/* checkpoint.h — saving and resuming training: model weights, optimizer state and metadata in
 * one safetensors file (ringgrad/safetensors.h).
 *
 *   tensors:   the model's state_dict under PyTorch's names ("conv1.weight", ...), loadable by
 *              safetensors.torch.load_file + load_state_dict; the optimizer state under
 *              "optim." ("optim.state.fc1.weight.exp_avg", "optim.step", ...)
 *   metadata:  format "pt", ringgrad.format_version, model, step, epoch, seed, optim, optim.lr,
 *              global_batch and steps_per_epoch (when known),
 *              and rng.<layer>.seed / rng.<layer>.offset for every dropout stream
 *
 * Loading validates the whole file and matches every tensor against the model (and optimizer)
 * before it changes anything: a wrong, truncated or foreign file is an rg_status error naming the
 * file and the tensor. After rg_checkpoint_save at step k and rg_checkpoint_load into a fresh
 * model and optimizer, training continues bit for bit as if it had never stopped. */
#ifndef RG_CHECKPOINT_H
#define RG_CHECKPOINT_H

#include "ringgrad/export.h"

#include <stdint.h>

#include "ringgrad/model.h"
#include "ringgrad/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_CHECKPOINT_FORMAT_VERSION 1

typedef struct {
    /* public: the caller fills it for a save; a load writes it */
    int64_t step;   /* optimizer steps taken */
    int64_t epoch;  /* the caller's epoch counter */
    uint64_t seed;  /* the run's seed */
    char model[64]; /* on load: the model name recorded in the file; ignored on save */
    /* What a resume on another number of ranks must keep (0: not recorded; optional on load): */
    int64_t global_batch;    /* images per optimizer step, all ranks and micro-batches together */
    int64_t steps_per_epoch; /* optimizer steps in one epoch */
} rg_checkpoint_meta;

/* Writes the model's tensors, optim's state (optim may be NULL) and meta (may be NULL: zeros) to
 * `path`, atomically (see rg_safetensors_save). Under MPI only rank 0 should call it. Returns
 * RG_OK or RG_EIO / RG_ENOMEM with rg_last_error() naming the path. */
RG_API RG_NODISCARD
rg_status rg_checkpoint_save(const char *path, const rg_model *model, rg_optim *optim,
                             const rg_checkpoint_meta *meta);

/* Restores a checkpoint written by rg_checkpoint_save into model (weights and dropout streams)
 * and optim (state and learning rate; NULL to skip it), and fills *meta (may be NULL). Nothing
 * is changed unless the whole file checks out. Returns RG_ENOENT (no file), RG_EIO,
 * RG_ECORRUPT (not a valid safetensors file, bad metadata) or RG_EMISMATCH (another model or
 * optimizer, a missing, extra or differently shaped tensor), with rg_last_error() naming the file
 * and the tensor or key. */
RG_API RG_NODISCARD rg_status rg_checkpoint_load(const char *path, rg_model *model, rg_optim *optim,
                             rg_checkpoint_meta *meta);

/* Loads only the model's weights (the trainer's --init FILE): the file may come from PyTorch
 * (no metadata needed) or be a full checkpoint (its optimizer state is ignored; a checkpoint of
 * another model is RG_EMISMATCH). Every model tensor must be present with its shape and no other
 * non-"optim." tensor may be. Errors as rg_checkpoint_load. */
RG_API RG_NODISCARD rg_status rg_checkpoint_load_weights(const char *path, rg_model *model);

#ifdef __cplusplus
}
#endif

#endif
