/* alloc.h — host allocation for code that has no status to return (ops, kernels, layer
 * constructors): the tier-2 half of the out-of-memory policy written in ringgrad/status.h.
 *
 *   float *scratch = rg_xmalloc(n * sizeof *scratch, "conv2d: bwd-filter partials");
 *
 * Each never returns NULL: on failure it stops the process through rg_fatal with
 * "out of host memory: <n> bytes for <what> (file:line)". Code that can return a status uses
 * plain malloc and reports RG_ENOMEM instead. */
#ifndef RG_CORE_ALLOC_H
#define RG_CORE_ALLOC_H

#include <stddef.h>

void *rg_xmalloc_at(size_t n, const char *what, const char *file, int line);
void *rg_xcalloc_at(size_t count, size_t size, const char *what, const char *file, int line);
void *rg_xrealloc_at(void *p, size_t n, const char *what, const char *file, int line);
char *rg_xstrdup_at(const char *s, const char *what, const char *file, int line);

#define rg_xmalloc(n, what) rg_xmalloc_at((n), (what), __FILE__, __LINE__)
#define rg_xcalloc(count, size, what) rg_xcalloc_at((count), (size), (what), __FILE__, __LINE__)
#define rg_xrealloc(p, n, what) rg_xrealloc_at((p), (n), (what), __FILE__, __LINE__)
#define rg_xstrdup(s, what) rg_xstrdup_at((s), (what), __FILE__, __LINE__)

#endif
