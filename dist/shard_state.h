/* shard_state.h — internal: the optimizer state of a flattened, sharded parameter vector, shared
 * by ZeRO-1 (zero1.c) and the parameter servers (ps.c). There a rank's optimizer runs over 1-D
 * views of the pieces of the parameters in its shard, named after their parameters, so its
 * state tensors are "optim.state.<param>.<kind>" over pieces; a checkpoint holds the state of
 * an optimizer over the whole parameters, which these helpers fill and read kind by kind. */
#ifndef RG_DIST_SHARD_STATE_H
#define RG_DIST_SHARD_STATE_H

#include <stdint.h>

#include "ringgrad/optim.h"

#define RG_SHARD_MAX_KINDS 4

/* The per-element float32 buffers (Adam's "exp_avg", "exp_avg_sq"; SGD's "momentum_buffer") that
 * optimizer `optim` with `options` keeps, in its order, from a throw-away one over one element
 * (every rank gets the same, whatever its pieces). RG_EINVAL (its message) when it cannot be made.
 */
RG_NODISCARD rg_status rg_shard_kinds(const char *optim, const char *options,
                                      char kinds[RG_SHARD_MAX_KINDS][32], int *n);
/* o's state "optim.state.<param>.<kind>"; fatal when missing (o was not made alike). */
rg_tensor *rg_shard_state_of(rg_optim *o, const char *param, const char *kind);
/* An optimizer's position, its step count and learning rate, as two int64 that travel in one
 * message (the rate's bits in the second); and back into an optimizer: every step counter
 * ("optim.step" and each parameter's) and the rate. */
void rg_shard_position(rg_optim *o, int64_t v[2]);
void rg_shard_set_position(rg_optim *o, const int64_t v[2]);

#endif
