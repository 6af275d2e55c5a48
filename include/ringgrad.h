/* ringgrad.h — the one header users include. */
#ifndef RINGGRAD_H
#define RINGGRAD_H

#include "tensor/status.h"
#include "tensor/tensor.h"
#include "tensor/scope.h"
#include "tensor/ops.h"
#include "tensor/backend.h"
#include "autograd/autograd.h"
#include "dist/comm.h"
#include "dist/dist.h"
#include "dist/timeline.h"

#endif
