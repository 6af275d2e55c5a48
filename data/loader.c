/* loader.c — the batch loader: a ring of batch buffers filled by a prefetch thread.
 *
 * What it teaches: the producer/consumer ring behind every framework's data loader. Batch `step`
 * of an epoch always goes to slot step % nslots. The producer (a pthread) fills slots in order;
 * the consumer (the training loop) takes them in order and holds the one it is using until its
 * next call. Three counters under one mutex say everything:
 *
 *     produced   batches filled so far this epoch         (written by the producer)
 *     consumed   batches handed to the training loop      (written by the consumer)
 *     holding    whether the consumer still uses batch consumed - 1
 *
 * The producer may fill batch `produced` when it is in the epoch and its slot is free:
 * produced < consumed - holding + nslots. Otherwise it sleeps on a condition variable; the
 * consumer wakes it when it gives a slot back. The consumer sleeps only while its batch is not
 * filled yet. The data is written outside the lock; taking the mutex to publish it is what makes
 * the bytes visible to the other thread.
 *
 * The next epoch starts as soon as the consumer sees the end of the current one, so its batches
 * are prepared while the program evaluates or checkpoints.
 *
 * Inside one batch, the items go to a pool of workers (data/pool.c): each reads its item (decoding
 * the file of a lazy dataset) and runs the transform (data/transform.c) into its place in the
 * slot. A file that fails to decode becomes zeros and the first such error is kept for
 * rg_loader_status(), so that every rank still runs the same number of steps. */
#include "ringgrad/loader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/pool_impl.h"
#include "data/transform_impl.h"
#include "ringgrad/sampler.h"
#include "tensor/backend_impl.h"

typedef struct {
    float *x;                   /* (B,C,H,W) */
    int64_t *y;                 /* (B) */
    rg_tensor *x_full, *y_full; /* tensors over x and y for a full batch */
    rg_tensor *x_tail, *y_tail; /* the same memory for the epoch's last, smaller batch; or NULL */
} loader_slot;

struct rg_loader {
    const rg_dataset *ds;
    int64_t batch;
    rg_sampler sampler;
    int64_t len, steps, tail; /* items per epoch on this rank, batches, items in the last batch */
    int64_t *order;           /* (N) permutation scratch when shuffling, else NULL */
    int64_t *indices;         /* (len) this rank's items in this epoch's order */
    int nslots;
    loader_slot *slots;
    int fill_rank, fill_world; /* prepare only batches step % fill_world == fill_rank */
    rg_transform tf;
    rg_pool *pool;
    int workers;
    float **scratch; /* (workers) buffers of C*H*W floats for the transforms */

    pthread_mutex_t err_mu; /* guards the first error */
    rg_status err;
    char err_msg[1024];

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work;  /* the producer waits here for a free slot or a new epoch */
    pthread_cond_t ready; /* the consumer waits here for a filled slot or an idle producer */
    /* guarded by mu: */
    int64_t epoch, produced, consumed;
    bool holding, busy, stop;
};

/* ---- filling one batch (the producer, outside the lock) ---- */

typedef struct {
    rg_loader *l;
    loader_slot *slot;
    int64_t first; /* position of the batch's first item in l->indices */
    uint64_t epoch;
} batch_job;

static void record_error(rg_loader *l, rg_status st) {
    pthread_mutex_lock(&l->err_mu);
    if (l->err == RG_OK) {
        l->err = st;
        snprintf(l->err_msg, sizeof l->err_msg, "%s", rg_last_error());
    }
    pthread_mutex_unlock(&l->err_mu);
}

/* Item b of the batch (a pool job): read, transform, label. */
static void fill_item(void *arg, int64_t b, int worker) {
    batch_job *j = arg;
    rg_loader *l = j->l;
    const rg_dataset *ds = l->ds;
    int64_t size = rg_dataset_image_size(ds), item = l->indices[j->first + b];
    float *dst = j->slot->x + b * size;
    rg_image img;
    rg_status st = rg_dataset_item(ds, item, &img);
    if (st == RG_OK) {
        rg_transform_apply(&l->tf, j->epoch, item, &img, dst, l->scratch[worker]);
        rg_dataset_item_release(ds, &img);
    } else {
        record_error(l, st);
        memset(dst, 0, (size_t)size * sizeof *dst);
    }
    j->slot->y[b] = ds->labels[item];
}

static void fill_slot(rg_loader *l, loader_slot *s, int64_t step, int64_t epoch) {
    if (l->fill_world > 1 && step % l->fill_world != l->fill_rank) return; /* not ours to use */
    int64_t first = step * l->batch;
    int64_t count = l->len - first < l->batch ? l->len - first : l->batch;
    batch_job j = {.l = l, .slot = s, .first = first, .epoch = (uint64_t)epoch};
    rg_pool_run(l->pool, count, fill_item, &j);
}

/* Whether the producer has work: a batch of the epoch left to fill and a free slot for it. */
static bool can_produce(const rg_loader *l) {
    return l->produced < l->steps && l->produced < l->consumed - l->holding + l->nslots;
}

static void *producer_main(void *arg) {
    rg_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !can_produce(l)) pthread_cond_wait(&l->work, &l->mu);
        if (l->stop) break;
        int64_t step = l->produced, epoch = l->epoch;
        l->busy = true;
        pthread_mutex_unlock(&l->mu);
        fill_slot(l, &l->slots[step % l->nslots], step, epoch);
        pthread_mutex_lock(&l->mu);
        l->busy = false;
        l->produced++; /* a restart waits for !busy, so `step` still belongs to this epoch */
        pthread_cond_broadcast(&l->ready);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- epochs (the consumer, under the lock) ---- */

/* Makes `epoch` current from its first batch. Waits for the producer to finish the batch it may
 * be filling, since that reads `indices`. */
static void start_epoch_locked(rg_loader *l, int64_t epoch) {
    while (l->busy) pthread_cond_wait(&l->ready, &l->mu);
    rg_sampler_indices(&l->sampler, (uint64_t)epoch, l->order, l->indices);
    l->epoch = epoch;
    l->produced = l->consumed = 0;
    l->holding = false;
    pthread_cond_signal(&l->work);
}

bool rg_loader_next(rg_loader *l, rg_batch *b) {
    RG_CHECK(l && b, "rg_loader_next: NULL loader or batch");
    pthread_mutex_lock(&l->mu);
    if (l->holding) { /* the previous batch is done with: its slot is free again */
        l->holding = false;
        pthread_cond_signal(&l->work);
    }
    if (l->consumed == l->steps) {
        start_epoch_locked(l, l->epoch + 1);
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    while (l->produced <= l->consumed) pthread_cond_wait(&l->ready, &l->mu);
    int64_t step = l->consumed++;
    l->holding = true;
    int64_t epoch = l->epoch;
    pthread_mutex_unlock(&l->mu);

    loader_slot *s = &l->slots[step % l->nslots];
    bool last_partial = step == l->steps - 1 && l->tail != l->batch;
    *b = (rg_batch){.x = last_partial ? s->x_tail : s->x_full,
                    .y = last_partial ? s->y_tail : s->y_full,
                    .size = last_partial ? l->tail : l->batch,
                    .step = step,
                    .epoch = epoch};
    return true;
}

void rg_loader_set_epoch(rg_loader *l, int64_t epoch) {
    RG_CHECK(l && epoch >= 0, "rg_loader_set_epoch: NULL loader or negative epoch");
    pthread_mutex_lock(&l->mu);
    if (epoch != l->epoch || l->consumed > 0) start_epoch_locked(l, epoch);
    pthread_mutex_unlock(&l->mu);
}

rg_status rg_loader_status(rg_loader *l) {
    RG_CHECK(l, "rg_loader_status: NULL loader");
    pthread_mutex_lock(&l->err_mu);
    rg_status st = l->err == RG_OK ? RG_OK : rg_error(l->err, "%s", l->err_msg);
    pthread_mutex_unlock(&l->err_mu);
    return st;
}

/* Only the consumer's thread changes the epoch, and it is the thread that asks. */
int64_t rg_loader_epoch(const rg_loader *l) {
    return l->epoch;
}

int64_t rg_loader_steps_per_epoch(const rg_loader *l) {
    return l->steps;
}

/* ---- creation and destruction ---- */

/* Host memory from the CPU backend (64-byte aligned, cached). A CUDA loader would take pinned
 * memory here and add an asynchronous copy per batch. */
static void *host_alloc(size_t bytes) {
    return rg_backend_for(RG_CPU)->alloc(bytes);
}
static void host_free(void *p, size_t bytes) {
    if (p) rg_backend_for(RG_CPU)->free(p, bytes);
}

static bool slot_init(rg_loader *l, loader_slot *s) {
    const rg_dataset *ds = l->ds;
    s->x = host_alloc((size_t)(l->batch * rg_dataset_image_size(ds)) * sizeof(float));
    s->y = host_alloc((size_t)l->batch * sizeof(int64_t));
    if (!s->x || !s->y) return false;
    s->x_full = rg_tensor_wrap(RG_F32, RG_SHAPE(l->batch, ds->c, ds->h, ds->w), RG_CPU, s->x);
    s->y_full = rg_tensor_wrap(RG_I64, RG_SHAPE(l->batch), RG_CPU, s->y);
    if (l->tail != l->batch) {
        s->x_tail = rg_tensor_wrap(RG_F32, RG_SHAPE(l->tail, ds->c, ds->h, ds->w), RG_CPU, s->x);
        s->y_tail = rg_tensor_wrap(RG_I64, RG_SHAPE(l->tail), RG_CPU, s->y);
    }
    return true;
}

static void slot_deinit(const rg_loader *l, loader_slot *s) {
    rg_tensor_free(s->x_full);
    rg_tensor_free(s->y_full);
    rg_tensor_free(s->x_tail);
    rg_tensor_free(s->y_tail);
    host_free(s->x, (size_t)(l->batch * rg_dataset_image_size(l->ds)) * sizeof(float));
    host_free(s->y, (size_t)l->batch * sizeof(int64_t));
}

/* Sizes, buffers and the epoch-0 order; false when memory runs out. */
static bool loader_init(rg_loader *l, const rg_dataset *ds, const rg_loader_opts *o) {
    l->ds = ds;
    l->batch = o->batch;
    l->fill_rank = o->fill_rank, l->fill_world = o->fill_world;
    rg_sampler_init(&l->sampler, ds->n, o->shuffle, o->seed, o->rank, o->world ? o->world : 1);
    l->len = rg_sampler_len(&l->sampler);
    l->steps = o->drop_last ? l->len / l->batch : (l->len + l->batch - 1) / l->batch;
    l->tail = o->drop_last || l->len % l->batch == 0 ? l->batch : l->len % l->batch;
    l->nslots = (o->prefetch ? o->prefetch : 2) + 1; /* + 1: the slot the consumer holds */
    if (o->shuffle && !(l->order = malloc((size_t)ds->n * sizeof *l->order))) return false;
    l->indices = malloc((size_t)l->len * sizeof *l->indices);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    if (!l->indices || !l->slots) return false;
    for (int i = 0; i < l->nslots; i++)
        if (!slot_init(l, &l->slots[i])) return false;
    if (!rg_transform_init(&l->tf, o, ds->c, ds->h, ds->w)) return false;
    l->workers = o->workers > 0 ? o->workers : 1;
    if (!(l->scratch = calloc((size_t)l->workers, sizeof *l->scratch))) return false;
    for (int i = 0; i < l->workers; i++)
        if (!(l->scratch[i] = malloc((size_t)rg_dataset_image_size(ds) * sizeof(float))))
            return false;
    rg_sampler_indices(&l->sampler, 0, l->order, l->indices);
    return true;
}

rg_loader *rg_loader_new(const rg_dataset *ds, const rg_loader_opts *opts) {
    RG_CHECK(ds && opts, "rg_loader_new: NULL dataset or options");
    RG_CHECK(opts->batch > 0, "rg_loader_new: batch size %lld (must be > 0)",
             (long long)opts->batch);
    RG_CHECK(opts->prefetch >= 0 && opts->prefetch <= 64,
             "rg_loader_new: prefetch %d not in [0, 64]", opts->prefetch);
    RG_CHECK(opts->workers >= 0 && opts->workers <= 256, "rg_loader_new: workers %d not in [0, 256]",
             opts->workers);
    RG_CHECK(opts->fill_world >= 0 && opts->fill_rank >= 0 &&
                 (opts->fill_world <= 1 || opts->fill_rank < opts->fill_world),
             "rg_loader_new: fill_rank %d of fill_world %d", opts->fill_rank, opts->fill_world);
    RG_CHECK(opts->augment >= 0 && opts->augment < RG_AUGMENT_COUNT,
             "rg_loader_new: augment %d", (int)opts->augment);
    for (int64_t k = 0; opts->std && k < ds->c; k++)
        RG_CHECK(opts->std[k] > 0, "rg_loader_new: std[%lld] = %g (must be > 0)", (long long)k,
                 (double)opts->std[k]);
    rg_loader *l = calloc(1, sizeof *l);
    if (!l) return rg_error(RG_ENOMEM, "loader: out of memory"), NULL;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->ready, NULL);
    pthread_mutex_init(&l->err_mu, NULL);
    if (!loader_init(l, ds, opts)) {
        rg_error(RG_ENOMEM, "loader: out of memory for %d batches of %lld images", l->nslots,
                 (long long)opts->batch);
        rg_loader_free(l);
        return NULL;
    }
    if (!(l->pool = rg_pool_new(l->workers))) {
        rg_loader_free(l);
        return NULL;
    }
    int err = pthread_create(&l->thread, NULL, producer_main, l);
    if (err) {
        rg_loader_free(l);
        return rg_error(RG_ENOMEM, "loader: cannot start the prefetch thread: %s", strerror(err)),
               NULL;
    }
    l->thread_started = true;
    return l;
}

void rg_loader_free(rg_loader *l) {
    if (!l) return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; l->slots && i < l->nslots; i++) slot_deinit(l, &l->slots[i]);
    free(l->slots);
    rg_pool_free(l->pool);
    for (int i = 0; l->scratch && i < l->workers; i++) free(l->scratch[i]);
    free(l->scratch);
    rg_transform_deinit(&l->tf);
    free(l->indices);
    free(l->order);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->err_mu);
    free(l);
}
