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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/tensor.h"

#define RG_SCOPE_MAX_DEPTH 8

void rg_scope_begin(void);
/* Frees every tensor and tape node made since the matching rg_scope_begin(). */
void rg_scope_end(void);
/* 0 when no scope is open on this thread. */
int rg_scope_depth(void);

/* ---- for the tensor and autograd internals ---- */

/* Zeroed memory from the current scope's arena, 16-byte aligned, freed by rg_scope_end. */
void *rg_scope_alloc(size_t bytes);
/* Registers t to be freed by rg_scope_end of the current scope. */
void rg_scope_adopt(rg_tensor *t);
/* Whether p was handed out by rg_scope_alloc of the current (innermost) scope: true for the
 * headers of the tensors this scope made, false for an outer scope's. */
bool rg_scope_owns(const void *p);
/* The tape: nodes in creation order (a topological order). */
struct rg_node;
int64_t rg_scope_push_node(struct rg_node *n); /* returns the node's index on the tape */
int64_t rg_scope_num_nodes(void);
struct rg_node **rg_scope_nodes(void);

#endif
