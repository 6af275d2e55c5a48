/* scope.h — the step scope: one call frees everything a training step made.
 *
 *   rg_scope_begin();
 *   ... forward, loss, backward: every op result and every tape node lands in this scope ...
 *   rg_scope_end();            frees them all; memory returns to the caching allocator
 *
 * Scopes nest (an evaluation pass inside a step, say) and belong to the calling thread. Memory
 * stays flat across steps: a scope keeps its arena and node array for the next step, and tensor
 * data goes back to the backend's caching allocator, not to the system. */
#ifndef RG_SCOPE_H
#define RG_SCOPE_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_SCOPE_MAX_DEPTH 8

RG_API void rg_scope_begin(void);
/* Frees every tensor and tape node made since the matching rg_scope_begin(). */
RG_API void rg_scope_end(void);
/* 0 when no scope is open on this thread. */
RG_API int rg_scope_depth(void);

#ifdef __cplusplus
}
#endif

#endif
