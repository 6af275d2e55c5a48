/* pool_impl.h — a fixed pool of worker threads that share the items of one job (data/pool.c).
 * The loader's prefetch thread uses it to decode and augment a batch's images in parallel. */
#ifndef RG_POOL_IMPL_H
#define RG_POOL_IMPL_H

#include <stdint.h>

typedef struct rg_pool rg_pool;

/* fn(ctx, i, worker) for one item i; worker in [0, workers) names the calling thread (for
 * per-thread scratch memory). */
typedef void (*rg_pool_fn)(void *ctx, int64_t i, int worker);

/* A pool of `workers` threads, counting the caller of rg_pool_run (so workers - 1 are started).
 * NULL with rg_last_error() set when a thread cannot be started. */
rg_pool *rg_pool_new(int workers);

/* Runs fn for i in [0, n), spread over the workers (the caller is worker 0); returns when every
 * item is done. One job at a time, from one thread. */
void rg_pool_run(rg_pool *p, int64_t n, rg_pool_fn fn, void *ctx);

/* Stops and joins the threads. NULL is a no-op. */
void rg_pool_free(rg_pool *p);

#endif
