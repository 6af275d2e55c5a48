/* scope_impl.h — the step scope as the library's internals see it: the arena that tensor headers
 * and tape nodes come from, the list of tensors rg_scope_end frees, and the scope's serial number
 * (autograd keeps one tape per open scope and knows a new scope by its serial). */
#ifndef RG_SCOPE_IMPL_H
#define RG_SCOPE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/scope.h"
#include "ringgrad/tensor.h"

/* Zeroed memory from the current scope's arena, 16-byte aligned, freed by rg_scope_end. */
void *rg_scope_alloc(size_t bytes);
/* Registers t to be freed by rg_scope_end of the current scope. */
void rg_scope_adopt(rg_tensor *t);
/* Whether p was handed out by rg_scope_alloc of the current (innermost) scope: true for the
 * headers of the tensors this scope made, false for an outer scope's. */
bool rg_scope_owns(const void *p);
/* A number that names the innermost open scope of this thread, unique over the thread's life
 * (a scope begun at the same depth after another ended gets a new one); 0 when none is open. */
uint64_t rg_scope_serial(void);

#endif
