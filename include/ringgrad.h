/* ringgrad.h — the one header users include: the whole public API, layer by layer from the bottom
 * (docs/ARCHITECTURE.md). Everything under include/ is public and installed; nothing else is. */
#ifndef RINGGRAD_H
#define RINGGRAD_H

/* core */
#include "ringgrad/version.h"
#include "ringgrad/status.h"
#include "ringgrad/trace.h"
/* tensor */
#include "ringgrad/tensor.h"
#include "ringgrad/scope.h"
#include "ringgrad/params.h"
#include "ringgrad/device.h"
/* autograd */
#include "ringgrad/autograd.h"
/* ops */
#include "ringgrad/ops.h"
/* layers */
#include "ringgrad/layer.h"
/* optim */
#include "ringgrad/optim.h"
/* data */
#include "ringgrad/idx.h"
#include "ringgrad/image.h"
#include "ringgrad/dataset.h"
#include "ringgrad/sampler.h"
#include "ringgrad/loader.h"
/* dist */
#include "ringgrad/comm.h"
#include "ringgrad/dist.h"
#include "ringgrad/timeline.h"
#include "ringgrad/ddp.h"
#include "ringgrad/zero.h"
#include "ringgrad/pipeline.h"
#include "ringgrad/ps.h"
/* models */
#include "ringgrad/model.h"
#include "ringgrad/safetensors.h"
#include "ringgrad/checkpoint.h"

#endif
