/* alloc.c — the CPU caching allocator.
 *
 * A training step allocates the same buffers every step. malloc would hand large blocks back to
 * the kernel (munmap) and fault them in again next step, costing a page fault per 4 KiB touched.
 * Instead, freed blocks are kept on per-size-class free lists and reused. Size classes are four
 * steps per power of two (at most 25% slack). RG_ALLOC_CACHE=0 disables caching (for valgrind,
 * which then sees every allocation).
 *
 * Under AddressSanitizer the cache tells ASan what is in use: a block's bytes past the size asked
 * for (the class's slack) are poisoned, and so is a block while it waits in the cache (all but its
 * first 8 bytes, the free list's link), so an overrun into the slack or a use after rg_cpu_free is
 * reported as ASan reports one on malloc's blocks. The suite's sanitizer run keeps the cache on:
 * with it off, every tensor was a fresh malloc, and on a VM where a page fault costs 11 us the
 * sanitizer run spent 1.3-1.7x as long (tests/tensor/test_conv2d, tests/layers/test_layers;
 * docs/PERFORMANCE.md, 2026-11-29).
 *
 * Running out of memory. Linux overcommits: malloc of more than the machine has succeeds, and the
 * kernel's OOM killer later ends the process with SIGKILL and no word of why (a --batch-size of
 * 60,000 on a 24 GB host did that after a minute). So a block of BIG_BLOCK bytes or more that
 * must come from the system is first checked against what the host can still give (MemAvailable +
 * SwapFree in /proc/meminfo, or less where the process's memory cgroup, a container's limit,
 * allows less; read then: tens of microseconds, on calls that are rare once the cache is warm). If
 * it does not fit, the cached blocks go back to the system and the check is made again (as
 * PyTorch's CUDA allocator frees its cache and retries); then the allocation fails, and the
 * caller's "out of memory" error says how much was asked and how much ringgrad's tensors hold.
 * RG_CPU_MEM_LIMIT=BYTES[K|M|G] caps what the tensors may hold in all (in use + cached), for tests
 * and for sharing a host. */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/env.h"
#include "core/sanitize.h"
#include "tensor/cpu/cpu.h"

#if RG_ASAN /* core/sanitize.h, which includes <sanitizer/asan_interface.h> */
/* [p, p + size) off limits, then [p, p + bytes) usable again */
#define ASAN_HAND_OUT(p, bytes, size)                                                              \
    (ASAN_POISON_MEMORY_REGION((p), (size)), ASAN_UNPOISON_MEMORY_REGION((p), (bytes)))
/* all but the link to the next cached block: LeakSanitizer does not follow pointers kept in
 * poisoned memory, and would report every cached block after the first of its class as leaked */
#define ASAN_TAKE_BACK(p, size)                                                                    \
    ASAN_POISON_MEMORY_REGION((char *)(p) + sizeof(block), (size) - sizeof(block))
/* the link's bytes, which a block asked for with fewer bytes hands out poisoned */
#define ASAN_OPEN_LINK(p) ASAN_UNPOISON_MEMORY_REGION((p), sizeof(block))
#else
#define ASAN_HAND_OUT(p, bytes, size) ((void)(p), (void)(bytes), (void)(size))
#define ASAN_TAKE_BACK(p, size) ((void)(p), (void)(size))
#define ASAN_OPEN_LINK(p) ((void)(p))
#endif

#define NUM_CLASSES 128
#define ALIGN 64
#define BIG_BLOCK ((size_t)64 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* RG_HUGEPAGES=1: blocks of HUGE_PAGE bytes or more start on a 2 MiB boundary and ask for
 * transparent huge pages (MADV_HUGEPAGE; THP's "madvise" mode, Debian's default, gives them only
 * to regions that ask; PyTorch 2's THP_MEM_ALLOC_ENABLE does the same). The first touch of such a
 * block then faults in 2 MiB at once instead of 4 KiB at a time: on the VM of 2026-11-29, where a
 * fault costs 11 us, ResNet-50's first two steps at 224 px, batch 32, 2 threads, took 3.5-3.6 s
 * a step instead of 10.5-14.4 s, and a one-step run of the CNN on the test suite's data 0.12 s
 * instead of 0.41 s. It is off by default because the later steps, which fault no more (the
 * cache reuses its blocks), ran slower on huge pages: ResNet-50 at 64 px, one thread, a median 7%
 * over ten alternated rounds (486-504 ms against 452-473 ms in the last three). The 2 MiB
 * alignment alone changed nothing, so it is the pages; probably the cache sets: a huge page is
 * 2 MiB of contiguous physical memory, so strides of a power of two meet in the same sets, which
 * 4 KiB pages scatter. */
static int hugepages_enabled = -1;

static bool want_hugepages(void) {
    if (hugepages_enabled < 0) {
        hugepages_enabled = rg_env_switch("RG_HUGEPAGES", false);
    }
    return hugepages_enabled;
}

/* A new block of `size` bytes from the system (lock held). */
static void *system_block(size_t size) {
    if (size < HUGE_PAGE || !want_hugepages()) return aligned_alloc(ALIGN, size);
    void *p; /* (aligned_alloc wants size to be a multiple of the alignment; a class's is not) */
    if (posix_memalign(&p, HUGE_PAGE, size) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where THP is "never" or the kernel lacks it, the block keeps 4 KiB pages */
    (void)madvise(p, size & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}

typedef struct block {
    struct block *next;
} block;

static struct {
    pthread_mutex_t lock;
    block *free[NUM_CLASSES];
    rg_mem_stats stats;
    int enabled;    /* -1 unknown, 0 off, 1 on */
    int limit_read; /* RG_CPU_MEM_LIMIT parsed */
    size_t limit;   /* cap on in_use + cached; SIZE_MAX for none */
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
        cache.enabled = rg_env_switch("RG_ALLOC_CACHE", true);
    }
    return cache.enabled;
}

rg_status rg_env_cpu_mem_limit(size_t *bytes) {
    *bytes = SIZE_MAX;
    const char *e = getenv("RG_CPU_MEM_LIMIT");
    if (!e || !*e) return RG_OK; /* unset or empty: no cap */
    char *end;
    double v = strtod(e, &end);
    int shift = 0;
    const char *units = "KMG", *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (u) shift = 10 * (int)(u - units + 1), end++;
    if (end == e || *end || !(v >= 1) || v * (double)((size_t)1 << shift) >= 0x1p62)
        return rg_error(RG_EINVAL,
                        "RG_CPU_MEM_LIMIT='%.40s': expected a size in bytes with an "
                        "optional K, M or G (\"16G\"; unset it for what the host can give)",
                        e);
    *bytes = (size_t)(v * (double)((size_t)1 << shift));
    return RG_OK;
}

static size_t limit_from_env(void) {
    size_t limit;
    if (rg_env_cpu_mem_limit(&limit) != RG_OK)
        fprintf(stderr, "ringgrad: warning: %s; ignored\n", rg_last_error());
    return limit;
}

/* ---- what a memory cgroup allows (containers) ---- */

/* The number after `key` (followed by a space) in the lines of file, or after nothing when key
 * is "" (a one-number file); "max" reads as UINT64_MAX. false when the file or key is missing. */
static bool read_number(const char *file, const char *key, uint64_t *out) {
    FILE *f = fopen(file, "r");
    if (!f) return false;
    char line[256];
    size_t kl = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (kl && (strncmp(line, key, kl) != 0 || line[kl] != ' ')) continue;
        const char *v = line + (kl ? kl + 1 : 0);
        if (strncmp(v, "max", 3) == 0)
            *out = UINT64_MAX, found = true;
        else
            found = sscanf(v, "%" SCNu64, out) == 1;
    }
    fclose(f);
    return found;
}

/* limit - usage + cache, at least 0; SIZE_MAX when the limit is none (v1 writes 2^63 - 4096). */
static size_t cgroup_room(uint64_t limit, uint64_t usage, uint64_t cache) {
    if (limit >= (UINT64_C(1) << 62)) return SIZE_MAX;
    uint64_t have = limit + cache;
    return have > usage ? (size_t)(have - usage) : 0;
}

/* read_number on the file `name` in folder dir. */
static bool read_in(const char *dir, const char *name, const char *key, uint64_t *out) {
    char file[1100];
    snprintf(file, sizeof file, "%s/%s", dir, name);
    return read_number(file, key, out);
}

/* The folder of the cgroup at path under root + mount, into dir; where that folder lacks the
 * file `probe`, the mount itself (in a cgroup namespace, a container's own cgroup is the root it
 * sees). Returns the length of root + mount, above which dir's parents are still cgroups. */
static size_t cgroup_dir(char *dir, size_t cap, const char *root, const char *mount,
                         const char *path, const char *probe) {
    char file[1100];
    snprintf(dir, cap, "%s%s%s", root, mount, strcmp(path, "/") == 0 ? "" : path);
    snprintf(file, sizeof file, "%s/%s", dir, probe);
    if (access(file, R_OK) != 0) snprintf(dir, cap, "%s%s", root, mount);
    return strlen(root) + strlen(mount);
}

/* cgroup v2: the process's cgroup and each of its ancestors, the tightest room. */
static size_t cgroup2_available(const char *root, const char *path) {
    char dir[1024];
    size_t base = cgroup_dir(dir, sizeof dir, root, "/sys/fs/cgroup", path, "memory.current");
    size_t room = SIZE_MAX;
    for (;;) {
        uint64_t limit, usage, cache = 0;
        if (read_in(dir, "memory.max", "", &limit) && read_in(dir, "memory.current", "", &usage)) {
            if (!read_in(dir, "memory.stat", "file", &cache)) cache = 0;
            size_t r = cgroup_room(limit, usage, cache);
            if (r < room) room = r;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < base) break;
        *slash = '\0'; /* the parent */
    }
    return room;
}

/* cgroup v1: memory.stat's hierarchical_memory_limit already takes the ancestors into account. */
static size_t cgroup1_available(const char *root, const char *path) {
    char dir[1024];
    cgroup_dir(dir, sizeof dir, root, "/sys/fs/cgroup/memory", path, "memory.stat");
    uint64_t limit, usage, cache = 0;
    if (!read_in(dir, "memory.stat", "hierarchical_memory_limit", &limit) ||
        !read_in(dir, "memory.usage_in_bytes", "", &usage))
        return SIZE_MAX;
    if (!read_in(dir, "memory.stat", "total_cache", &cache)) cache = 0;
    return cgroup_room(limit, usage, cache);
}

size_t rg_cpu_cgroup_available(const char *root) {
    char file[1100], line[1200];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    FILE *f = fopen(file, "r");
    if (!f) return SIZE_MAX;
    size_t room = SIZE_MAX;
    while (fgets(line, sizeof line, f)) { /* "ID:CONTROLLERS:PATH" */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *path = c2 + 1;
        size_t r = SIZE_MAX;
        if (!*controllers && strncmp(line, "0:", 2) == 0) {
            r = cgroup2_available(root, path);
        } else { /* v1: "memory" among the comma-separated controllers */
            for (const char *m = strstr(controllers, "memory"); m; m = strstr(m + 1, "memory"))
                if ((m == controllers || m[-1] == ',') && (m[6] == '\0' || m[6] == ','))
                    r = cgroup1_available(root, path);
        }
        if (r < room) room = r;
    }
    fclose(f);
    return room;
}

/* What the host can still give, in bytes (MemAvailable + SwapFree, or less where a memory cgroup
 * says so); SIZE_MAX where unknown. */
static size_t host_available(void) {
    size_t cg = rg_cpu_cgroup_available("");
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return cg;
    char line[128];
    unsigned long long kb, avail = 0, swap = 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb, found |= 1;
        else if (sscanf(line, "SwapFree: %llu kB", &kb) == 1)
            swap = kb, found |= 2;
    }
    fclose(f);
    size_t host = found & 1 ? (size_t)(avail + swap) * 1024 : SIZE_MAX;
    return cg < host ? cg : host;
}

/* Whether a new system block of `size` bytes fits (lock held). */
static bool fits(size_t size) {
    if (!cache.limit_read) cache.limit = limit_from_env(), cache.limit_read = 1;
    size_t held = cache.stats.in_use + cache.stats.cached;
    if (cache.limit != SIZE_MAX && (size > cache.limit || held > cache.limit - size)) return false;
    return size < BIG_BLOCK || size <= host_available();
}

/* Returns the cached blocks to the system (lock held). */
static void release_cached_locked(void) {
    for (int c = 0; c < NUM_CLASSES; c++) {
        for (block *b = cache.free[c], *next; b; b = next) {
            next = b->next;
            free(b);
        }
        cache.free[c] = NULL;
    }
    cache.stats.cached = 0;
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
        bool ok = fits(size);
        if (!ok && cache.stats.cached) release_cached_locked(), ok = fits(size);
        p = ok ? system_block(size) : NULL;
        if (p) cache.stats.sys_allocs++;
    }
    if (p) {
        ASAN_HAND_OUT(p, bytes, size);
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
        ASAN_OPEN_LINK(b);
        b->next = cache.free[c];
        ASAN_TAKE_BACK(b, size);
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
    release_cached_locked();
    pthread_mutex_unlock(&cache.lock);
}
