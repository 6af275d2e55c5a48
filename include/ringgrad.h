/* ringgrad.h — the one header users include. */
#ifndef RINGGRAD_H
#define RINGGRAD_H

#include "tensor/status.h"
#include "tensor/tensor.h"
#include "tensor/scope.h"
#include "tensor/ops.h"
#include "tensor/backend.h"
#include "tensor/cuda_api.h"
#include "autograd/autograd.h"
#include "data/idx.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/loader.h"
#include "layers/params.h"
#include "layers/layer.h"
#include "optim/optim.h"
#include "dist/comm.h"
#include "dist/dist.h"
#include "dist/timeline.h"
#include "dist/ddp.h"
#include "models/model.h"
#include "models/safetensors.h"
#include "models/checkpoint.h"

#endif
