/* pool.c — a tiny thread pool: one job at a time, items handed out by an atomic counter.
 *
 * What it teaches: the smallest correct fork/join. The caller publishes a job under the mutex and
 * bumps a generation number; workers wake on the generation change, take item indices with an
 * atomic fetch-add until none are left, and the last one to finish signals the caller. Taking
 * items one at a time balances uneven work (a big JPEG next to a small one). */
#include "data/pool_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/status.h"

typedef struct {
    struct rg_pool *pool;
    int id;
} worker_arg;

struct rg_pool {
    int workers, started;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    /* guarded by mu: */
    uint64_t generation;
    int running; /* workers still inside the current job */
    bool stop;
    /* the current job (written under mu before the generation changes) */
    rg_pool_fn fn;
    void *ctx;
    int64_t n;
    atomic_int_fast64_t next;
};

static void work(rg_pool *p, int id) {
    for (int64_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) p->fn(p->ctx, i, id);
}

static void *worker_main(void *arg) {
    worker_arg *a = arg;
    rg_pool *p = a->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, a->id);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

rg_pool *rg_pool_new(int workers) {
    rg_pool *p = calloc(1, sizeof *p);
    if (!p) return rg_error(RG_ENOMEM, "thread pool: out of memory"), NULL;
    p->workers = workers < 1 ? 1 : workers;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)p->workers, sizeof *p->threads);
    p->args = calloc((size_t)p->workers, sizeof *p->args);
    if (!p->threads || !p->args) {
        rg_pool_free(p);
        return rg_error(RG_ENOMEM, "thread pool: out of memory"), NULL;
    }
    for (int i = 1; i < p->workers; i++) {
        p->args[i] = (worker_arg){p, i};
        int err = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
        if (err) {
            rg_pool_free(p);
            return rg_error(RG_ENOMEM, "thread pool: cannot start worker %d: %s", i, strerror(err)),
                   NULL;
        }
        p->started++;
    }
    return p;
}

void rg_pool_run(rg_pool *p, int64_t n, rg_pool_fn fn, void *ctx) {
    if (p->started == 0) { /* one worker: no hand-over at all */
        for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->ctx = ctx, p->n = n;
    atomic_store(&p->next, 0);
    p->running = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void rg_pool_free(rg_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->args);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
