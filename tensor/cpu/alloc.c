/* alloc.c — the CPU caching allocator.
 *
 * A training step allocates the same buffers every step. malloc would hand large blocks back to
 * the kernel (munmap) and fault them in again next step, costing a page fault per 4 KiB touched.
 * Instead, freed blocks are kept on per-size-class free lists and reused. Size classes are four
 * steps per power of two (at most 25% slack). RG_ALLOC_CACHE=0 disables caching (for valgrind
 * and ASan, which then see every allocation). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/cpu/cpu.h"

#define NUM_CLASSES 128
#define ALIGN 64

typedef struct block {
    struct block *next;
} block;

static struct {
    pthread_mutex_t lock;
    block *free[NUM_CLASSES];
    rg_mem_stats stats;
    int enabled; /* -1 unknown, 0 off, 1 on */
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .enabled = -1};

/* Class c holds blocks of class_size(c) bytes: 64, 128, 256, then 512, 640, 768, 896, 1024, ...
 * (four steps per power of two) up to 2^40. */
static size_t class_size(int c) {
    if (c < 3) return (size_t)ALIGN << c;
    size_t base = (size_t)512 << ((c - 3) / 4);
    return base + base / 4 * (size_t)((c - 3) % 4);
}

static int size_class(size_t bytes) {
    int c = 0;
    while (c < NUM_CLASSES - 1 && class_size(c) < bytes) c++;
    return c;
}

static bool cache_enabled(void) {
    if (cache.enabled < 0) {
        const char *e = getenv("RG_ALLOC_CACHE");
        cache.enabled = !(e && strcmp(e, "0") == 0);
    }
    return cache.enabled;
}

void *rg_cpu_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > class_size(NUM_CLASSES - 1)) return NULL; /* larger than any class: out of memory */
    int c = size_class(bytes);
    size_t size = class_size(c);
    pthread_mutex_lock(&cache.lock);
    void *p = NULL;
    if (cache_enabled() && cache.free[c]) {
        block *b = cache.free[c];
        cache.free[c] = b->next;
        cache.stats.cached -= size;
        cache.stats.reuses++;
        p = b;
    }
    if (!p) {
        p = aligned_alloc(ALIGN, size);
        if (p) cache.stats.sys_allocs++;
    }
    if (p) {
        cache.stats.in_use += size;
        if (cache.stats.in_use > cache.stats.peak_in_use) cache.stats.peak_in_use = cache.stats.in_use;
    }
    pthread_mutex_unlock(&cache.lock);
    return p;
}

void rg_cpu_free(void *p, size_t bytes) {
    if (!p) return;
    if (bytes == 0) bytes = 1;
    int c = size_class(bytes);
    size_t size = class_size(c);
    pthread_mutex_lock(&cache.lock);
    cache.stats.in_use -= size;
    if (cache_enabled()) {
        block *b = p;
        b->next = cache.free[c];
        cache.free[c] = b;
        cache.stats.cached += size;
        p = NULL;
    }
    pthread_mutex_unlock(&cache.lock);
    free(p);
}

rg_mem_stats rg_cpu_mem_stats(void) {
    pthread_mutex_lock(&cache.lock);
    rg_mem_stats s = cache.stats;
    pthread_mutex_unlock(&cache.lock);
    return s;
}

void rg_cpu_mem_release_cached(void) {
    pthread_mutex_lock(&cache.lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        for (block *b = cache.free[c], *next; b; b = next) {
            next = b->next;
            free(b);
        }
        cache.free[c] = NULL;
    }
    cache.stats.cached = 0;
    pthread_mutex_unlock(&cache.lock);
}
