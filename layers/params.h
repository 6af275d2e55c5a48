/* params.h — a named list of a model's tensors: what optimizers, DDP and checkpoints walk.
 *
 * Names follow PyTorch's state_dict ("conv1.weight", "layer1.0.bn1.running_mean"), so that a
 * checkpoint moves between ringgrad and PyTorch with no renaming. Parameters require gradients;
 * buffers (BatchNorm running statistics) do not, but DDP broadcasts them and checkpoints save
 * them. The list borrows the tensors: the model owns them. */
#ifndef RG_PARAMS_H
#define RG_PARAMS_H

#include <stdbool.h>

#include "tensor/tensor.h"

typedef struct {
    const char *name;  /* "fc1.weight"; owned by the model */
    rg_tensor *tensor; /* owned by the model */
    bool is_buffer;    /* true for running statistics and other non-trainable state */
} rg_named_tensor;

typedef struct {
    rg_named_tensor *items; /* in registration order (the order of the model's forward) */
    int n;
} rg_param_list;

#endif
