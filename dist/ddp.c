/* ddp.c — the DDP reducer (see ddp.h).
 *
 * What it teaches: how a framework overlaps gradient communication with backward.
 *
 *   backward walks the tape in reverse:  fc2 ... fc1 ... conv2 ... conv1
 *   gradient-ready hooks fire:           fc2.b fc2.w | fc1.b fc1.w | conv2.* conv1.*
 *   buckets (reverse parameter order):   [ bucket 0 ][ bucket 1     ][ bucket 2      ]
 *   comm thread:                              allreduce 0   allreduce 1    allreduce 2
 *
 * Each parameter's gradient is a view into its bucket's flat buffer, so when a bucket's last
 * gradient is final the buffer is ready to send as is: no copy. Buckets are launched strictly in
 * index order on every rank (a later bucket that fills first waits for the earlier ones), because
 * collectives must be issued in the same order everywhere or the ranks deadlock. */
#include "dist/ddp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/hooks.h"
#include "tensor/backend.h"

typedef struct {
    rg_tensor *param;
    struct rg_ddp *ddp;
    int bucket;
    int64_t offset; /* in elements, within the bucket */
    int hook_id;
} entry;

typedef struct {
    int first, n_params;  /* entries[first .. first + n_params) */
    int64_t numel;
    float *data;          /* (numel) on the parameters' device: the gradients live here */
    uint16_t *half;       /* (numel) staging buffer for float16 compression, or NULL */
    int pending;          /* gradients not yet final in this step */
    rg_comm_req *req;     /* in flight, or NULL */
} bucket;

struct rg_ddp {
    rg_comm *comm;
    rg_ddp_opts opts;
    rg_device device;
    const rg_backend *be;
    entry *entries; /* trainable parameters in reverse registration order */
    int n_entries;
    bucket *buckets;
    int n_buckets;
    int next_launch;   /* buckets launch in index order: the next one allowed to go */
    int micro_step;    /* backward passes since the last reduction (gradient accumulation) */
    int launched_in_backward;
};

/* ---- construction: fingerprint, broadcast, buckets ---- */

static rg_comm_dtype comm_dtype(rg_dtype dt) {
    switch (dt) {
    case RG_F32: return RG_COMM_F32;
    case RG_I32: return RG_COMM_I32;
    case RG_I64: return RG_COMM_I64;
    default: return RG_COMM_U8;
    }
}

/* FNV-1a over every tensor's name, dtype and shape. */
static uint64_t fingerprint(const rg_param_list *params, int64_t *total_numel) {
    uint64_t h = 1469598103934665603ull;
    *total_numel = 0;
    for (int i = 0; i < params->n; i++) {
        const rg_tensor *t = params->items[i].tensor;
        char buf[256];
        int n = snprintf(buf, sizeof buf, "%s:%d:%d", params->items[i].name, (int)t->dtype, t->ndim);
        for (int d = 0; d < t->ndim && n < (int)sizeof buf - 24; d++)
            n += snprintf(buf + n, sizeof buf - (size_t)n, ",%" PRId64, t->shape[d]);
        for (int j = 0; j < n && j < (int)sizeof buf; j++) h = (h ^ (unsigned char)buf[j]) * 1099511628211ull;
        *total_numel += t->numel;
    }
    return h;
}

static rg_status check_same_model(rg_comm *comm, const rg_param_list *params) {
    int size = rg_comm_size(comm), rank = rg_comm_rank(comm);
    int64_t mine[3], *all = calloc((size_t)size * 3, sizeof *all);
    if (!all) return rg_error(RG_ENOMEM, "ddp: out of host memory");
    mine[0] = (int64_t)fingerprint(params, &mine[2]);
    mine[1] = params->n;
    rg_status st = rg_comm_allgather(comm, mine, all, 3, RG_COMM_I64);
    for (int r = 1; st == RG_OK && r < size; r++) {
        if (memcmp(&all[3 * r], &all[0], 3 * sizeof *all) == 0) continue;
        st = rg_error(RG_EMISMATCH, "ddp: rank %d has a different model from rank 0 (%" PRId64
                      " tensors, %" PRId64 " elements, fingerprint %016" PRIx64 " vs %" PRId64
                      " tensors, %" PRId64 " elements, fingerprint %016" PRIx64 "); this is rank %d. "
                      "Every rank must build the same model with the same names and shapes.",
                      r, all[3 * r + 1], all[3 * r + 2], (uint64_t)all[3 * r], all[1], all[2],
                      (uint64_t)all[0], rank);
    }
    free(all);
    return st;
}

static rg_status broadcast_from_rank0(rg_comm *comm, const rg_param_list *params) {
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        int64_t count = t->numel * (comm_dtype(t->dtype) == RG_COMM_U8 ? (int64_t)rg_dtype_size(t->dtype) : 1);
        RG_TRY(rg_comm_broadcast(comm, t->data, count, comm_dtype(t->dtype), 0));
    }
    return RG_OK;
}

/* Assigns parameters (in reverse order) to buckets: the first holds up to first_bucket_mb, the
 * others up to bucket_mb; a parameter larger than the cap gets a bucket of its own. */
static int plan_buckets(rg_ddp *d) {
    int nb = -1;
    int64_t used = 0, cap = 0; /* bytes */
    for (int i = 0; i < d->n_entries; i++) {
        int64_t bytes = d->entries[i].param->numel * (int64_t)sizeof(float);
        if (nb < 0 || (used > 0 && used + bytes > cap)) {
            nb++;
            used = 0;
            cap = (int64_t)((nb == 0 ? d->opts.first_bucket_mb : d->opts.bucket_mb) * 1048576.0);
            if (d->opts.no_overlap) cap = INT64_MAX;
            d->buckets[nb].first = i;
        }
        d->entries[i].bucket = nb;
        d->entries[i].offset = used / (int64_t)sizeof(float);
        d->buckets[nb].n_params++;
        used += bytes;
        d->buckets[nb].numel = used / (int64_t)sizeof(float);
    }
    return nb + 1;
}

static void on_grad_ready(rg_tensor *param, void *ctx);

/* Allocates each bucket's buffer and points the parameters' gradients into it. */
static rg_status build_buckets(rg_ddp *d) {
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        size_t bytes = (size_t)bk->numel * sizeof(float);
        bk->data = d->be->alloc(bytes);
        if (!bk->data) return rg_error(RG_ENOMEM, "ddp: out of memory for bucket %d (%zu bytes)", b, bytes);
        d->be->memset0(bk->data, bytes);
        if (d->opts.compress_fp16) {
            bk->half = d->be->alloc((size_t)bk->numel * sizeof(uint16_t));
            if (!bk->half) return rg_error(RG_ENOMEM, "ddp: out of memory for bucket %d", b);
        }
        bk->pending = bk->n_params;
    }
    for (int i = 0; i < d->n_entries; i++) {
        entry *e = &d->entries[i];
        rg_tensor *p = e->param;
        rg_tensor *view = rg_tensor_wrap(RG_F32, p->ndim, p->shape, p->device,
                                         d->buckets[e->bucket].data + e->offset);
        if (p->grad) rg_tensor_copy_(view, p->grad); /* keep an accumulated gradient */
        rg_tensor_free(p->grad);
        p->grad = view;
        e->ddp = d;
        e->hook_id = rg_grad_hook_add(p, on_grad_ready, e);
    }
    return RG_OK;
}

static rg_ddp_opts defaults(const rg_ddp_opts *o) {
    rg_ddp_opts r = o ? *o : (rg_ddp_opts){0};
    if (r.bucket_mb <= 0) r.bucket_mb = 25;
    if (r.first_bucket_mb <= 0) r.first_bucket_mb = r.bucket_mb < 1 ? r.bucket_mb : 1;
    if (r.accum_steps <= 0) r.accum_steps = 1;
    return r;
}

rg_ddp *rg_ddp_new(const rg_param_list *params, rg_comm *comm, const rg_ddp_opts *opts) {
    RG_CHECK(params && comm, "rg_ddp_new: NULL parameters or communicator");
    if (check_same_model(comm, params) != RG_OK) return NULL;
    if (broadcast_from_rank0(comm, params) != RG_OK) return NULL;

    rg_ddp *d = calloc(1, sizeof *d);
    RG_CHECK(d, "rg_ddp_new: out of host memory");
    d->comm = comm;
    d->opts = defaults(opts);
    d->entries = calloc((size_t)params->n + 1, sizeof *d->entries);
    d->buckets = calloc((size_t)params->n + 1, sizeof *d->buckets);
    RG_CHECK(d->entries && d->buckets, "rg_ddp_new: out of host memory");
    for (int i = params->n - 1; i >= 0; i--) { /* reverse registration order */
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        RG_CHECK(t->dtype == RG_F32, "ddp: parameter %s is not float32", params->items[i].name);
        if (d->n_entries == 0) d->device = t->device;
        RG_CHECK(rg_device_eq(t->device, d->device), "ddp: parameters on different devices "
                 "(%s); move the whole model to one device first", params->items[i].name);
        d->entries[d->n_entries++].param = t;
    }
    d->be = rg_backend_for(d->n_entries ? d->device : RG_CPU);
    d->n_buckets = plan_buckets(d);
    if (build_buckets(d) != RG_OK) {
        rg_ddp_free(d);
        return NULL;
    }
    return d;
}

/* ---- the step: hooks launch buckets in order; wait finishes and averages ---- */

static void launch(rg_ddp *d, int b) {
    bucket *bk = &d->buckets[b];
    rg_status st;
    if (d->opts.compress_fp16) {
        d->be->f32_to_f16(bk->numel, bk->data, bk->half);
        st = rg_comm_allreduce_async(d->comm, bk->half, bk->numel, RG_COMM_F16, RG_REDUCE_AVG, &bk->req);
    } else {
        st = rg_comm_allreduce_async(d->comm, bk->data, bk->numel, RG_COMM_F32, RG_REDUCE_AVG, &bk->req);
    }
    /* Enqueueing only fails if the communicator is already broken; wait reports it. */
    if (st != RG_OK) bk->req = NULL;
}

static void launch_ready_in_order(rg_ddp *d) {
    while (d->next_launch < d->n_buckets && d->buckets[d->next_launch].pending == 0)
        launch(d, d->next_launch++);
}

static void on_grad_ready(rg_tensor *param, void *ctx) {
    entry *e = ctx;
    rg_ddp *d = e->ddp;
    if (d->micro_step + 1 < d->opts.accum_steps) return; /* accumulating locally */
    if (d->opts.no_overlap || d->opts.no_allreduce) return; /* rg_ddp_wait does it all */
    if (--d->buckets[e->bucket].pending == 0) launch_ready_in_order(d);
}

bool rg_ddp_will_sync(const rg_ddp *d) { return d->micro_step + 1 >= d->opts.accum_steps; }

rg_status rg_ddp_wait(rg_ddp *d) {
    if (!rg_ddp_will_sync(d)) {
        d->micro_step++;
        return RG_OK;
    }
    d->launched_in_backward = d->next_launch;
    if (d->opts.no_allreduce) {
        d->micro_step = 0;
        return rg_comm_barrier(d->comm);
    }
    while (d->next_launch < d->n_buckets) launch(d, d->next_launch++); /* unused parameters */
    rg_status st = RG_OK;
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        rg_status s = bk->req ? rg_comm_wait(bk->req) : rg_error(RG_EPEER, "ddp: bucket %d "
                                                                 "could not be sent", b);
        bk->req = NULL;
        if (s != RG_OK && st == RG_OK) st = s;
        if (s == RG_OK && d->opts.compress_fp16) d->be->f16_to_f32(bk->numel, bk->half, bk->data);
        bk->pending = bk->n_params;
    }
    d->next_launch = 0;
    d->micro_step = 0;
    return st;
}

/* ---- queries and teardown ---- */

int rg_ddp_num_buckets(const rg_ddp *d) { return d->n_buckets; }
int rg_ddp_bucket_params(const rg_ddp *d, int i) { return d->buckets[i].n_params; }
size_t rg_ddp_bucket_bytes(const rg_ddp *d, int i) { return (size_t)d->buckets[i].numel * sizeof(float); }
int rg_ddp_launched_during_backward(const rg_ddp *d) { return d->launched_in_backward; }
int rg_ddp_num_launched(const rg_ddp *d) { return d->next_launch; }

void rg_ddp_free(rg_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->n_entries; i++) {
        entry *e = &d->entries[i];
        if (!e->ddp) continue; /* never attached */
        rg_tensor *p = e->param, *g = rg_tensor_new(RG_F32, p->ndim, p->shape, p->device);
        RG_CHECK(g, "rg_ddp_free: %s", rg_last_error());
        rg_tensor_copy_(g, p->grad);
        rg_tensor_free(p->grad); /* the view: frees the header, not the bucket */
        p->grad = g;
        rg_grad_hook_remove(p, e->hook_id);
    }
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        if (bk->data) d->be->free(bk->data, (size_t)bk->numel * sizeof(float));
        if (bk->half) d->be->free(bk->half, (size_t)bk->numel * sizeof(uint16_t));
    }
    free(d->entries);
    free(d->buckets);
    free(d);
}
