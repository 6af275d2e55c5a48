/* params.h — a named list of a model's tensors: what optimizers, DDP and checkpoints walk.
 *
 * Names follow PyTorch's state_dict ("conv1.weight", "layer1.0.bn1.running_mean"), so that a
 * checkpoint moves between ringgrad and PyTorch with no renaming. Parameters require gradients;
 * buffers (BatchNorm running statistics) do not, but DDP broadcasts them and checkpoints save
 * them. The list borrows the tensors: the model owns them. */
#ifndef RG_PARAMS_H
#define RG_PARAMS_H

#include "ringgrad/export.h"

#include <stdbool.h>

#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* read-only: owned by the layer or model that registered it */
    const char *name;  /* "fc1.weight"; owned by the model */
    rg_tensor *tensor; /* owned by the model */
    bool is_buffer;    /* true for running statistics and other non-trainable state */
} rg_named_tensor;

typedef struct {
    /* read-only: grown by the layer that owns the list */
    rg_named_tensor *items; /* in registration order (the order of the model's forward) */
    int n;
} rg_param_list;

/* The entry named `name`, or NULL. Borrowed from the list. */
RG_API const rg_named_tensor *rg_param_list_find(const rg_param_list *list, const char *name);

/* Total number of elements of the parameters (buffers not counted). */
RG_API int64_t rg_param_list_numel(const rg_param_list *list);

/* Moves every tensor of the list to dev in place: each rg_tensor keeps its address (so the
 * list, the layers and any hook registrations stay valid) and gets new storage on dev holding
 * the same values. Existing gradients are dropped (call it before training and before DDP).
 * Returns RG_OK, or RG_ENOMEM with nothing moved past the failing tensor. */
RG_API RG_NODISCARD rg_status rg_param_list_to_device(const rg_param_list *list, rg_device dev);

#ifdef __cplusplus
}
#endif

#endif
