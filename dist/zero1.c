/* zero1.c — ZeRO stage 1 (see zero.h): the optimizer state sharded over the ranks.
 *
 * What it teaches: an allreduce is a reduce-scatter followed by an allgather (section 5 of
 * docs/DISTRIBUTED.md), and ZeRO-1 puts the optimizer step between the two halves. After the
 * reduce-scatter, rank r holds the summed gradient of its pieces of the weights; it updates only
 * those (so it keeps optimizer state for 1/N of the weights), and the allgather hands every rank
 * the updated weights instead of the averaged gradients. Same bytes on the wire as DDP, 1/N of
 * the optimizer memory.
 *
 * The reduce-scatter overlaps backward as DDP's allreduce does: the gradients sit in DDP's
 * buckets (dist/bucket_plan.h), each bucket is cut into N equal pieces, piece r is rank r's,
 * and a bucket's reduce-scatter starts from the gradient-ready hook of its last gradient
 * (the layout FSDP gives each flat parameter). The CNN, 2 ranks:
 *
 *   gflat (every gradient a view into it; reverse registration order, as backward ends them):
 *     bucket 0 [ fc2.w fc2.b fc1.w ..... | ..... fc1.w fc1.b ] bucket 1 [ conv2.* | conv1.* pad ]
 *                piece 0 (rank 0)          piece 1 (rank 1)             piece 0    piece 1
 *   backward:   fc2 fc1 ........ conv2 ...................... conv1
 *   comm thread:        reduce-scatter bucket 0 ..........           reduce-scatter bucket 1
 *   rg_zero1_step: waits for both; rank r's pieces (gshard: r's piece of each bucket, one after
 *   the other) step its optimizer, one fused kernel per parameter piece, grad scale 1/N;
 *   then one allgather of the weights, laid out rank by rank (wflat: rank r's pieces at r * shard,
 *   the layout of gshard), is copied out into the parameters.
 *
 * A parameter can straddle two pieces (fc1.weight above): each owner updates its part. Element-
 * wise optimizers (SGD, Adam) give the same result on parts as on the whole tensor, which is why
 * ZeRO shards them freely; a per-tensor rule (LAMB's trust ratio) could not be cut this way. */
#include "ringgrad/zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/bucket_plan.h"
#include "dist/comm_impl.h"
#include "dist/shard_state.h"
#include "core/hash.h"
#include "ringgrad/autograd.h"
#include "tensor/backend_impl.h"

typedef struct {
    rg_tensor *param;
    const char *name; /* borrowed from the parameter list */
    struct rg_zero1 *z;
    int bucket;
    int64_t offset; /* in gflat, elements */
    int hook_id;    /* 0: not hooked */
    bool ready;     /* its gradient is final in this step (reset by rg_zero1_step) */
} zentry;

typedef struct {
    int first, n_params; /* entries[first .. first + n_params) */
    int64_t at;          /* its first element in gflat */
    int64_t numel;       /* its gradients' elements; it spans size * chunk, the rest padding */
    int64_t chunk;       /* ceil(numel / size): one rank's piece */
    int64_t cat;         /* where each rank's piece sits in that rank's shard */
    int pending;         /* gradients not yet final in this step */
    rg_comm_req *req;    /* its reduce-scatter in flight, or NULL */
} zbucket;

struct rg_zero1 {
    rg_comm *comm;
    rg_zero1_opts opts;
    int rank, size, micro_step;
    int next_launch, launched_in_backward; /* buckets go in index order on every rank */
    const rg_backend *be;
    rg_device device;
    zentry *entries; /* trainable parameters in reverse registration order */
    int n_entries;
    zbucket *buckets;
    int n_buckets;
    int64_t numel, shard;   /* trainable elements; shard = the sum of the buckets' chunks */
    float *gflat;           /* (size * shard) gradients, bucket after bucket */
    float *gshard;          /* (shard) this rank's reduced pieces */
    float *wflat;           /* (size * shard) weights, rank r's pieces at r * shard */
    rg_named_tensor *views; /* this rank's pieces: views into wflat with grads into gshard */
    int n_views;
    rg_optim *optim;
    char *optim_name, *optim_options; /* as given, for the state's buffer kinds */
};

/* Between two buffers of the parameters' device. */
static void copy_on_device(const rg_zero1 *z, void *dst, const void *src, size_t bytes) {
    z->be->copy(dst, src, bytes, z->device.type == RG_DEV_CPU ? RG_COPY_H2H : RG_COPY_D2D);
}

/* Entry e's values between `dense` (its numel floats, in the parameter's order) and `ranked` (a
 * buffer laid out as wflat), one run per owning rank. */
static void entry_copy(const rg_zero1 *z, const zentry *e, float *ranked, float *dense,
                       bool to_dense) {
    const zbucket *bk = &z->buckets[e->bucket];
    int64_t begin = e->offset - bk->at, end = begin + e->param->numel;
    for (int64_t q = begin; q < end;) {
        int64_t owner = q / bk->chunk,
                stop = (owner + 1) * bk->chunk < end ? (owner + 1) * bk->chunk : end;
        float *r = ranked + owner * z->shard + bk->cat + (q - owner * bk->chunk);
        float *d = dense + (q - begin);
        size_t bytes = (size_t)(stop - q) * sizeof(float);
        if (to_dense)
            copy_on_device(z, d, r, bytes);
        else
            copy_on_device(z, r, d, bytes);
        q = stop;
    }
}

/* The buckets, each padded to `size` equal pieces. */
static void plan(rg_zero1 *z) {
    rg_bucket_plan p = {
        .first_mb = z->opts.first_bucket_mb, .mb = z->opts.bucket_mb, .one = z->opts.no_overlap};
    int64_t at = 0;
    for (int i = 0; i < z->n_entries; i++) {
        zentry *e = &z->entries[i];
        int64_t within;
        e->bucket = rg_bucket_plan_next(&p, e->param->numel, &within);
        zbucket *bk = &z->buckets[e->bucket];
        if (bk->n_params++ == 0) { /* a new bucket: the previous one is complete */
            if (e->bucket > 0) at += z->size * z->buckets[e->bucket - 1].chunk;
            bk->first = i, bk->at = at;
        }
        e->offset = bk->at + within;
        bk->numel = within + e->param->numel;
        bk->chunk = (bk->numel + z->size - 1) / z->size;
    }
    z->n_buckets = p.n_buckets;
    for (int b = 0; b < z->n_buckets; b++) {
        z->buckets[b].cat = z->shard;
        z->buckets[b].pending = z->buckets[b].n_params;
        z->shard += z->buckets[b].chunk;
    }
    if (z->shard == 0) z->shard = 1; /* no trainable parameters: keep the buffers non-empty */
}

RG_NODISCARD static rg_status alloc_flat(rg_zero1 *z) {
    size_t total = (size_t)(z->shard * z->size) * sizeof(float);
    z->gflat = z->be->alloc(total);
    z->wflat = z->be->alloc(total);
    z->gshard = z->be->alloc((size_t)z->shard * sizeof(float));
    if (!z->gflat || !z->wflat || !z->gshard)
        return rg_error(RG_ENOMEM, "zero1: out of memory for flat buffers of %zu bytes", total);
    z->be->memset0(z->gflat, total);
    z->be->memset0(z->wflat, total);
    z->be->memset0(z->gshard, (size_t)z->shard * sizeof(float));
    return RG_OK;
}

/* Rank 0's parameters and buffers everywhere (as rg_ddp_new). */
RG_NODISCARD static rg_status broadcast_from_rank0(rg_comm *comm, const rg_param_list *params) {
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        RG_TRY(rg_comm_broadcast(comm, t->data, (int64_t)rg_tensor_nbytes(t), RG_COMM_U8, 0));
    }
    return RG_OK;
}

static void on_grad_ready(rg_tensor *param, void *ctx);

/* Gradients become views into gflat, hooked; the weights are copied into wflat. */
static void attach(rg_zero1 *z) {
    for (int i = 0; i < z->n_entries; i++) {
        zentry *e = &z->entries[i];
        rg_tensor *p = e->param;
        rg_tensor *view =
            rg_tensor_wrap(RG_F32, p->ndim, p->shape, p->device, z->gflat + e->offset);
        RG_CHECK(view, "rg_zero1_new: %s", rg_last_error());
        if (p->grad) rg_tensor_copy_(view, p->grad);
        rg_tensor_free(p->grad);
        p->grad = view;
        entry_copy(z, e, z->wflat, p->data, false);
        e->z = z;
        e->hook_id = rg_grad_hook_add(p, on_grad_ready, e);
    }
}

/* This rank's piece of each bucket, cut at the parameters: views into its part of wflat, each
 * with its grad a view into gshard, named after its parameter (the state reads
 * "optim.state.fc1.weight.exp_avg" for this rank's part of fc1.weight). A parameter lies in one
 * bucket and a rank's piece of a bucket is contiguous, so each parameter gives at most one view. */
RG_NODISCARD static rg_status make_views(rg_zero1 *z) {
    z->views = calloc((size_t)z->n_entries + 1, sizeof *z->views);
    if (!z->views) return rg_error(RG_ENOMEM, "zero1: out of host memory");
    for (int b = 0; b < z->n_buckets; b++) {
        const zbucket *bk = &z->buckets[b];
        int64_t lo = bk->at + z->rank * bk->chunk, hi = lo + bk->chunk; /* in gflat */
        for (int i = bk->first; i < bk->first + bk->n_params; i++) {
            const zentry *e = &z->entries[i];
            int64_t a = e->offset > lo ? e->offset : lo;
            int64_t c = e->offset + e->param->numel < hi ? e->offset + e->param->numel : hi;
            if (a >= c) continue;
            int64_t len = c - a, at = bk->cat + (a - lo);
            rg_tensor *w = rg_tensor_wrap(RG_F32, 1, &len, z->device,
                                          z->wflat + (int64_t)z->rank * z->shard + at);
            if (!w) return rg_error(RG_ENOMEM, "zero1: out of host memory");
            w->grad = rg_tensor_wrap(RG_F32, 1, &len, z->device, z->gshard + at);
            if (!w->grad)
                return rg_tensor_free(w), rg_error(RG_ENOMEM, "zero1: out of host memory");
            rg_tensor_set_requires_grad(w, true);
            z->views[z->n_views++] = (rg_named_tensor){.name = e->name, .tensor = w};
        }
    }
    return RG_OK;
}

static rg_zero1_opts defaults(const rg_zero1_opts *o) {
    rg_zero1_opts r = o ? *o : (rg_zero1_opts){0};
    if (r.accum_steps <= 0) r.accum_steps = 1;
    rg_bucket_plan_defaults(&r.bucket_mb, &r.first_bucket_mb);
    return r;
}

/* Collective: every rank fails alike when one rank's set-up failed, or when the ranks' bucket
 * plans differ (their reduce-scatters would not match). */
RG_NODISCARD static rg_status agree(rg_zero1 *z, rg_status mine) {
    uint64_t h = RG_FNV1A_BASIS;
    for (int b = 0; b < z->n_buckets; b++) h = rg_fnv1a(h, &z->buckets[b].numel, sizeof(int64_t));
    int64_t me[3] = {mine, (int64_t)h, z->opts.accum_steps};
    int64_t *all = calloc((size_t)z->size * 3, sizeof *all);
    if (!all) return rg_error(RG_ENOMEM, "zero1: out of host memory");
    rg_status st = rg_comm_allgather(z->comm, me, all, 3, RG_COMM_I64);
    for (int r = 0; st == RG_OK && r < z->size; r++)
        if (all[3 * r] != RG_OK && mine == RG_OK)
            st = rg_error(RG_EPEER, "zero1: rank %d could not set up; this is rank %d", r, z->rank);
    for (int r = 1; st == RG_OK && mine == RG_OK && r < z->size; r++)
        if (all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
            st = rg_error(RG_EMISMATCH,
                          "zero1: rank %d cuts the gradients into other buckets than rank 0, or "
                          "accumulates another number of steps (%lld against %lld); give every "
                          "rank the same model, bucket sizes and accum_steps",
                          r, (long long)all[3 * r + 2], (long long)all[2]);
    free(all);
    return st == RG_OK ? mine : st;
}

rg_zero1 *rg_zero1_new(const rg_param_list *params, rg_comm *comm, const char *optim,
                       const char *options, const rg_zero1_opts *opts) {
    RG_CHECK(params && comm && optim, "rg_zero1_new: NULL parameters, communicator or optimizer");
    rg_zero1 *z = calloc(1, sizeof *z);
    RG_CHECK(z, "rg_zero1_new: out of host memory");
    z->comm = comm, z->opts = defaults(opts);
    z->optim_name = strdup(optim), z->optim_options = strdup(options ? options : "");
    RG_CHECK(z->optim_name && z->optim_options, "rg_zero1_new: out of host memory");
    z->rank = rg_comm_rank(comm), z->size = rg_comm_size(comm);
    z->entries = calloc((size_t)params->n + 1, sizeof *z->entries);
    z->buckets = calloc((size_t)params->n + 1, sizeof *z->buckets);
    RG_CHECK(z->entries && z->buckets, "rg_zero1_new: out of host memory");
    for (int i = params->n - 1; i >= 0; i--) { /* reverse registration order */
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        RG_CHECK(t->dtype == RG_F32, "zero1: parameter %s is not float32", params->items[i].name);
        if (z->n_entries == 0) z->device = t->device;
        RG_CHECK(rg_device_eq(t->device, z->device), "zero1: parameters on different devices (%s)",
                 params->items[i].name);
        z->entries[z->n_entries++] = (zentry){.param = t, .name = params->items[i].name};
        z->numel += t->numel;
    }
    z->be = rg_backend_for(z->n_entries ? z->device : RG_CPU);
    plan(z);
    rg_status st = alloc_flat(z);
    if (st == RG_OK) st = make_views(z);
    if (st == RG_OK) {
        rg_param_list mine = {z->views, z->n_views};
        z->optim = rg_optim_new(optim, &mine, options);
        if (!z->optim) st = RG_EINVAL; /* its message stands */
    }
    st = agree(z, st);
    if (st == RG_OK) st = broadcast_from_rank0(comm, params);
    if (st != RG_OK) {
        rg_zero1_free(z);
        return NULL;
    }
    attach(z);
    /* the reduce-scatter sums; the optimizer's kernels apply the 1/N as they read */
    rg_optim_set_grad_scale(z->optim, 1.0f / (float)z->size);
    return z;
}

/* ---- the step: hooks launch the buckets' reduce-scatters in order; step finishes ---- */

/* `waited`: launched by rg_zero1_step, which waits for it next (comm_thread.c). */
static void launch(rg_zero1 *z, int b, bool waited) {
    zbucket *bk = &z->buckets[b];
    rg_status st =
        rg_comm_reduce_scatter_launch(z->comm, z->gflat + bk->at, z->gshard + bk->cat, bk->chunk,
                                      RG_COMM_F32, RG_REDUCE_SUM, waited, &bk->req);
    if (st != RG_OK) bk->req = NULL; /* only when the comm is broken; the step reports it */
}

/* As DDP's hook (dist/ddp.c): a gradient final twice in one step means its bucket may already be
 * on the wire with the old values. */
static void on_grad_ready(rg_tensor *param, void *ctx) {
    (void)param;
    zentry *e = ctx;
    rg_zero1 *z = e->z;
    if (z->micro_step + 1 < z->opts.accum_steps || z->opts.no_overlap) return;
    RG_CHECK(!e->ready,
             "zero1: %s: its gradient was final twice before rg_zero1_step (a second rg_backward "
             "in one step, or another model's backward in the same step scope); call "
             "rg_zero1_step after each rg_backward",
             e->name);
    e->ready = true;
    if (--z->buckets[e->bucket].pending == 0)
        while (z->next_launch < z->n_buckets && z->buckets[z->next_launch].pending == 0)
            launch(z, z->next_launch++, false);
}

/* Launches what backward did not (unused parameters, --no-overlap) and waits for every bucket;
 * re-arms the hooks for the next step. */
RG_NODISCARD static rg_status finish_reduce_scatter(rg_zero1 *z) {
    z->launched_in_backward = z->next_launch;
    while (z->next_launch < z->n_buckets) launch(z, z->next_launch++, true);
    rg_status st = RG_OK;
    for (int b = 0; b < z->n_buckets; b++) {
        zbucket *bk = &z->buckets[b];
        rg_status s = bk->req ? rg_comm_wait(bk->req)
                              : rg_error(RG_EPEER, "zero1: bucket %d could not be sent", b);
        bk->req = NULL;
        if (s != RG_OK && st == RG_OK) st = s;
        bk->pending = bk->n_params;
    }
    for (int i = 0; i < z->n_entries; i++) z->entries[i].ready = false;
    z->next_launch = 0;
    return st;
}

bool rg_zero1_will_sync(const rg_zero1 *z) {
    return z->micro_step + 1 >= z->opts.accum_steps;
}

rg_status rg_zero1_step(rg_zero1 *z) {
    if (!rg_zero1_will_sync(z)) {
        z->micro_step++;
        return RG_OK;
    }
    z->micro_step = 0;
    RG_TRY(finish_reduce_scatter(z));
    rg_optim_step(z->optim);
    float *mine = z->wflat + (int64_t)z->rank * z->shard;
    RG_TRY(rg_comm_allgather(z->comm, mine, z->wflat, z->shard, RG_COMM_F32));
    for (int i = 0; i < z->n_entries; i++)
        entry_copy(z, &z->entries[i], z->wflat, z->entries[i].param->data, true);
    z->be->memset0(z->gflat, (size_t)(z->shard * z->size) * sizeof(float));
    return RG_OK;
}

rg_optim *rg_zero1_optim(rg_zero1 *z) {
    return z->optim;
}

size_t rg_zero1_state_bytes(const rg_zero1 *z) {
    return rg_optim_state_bytes(z->optim);
}

int64_t rg_zero1_shard_numel(const rg_zero1 *z) {
    int64_t n = 0;
    for (int b = 0; b < z->n_buckets; b++) {
        const zbucket *bk = &z->buckets[b];
        int64_t lo = z->rank * bk->chunk,
                hi = lo + bk->chunk < bk->numel ? lo + bk->chunk : bk->numel;
        if (hi > lo) n += hi - lo;
    }
    return n;
}

int64_t rg_zero1_bytes_per_step(const rg_zero1 *z) {
    return z->shard * z->size * (int64_t)sizeof(float);
}

int rg_zero1_num_buckets(const rg_zero1 *z) {
    return z->n_buckets;
}

int rg_zero1_launched_during_backward(const rg_zero1 *z) {
    return z->launched_in_backward;
}

void rg_zero1_free(rg_zero1 *z) {
    if (!z) return;
    /* Reduce-scatters launched but never waited for (no rg_zero1_step after the backward): the
     * comm thread may still read gflat and write gshard. */
    for (int b = 0; b < z->n_buckets; b++)
        if (z->buckets[b].req) RG_IGNORE(rg_comm_wait(z->buckets[b].req)); /* cannot fail a free */
    for (int i = 0; i < z->n_entries; i++) { /* ordinary gradients again, with their values */
        zentry *e = &z->entries[i];
        rg_tensor *p = e->param;
        if (!e->z) continue; /* never attached */
        rg_grad_hook_remove(p, e->hook_id);
        rg_tensor *g = rg_tensor_new(RG_F32, p->ndim, p->shape, p->device);
        RG_CHECK(g, "rg_zero1_free: %s", rg_last_error());
        rg_tensor_copy_(g, p->grad);
        rg_tensor_free(p->grad);
        p->grad = g;
    }
    rg_optim_free(z->optim);
    for (int i = 0; i < z->n_views; i++) rg_tensor_free(z->views[i].tensor);
    size_t total = (size_t)(z->shard * z->size) * sizeof(float);
    if (z->gflat) z->be->free(z->gflat, total);
    if (z->wflat) z->be->free(z->wflat, total);
    if (z->gshard) z->be->free(z->gshard, (size_t)z->shard * sizeof(float));
    free(z->views);
    free(z->entries);
    free(z->buckets);
    free(z->optim_name), free(z->optim_options);
    free(z);
}

/* ---- the whole optimizer state, for checkpoints ----
 *
 * A checkpoint holds the state DDP's optimizer would have (every parameter's moments in full),
 * so that a zero1 run's checkpoint resumes under zero1 on any number of ranks, or under ddp. Each
 * kind of buffer (Adam's exp_avg, exp_avg_sq; SGD's momentum_buffer) travels as the weights do:
 * the ranks' shards laid side by side in a buffer laid out as wflat, by an allgather (to save) or
 * a broadcast (to resume). Step counters are the same on every piece: optim.step. */
/* buf (this rank's shard, `shard` floats) to or from the pieces' buffers of one kind. */
static void shard_state(rg_zero1 *z, const char *kind, float *buf, bool to_buf) {
    for (int i = 0; i < z->n_views; i++) {
        rg_tensor *v = z->views[i].tensor,
                  *st = rg_shard_state_of(z->optim, z->views[i].name, kind);
        int64_t at = (float *)v->data - (z->wflat + (int64_t)z->rank * z->shard);
        size_t bytes = (size_t)v->numel * sizeof(float);
        if (to_buf)
            copy_on_device(z, buf + at, st->data, bytes);
        else
            copy_on_device(z, st->data, buf + at, bytes);
    }
}

rg_status rg_zero1_gather_state(rg_zero1 *z, rg_optim *full) {
    char kinds[RG_SHARD_MAX_KINDS][32];
    int nk = 0;
    RG_TRY(rg_shard_kinds(z->optim_name, z->optim_options, kinds, &nk));
    size_t total = (size_t)(z->shard * z->size) * sizeof(float);
    float *flat = z->be->alloc(total), *mine = z->be->alloc((size_t)z->shard * sizeof(float));
    rg_status st = flat && mine ? RG_OK : rg_error(RG_ENOMEM, "zero1: out of memory for the state");
    for (int k = 0; st == RG_OK && k < nk; k++) {
        z->be->memset0(mine, (size_t)z->shard * sizeof(float));
        shard_state(z, kinds[k], mine, true);
        st = rg_comm_allgather(z->comm, mine, flat, z->shard, RG_COMM_F32);
        for (int i = 0; st == RG_OK && full && i < z->n_entries; i++) {
            const zentry *e = &z->entries[i];
            entry_copy(z, e, flat, rg_shard_state_of(full, e->name, kinds[k])->data, true);
        }
    }
    if (flat) z->be->free(flat, total);
    if (mine) z->be->free(mine, (size_t)z->shard * sizeof(float));
    if (st == RG_OK && full) {
        int64_t v[2];
        rg_shard_position(z->optim, v);
        rg_shard_set_position(full, v);
    }
    return st;
}

rg_status rg_zero1_scatter_state(rg_zero1 *z, rg_optim *full) {
    RG_CHECK(z->rank != 0 || full, "rg_zero1_scatter_state: rank 0 needs the full optimizer");
    char kinds[RG_SHARD_MAX_KINDS][32];
    int nk = 0;
    RG_TRY(rg_shard_kinds(z->optim_name, z->optim_options, kinds, &nk));
    size_t total = (size_t)(z->shard * z->size) * sizeof(float);
    float *flat = z->be->alloc(total);
    rg_status st = flat ? RG_OK : rg_error(RG_ENOMEM, "zero1: out of memory for the state");
    for (int k = 0; st == RG_OK && k < nk; k++) {
        z->be->memset0(flat, total);
        for (int i = 0; z->rank == 0 && i < z->n_entries; i++) {
            const zentry *e = &z->entries[i];
            entry_copy(z, e, flat, rg_shard_state_of(full, e->name, kinds[k])->data, false);
        }
        st = rg_comm_broadcast(z->comm, flat, z->shard * z->size, RG_COMM_F32, 0);
        if (st == RG_OK) shard_state(z, kinds[k], flat + (int64_t)z->rank * z->shard, false);
    }
    if (flat) z->be->free(flat, total);
    int64_t v[2] = {0, 0};
    if (z->rank == 0) rg_shard_position(full, v);
    if (st == RG_OK) st = rg_comm_broadcast(z->comm, v, 2, RG_COMM_I64, 0);
    if (st == RG_OK) rg_shard_set_position(z->optim, v);
    return st;
}
