/* alloc.c — allocations that stop the process when the host is out of memory (see alloc.h). */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/status.h"

static void *checked(void *p, size_t n, const char *what, const char *file, int line) {
    if (__builtin_expect(p == NULL, 0))
        rg_fatal_oom(file, line, "out of host memory: %zu bytes for %s", n, what ? what : "?");
    return p;
}

void *rg_xmalloc_at(size_t n, const char *what, const char *file, int line) {
    return checked(malloc(n ? n : 1), n, what, file, line);
}

void *rg_xcalloc_at(size_t count, size_t size, const char *what, const char *file, int line) {
    if (size && count > SIZE_MAX / size)
        rg_fatal_oom(file, line, "out of host memory: %zu x %zu bytes for %s overflow", count, size,
                     what ? what : "?");
    return checked(calloc(count ? count : 1, size ? size : 1), count * size, what, file, line);
}

void *rg_xrealloc_at(void *p, size_t n, const char *what, const char *file, int line) {
    return checked(realloc(p, n ? n : 1), n, what, file, line);
}

char *rg_xstrdup_at(const char *s, const char *what, const char *file, int line) {
    size_t n = strlen(s) + 1;
    return memcpy(rg_xmalloc_at(n, what, file, line), s, n);
}
