/* zero1.c — ZeRO stage 1 (see zero.h): the optimizer state sharded over the ranks.
 *
 * What it teaches: an allreduce is a reduce-scatter followed by an allgather (section 5 of
 * docs/DISTRIBUTED.md), and ZeRO-1 puts the optimizer step between the two halves. After the
 * reduce-scatter, rank r holds the summed gradient of one contiguous shard of the flattened
 * weights; it updates only that shard (so it keeps optimizer state for 1/N of the weights), and
 * the allgather hands every rank the updated weights instead of the averaged gradients. Same bytes
 * on the wire as DDP, 1/N of the optimizer memory.
 *
 *   flat gradient (every parameter's grad is a view into it, padded to N equal shards):
 *     [ fc2.w fc2.b | fc1.w ......... | fc1.w conv2.* conv1.* | pad ]
 *       shard 0       shard 1           shard 2
 *   reduce-scatter  -> rank r: gshard = sum over ranks of shard r          (S elements)
 *   optimizer       -> the rank's views into shard r of the flat weights, each with its grad
 *                      a view into gshard: one fused kernel per piece, grad scale 1/N
 *   allgather       -> wflat: every shard from its owner; copied out into the parameters
 *
 * A parameter can straddle two shards (fc1.weight above): each owner updates its piece. Element-
 * wise optimizers (SGD, Adam) give the same result on pieces as on the whole tensor, which is why
 * ZeRO shards them freely; a per-tensor rule (LAMB's trust ratio) could not be cut this way. */
#include "ringgrad/zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/shard_state.h"
#include "tensor/backend_impl.h"

typedef struct {
    rg_tensor *param;
    const char *name; /* borrowed from the parameter list */
    int64_t offset;   /* in the flat buffers, elements */
} zentry;

struct rg_zero1 {
    rg_comm *comm;
    rg_zero1_opts opts;
    int rank, size, micro_step;
    const rg_backend *be;
    rg_device device;
    zentry *entries;
    int n_entries;
    int64_t numel, shard;   /* trainable elements; shard = ceil(numel / size) */
    float *gflat;           /* (size * shard) gradients: every parameter's grad is a view */
    float *gshard;          /* (shard) this rank's reduced shard */
    float *wflat;           /* (size * shard) weights, the allgather's buffer */
    rg_named_tensor *views; /* this rank's pieces: views into wflat with grads into gshard */
    int n_views;
    rg_optim *optim;
    char *optim_name, *optim_options; /* as given, for the state's buffer kinds */
};

/* Between two buffers of the parameters' device. */
static void copy_on_device(const rg_zero1 *z, void *dst, const void *src, size_t bytes) {
    z->be->copy(dst, src, bytes, z->device.type == RG_DEV_CPU ? RG_COPY_H2H : RG_COPY_D2D);
}

RG_NODISCARD static rg_status alloc_flat(rg_zero1 *z) {
    size_t total = (size_t)(z->shard * z->size) * sizeof(float);
    z->gflat = z->be->alloc(total);
    z->wflat = z->be->alloc(total);
    z->gshard = z->be->alloc((size_t)z->shard * sizeof(float)); /* shard >= 1 */
    if (!z->gflat || !z->wflat || !z->gshard)
        return rg_error(RG_ENOMEM, "zero1: out of memory for flat buffers of %zu bytes", total);
    z->be->memset0(z->gflat, total);
    z->be->memset0(z->wflat, total);
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

/* Gradients become views into gflat; the weights are copied into wflat. */
static void attach(rg_zero1 *z) {
    for (int i = 0; i < z->n_entries; i++) {
        zentry *e = &z->entries[i];
        rg_tensor *p = e->param;
        rg_tensor *view =
            rg_tensor_wrap(RG_F32, p->ndim, p->shape, p->device, z->gflat + e->offset);
        if (p->grad) rg_tensor_copy_(view, p->grad);
        rg_tensor_free(p->grad);
        p->grad = view;
        copy_on_device(z, z->wflat + e->offset, p->data, (size_t)p->numel * sizeof(float));
    }
}

/* This rank's pieces of the parameters that overlap [lo, hi) of the flat weights, named after
 * their parameters (the state reads "optim.state.fc1.weight.exp_avg", for this rank's piece). */
RG_NODISCARD static rg_status make_views(rg_zero1 *z) {
    int64_t lo = (int64_t)z->rank * z->shard, hi = lo + z->shard;
    z->views = calloc((size_t)z->n_entries + 1, sizeof *z->views);
    if (!z->views) return rg_error(RG_ENOMEM, "zero1: out of host memory");
    for (int i = 0; i < z->n_entries; i++) {
        const zentry *e = &z->entries[i];
        int64_t a = e->offset > lo ? e->offset : lo;
        int64_t b = e->offset + e->param->numel < hi ? e->offset + e->param->numel : hi;
        if (a >= b) continue;
        int64_t len = b - a;
        rg_tensor *w = rg_tensor_wrap(RG_F32, 1, &len, z->device, z->wflat + a);
        if (!w) return rg_error(RG_ENOMEM, "zero1: out of host memory");
        w->grad = rg_tensor_wrap(RG_F32, 1, &len, z->device, z->gshard + (a - lo));
        if (!w->grad) return rg_tensor_free(w), rg_error(RG_ENOMEM, "zero1: out of host memory");
        rg_tensor_set_requires_grad(w, true);
        z->views[z->n_views++] = (rg_named_tensor){.name = e->name, .tensor = w};
    }
    return RG_OK;
}

static rg_zero1_opts defaults(const rg_zero1_opts *o) {
    rg_zero1_opts r = o ? *o : (rg_zero1_opts){0};
    if (r.accum_steps <= 0) r.accum_steps = 1;
    return r;
}

/* Collective: every rank fails alike when one rank's set-up failed. */
RG_NODISCARD static rg_status agree(rg_zero1 *z, rg_status mine) {
    int64_t me = mine, *all = calloc((size_t)z->size, sizeof *all);
    if (!all) return rg_error(RG_ENOMEM, "zero1: out of host memory");
    rg_status st = rg_comm_allgather(z->comm, &me, all, 1, RG_COMM_I64);
    for (int r = 0; st == RG_OK && r < z->size; r++)
        if (all[r] != RG_OK && mine == RG_OK)
            st = rg_error(RG_EPEER, "zero1: rank %d could not set up; this is rank %d", r, z->rank);
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
    RG_CHECK(z->entries, "rg_zero1_new: out of host memory");
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        RG_CHECK(t->dtype == RG_F32, "zero1: parameter %s is not float32", params->items[i].name);
        if (z->n_entries == 0) z->device = t->device;
        RG_CHECK(rg_device_eq(t->device, z->device), "zero1: parameters on different devices (%s)",
                 params->items[i].name);
        z->entries[z->n_entries++] =
            (zentry){.param = t, .name = params->items[i].name, .offset = z->numel};
        z->numel += t->numel;
    }
    z->be = rg_backend_for(z->n_entries ? z->device : RG_CPU);
    z->shard = (z->numel + z->size - 1) / z->size;
    if (z->shard == 0) z->shard = 1;
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

bool rg_zero1_will_sync(const rg_zero1 *z) {
    return z->micro_step + 1 >= z->opts.accum_steps;
}

rg_status rg_zero1_step(rg_zero1 *z) {
    if (!rg_zero1_will_sync(z)) {
        z->micro_step++;
        return RG_OK;
    }
    z->micro_step = 0;
    RG_TRY(
        rg_comm_reduce_scatter(z->comm, z->gflat, z->gshard, z->shard, RG_COMM_F32, RG_REDUCE_SUM));
    rg_optim_step(z->optim);
    float *mine = z->wflat + (int64_t)z->rank * z->shard;
    RG_TRY(rg_comm_allgather(z->comm, mine, z->wflat, z->shard, RG_COMM_F32));
    for (int i = 0; i < z->n_entries; i++) {
        const zentry *e = &z->entries[i];
        copy_on_device(z, e->param->data, z->wflat + e->offset,
                       (size_t)e->param->numel * sizeof(float));
    }
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
    int64_t lo = (int64_t)z->rank * z->shard, hi = lo + z->shard;
    if (hi > z->numel) hi = z->numel;
    return hi > lo ? hi - lo : 0;
}

int64_t rg_zero1_bytes_per_step(const rg_zero1 *z) {
    return z->shard * z->size * (int64_t)sizeof(float);
}

void rg_zero1_free(rg_zero1 *z) {
    if (!z) return;
    for (int i = 0; i < z->n_entries; i++) { /* ordinary gradients again, with their values */
        rg_tensor *p = z->entries[i].param;
        if (!p->grad || (p->grad->flags & RG_TENSOR_OWNS_DATA)) continue; /* never attached */
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
    free(z->optim_name), free(z->optim_options);
    free(z);
}

/* ---- the whole optimizer state, for checkpoints ----
 *
 * A checkpoint holds the state DDP's optimizer would have (every parameter's moments in full),
 * so that a zero1 run's checkpoint resumes under zero1 on any number of ranks, or under ddp. Each
 * kind of buffer (Adam's exp_avg, exp_avg_sq; SGD's momentum_buffer) travels as the weights do:
 * the ranks' shards laid side by side in a flat buffer, by an allgather (to save) or a broadcast
 * (to resume). Step counters are the same on every piece: optim.step. */
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
            rg_tensor *t = rg_shard_state_of(full, e->name, kinds[k]);
            copy_on_device(z, t->data, flat + e->offset, (size_t)t->numel * sizeof(float));
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
            rg_tensor *t = rg_shard_state_of(full, e->name, kinds[k]);
            copy_on_device(z, flat + e->offset, t->data, (size_t)t->numel * sizeof(float));
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
