/* block_cache.h — the bookkeeping of a stream-ordered caching allocator, with the device left out.
 *
 * What it teaches: a GPU caching allocator (PyTorch's CUDACachingAllocator, in small) is mostly
 * plain bookkeeping — size classes, free lists, a pointer map and counters. The only device calls
 * it needs are the eight callbacks in rg_block_cache_ops, so the CUDA backend
 * (tensor/cuda/alloc.cu) plugs cudaMalloc and cudaEvent* in, while the CPU tests
 * (tests/cuda/test_block_cache.c) plug in fakes and check every rule below without a GPU.
 *
 * The rules, with a stream being an in-order queue of device work (a small integer id here):
 *   - A block belongs to the stream it was handed out on (its owner). Freed, it goes back on its
 *     owner's free list and can be handed out again AT ONCE to work on the same stream: whatever
 *     later work uses it is queued after every earlier use, so no host synchronisation is needed.
 *   - A block that another stream also used (rg_block_cache_use, PyTorch's record_stream) waits:
 *     when it is freed, an event is recorded on each such stream, and the block is reused only
 *     once those events have completed (polled, never waited on, in the hot path).
 *   - When its own free list is empty, a stream may take a block from another stream's free list,
 *     but only behind an event: the event is recorded on the old owner and the new owner waits on
 *     it on the device (no host synchronisation).
 *   - With caching off (RG_CUDA_ALLOC_CACHE=0), every alloc and free goes to the system; a block
 *     used by other streams is freed only after its owner stream waits for them.
 *   - Out of memory: wait for pending blocks, return all cached blocks to the system, try once
 *     more, then report NULL.
 * Size classes are four steps per power of two from 512 bytes (at most 25% slack), so a training
 * step that allocates the same sizes every step reaches a steady state with no system calls.
 * Blocks are never split or merged (PyTorch splits large segments to waste less): simpler, at the
 * price of that slack and of blocks of one class not serving another.
 *
 * Thread safety: every function takes the cache's mutex; the callbacks run under it. */
#ifndef RG_BLOCK_CACHE_H
#define RG_BLOCK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor/backend_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_BLOCK_CACHE_MAX_STREAMS 4
#define RG_BLOCK_CACHE_MIN_BYTES ((size_t)512)
#define RG_BLOCK_CACHE_MAX_BYTES ((size_t)1 << 40) /* larger requests fail (NULL) */

/* The device side. `user` is the pointer given to rg_block_cache_new; `stream` is an id in
 * [0, RG_BLOCK_CACHE_MAX_STREAMS). Events are opaque pointers made by event_new. */
typedef struct rg_block_cache_ops {
    /* bytes of fresh memory for work on `stream`; NULL when out of memory */
    void *(*sys_alloc)(void *user, size_t bytes, int stream);
    /* gives p back; `stream` is its owner (stream-ordered frees may use it) */
    void (*sys_free)(void *user, void *p, int stream);
    void *(*event_new)(void *user);
    void (*event_free)(void *user, void *event);
    /* the event completes when all work queued on `stream` so far has completed */
    void (*event_record)(void *user, void *event, int stream);
    bool (*event_done)(void *user, void *event); /* non-blocking query */
    void (*event_sync)(void *user, void *event); /* blocks the host until the event completes */
    /* work queued on `stream` from now on waits for the event, on the device */
    void (*stream_wait)(void *user, int stream, void *event);
} rg_block_cache_ops;

typedef struct rg_block_cache rg_block_cache;

/* A new, empty cache. `ops` must outlive it; `caching` false sends every alloc and free to the
 * system (for memory checkers). NULL when out of host memory. */
rg_block_cache *rg_block_cache_new(const rg_block_cache_ops *ops, void *user, bool caching);
/* Returns every cached block and event to the system and frees the cache. Blocks still handed
 * out are not touched (they stay valid device memory but can no longer be freed here). NULL is a
 * no-op. */
void rg_block_cache_free(rg_block_cache *bc);

/* A block of at least `bytes` (0 counts as 1) for work on `stream`, or NULL when out of memory. */
void *rg_block_cache_get(rg_block_cache *bc, size_t bytes, int stream);
/* Gives back a block from rg_block_cache_get (NULL is a no-op). Stops (RG_CHECK) on a pointer
 * this cache did not hand out. */
void rg_block_cache_put(rg_block_cache *bc, void *p);
/* Records that work on `stream` uses block p, so that its reuse waits for that work. */
void rg_block_cache_use(rg_block_cache *bc, void *p, int stream);
/* Returns every cached block to the system, first waiting (host side) for pending ones. */
void rg_block_cache_trim(rg_block_cache *bc);
rg_mem_stats rg_block_cache_stats(rg_block_cache *bc);

/* The size of the class that serves `bytes`: the block size actually reserved. 0 if too large. */
size_t rg_block_cache_round(size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
