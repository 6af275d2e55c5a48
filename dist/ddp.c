/* ddp.c — the DDP reducer (see ddp.h).
 *
 * What it teaches: how a framework overlaps gradient communication with backward.
 *
 *   backward walks the tape in reverse:  fc2 ... fc1 ............ conv2 ............ conv1
 *   gradient-ready hooks fire:           fc2.b fc2.w fc1.b fc1.w | conv2.* conv1.*
 *   buckets (reverse parameter order):   [ bucket 0: 4.5 MiB     ][ bucket 1: 74 KiB ]
 *   comm thread:                                   allreduce 0 ............      allreduce 1
 *
 * That is the CNN's default plan (2 buckets): the first bucket closes once it passes 1 MiB, which
 * fc1.weight does, so its allreduce runs while conv2 and conv1 run backward; the rest stay
 * under the 25 MiB cap and go last.
 *
 * Each parameter's gradient is a view into its bucket's flat buffer, so when a bucket's last
 * gradient is final the buffer is ready to send as is: no copy. Buckets are launched strictly in
 * index order on every rank (a later bucket that fills first waits for the earlier ones), because
 * collectives must be issued in the same order everywhere or the ranks deadlock. */
#include "ringgrad/ddp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/bucket_plan.h"
#include "dist/comm_impl.h"
#include "dist/powersgd_impl.h"
#include "ringgrad/autograd.h"
#include "tensor/backend_impl.h"
#include "core/alloc.h"
#include "core/hash.h"

typedef struct {
    rg_tensor *param;
    const char *name;
    struct rg_ddp *ddp;
    int bucket;
    int64_t offset; /* in elements, within the bucket */
    int hook_id;
    bool ready; /* its gradient is final in this round (reset by rg_ddp_wait) */
} entry;

typedef struct {
    int first, n_params; /* entries[first .. first + n_params) */
    int64_t numel;
    float *data;      /* (numel) on the parameters' device: the gradients live here */
    uint16_t *half;   /* (numel) staging buffer for float16 compression, or NULL */
    int pending;      /* gradients not yet final in this step */
    rg_comm_req *req; /* in flight, or NULL */
} bucket;

typedef struct { /* a matrix PowerSGD compresses: not in any bucket */
    rg_tensor *param;
    rg_psgd_matrix st;
} compressed;

struct rg_ddp {
    rg_comm *comm;
    compressed *psgd; /* compress_powersgd: the matrices it takes, in registration order */
    int n_psgd;
    int64_t bytes_per_step;
    const rg_param_list *params; /* borrowed: for the buffers' broadcast */
    uint8_t *buffer_stage;       /* host buffers packed for one broadcast; NULL: none, or some on
                                    a device (then one broadcast per buffer) */
    size_t buffer_bytes;
    rg_ddp_opts opts;
    rg_device device;
    const rg_backend *be;
    entry *entries; /* trainable parameters in reverse registration order */
    int n_entries;
    bucket *buckets;
    int n_buckets;
    int next_launch; /* buckets launch in index order: the next one allowed to go */
    int micro_step;  /* backward passes since the last reduction (gradient accumulation) */
    int launched_in_backward;
};

/* ---- construction (1): every rank must have the same model and the same set-up ----
 * Before the first collective of training, the ranks allgather a fingerprint of their model and
 * of their DDP set-up. A rank that differs would issue other allreduces than the rest (a hang, a
 * "collective differs" error later, or silently wrong sums); instead every rank fails here with
 * a message naming the first tensor, or the setting, that differs. */

/* "p2.weight float32 (300) parameter", or "nothing (4 tensors in all)" past the end. */
static void describe_tensor(const rg_param_list *params, int64_t i, char *buf, size_t cap) {
    if (i >= params->n) {
        snprintf(buf, cap, "nothing (%d tensors in all)", params->n);
        return;
    }
    const rg_named_tensor *it = &params->items[i];
    char shape[128];
    snprintf(buf, cap, "%s %s %s %s", it->name, rg_dtype_name(it->tensor->dtype),
             rg_shape_str(it->tensor->ndim, it->tensor->shape, shape, sizeof shape),
             it->is_buffer                         ? "buffer"
             : rg_tensor_requires_grad(it->tensor) ? "parameter"
                                                   : "frozen");
}

static uint64_t tensor_hash(const rg_param_list *params, int i) {
    char buf[512];
    describe_tensor(params, i, buf, sizeof buf);
    return rg_fnv1a(RG_FNV1A_BASIS, buf, strlen(buf));
}

/* What the ranks compare: the model (a hash over the tensors, their count: the fields before
 * AG_BUCKETS), the set-up, and whether the buckets could be allocated. */
enum { AG_MODEL, AG_TENSORS, AG_BUCKETS, AG_PLAN, AG_ACCUM, AG_FLAGS, AG_STATUS, AG_LEN };

static void agreement(const rg_ddp *d, const rg_param_list *params, rg_status st, int64_t *a) {
    uint64_t model = RG_FNV1A_BASIS, plan = RG_FNV1A_BASIS;
    for (int i = 0; i < params->n; i++) {
        uint64_t h = tensor_hash(params, i);
        model = rg_fnv1a(model, &h, sizeof h);
    }
    for (int b = 0; b < d->n_buckets; b++)
        plan = rg_fnv1a(plan, &d->buckets[b].numel, sizeof(int64_t));
    a[AG_MODEL] = (int64_t)model, a[AG_TENSORS] = params->n, a[AG_BUCKETS] = d->n_buckets;
    a[AG_PLAN] = (int64_t)plan, a[AG_ACCUM] = d->opts.accum_steps;
    a[AG_FLAGS] = d->opts.compress_fp16 | d->opts.no_overlap << 1 | d->opts.defer_average << 2 |
                  d->opts.compress_powersgd << 3 | (int64_t)d->opts.powersgd_rank << 8;
    a[AG_STATUS] = st;
}

/* Collective, on a mismatch every rank saw: finds the first tensor where rank `bad` differs from
 * rank 0 and makes the message from both ranks' descriptions of it. */
RG_NODISCARD
static rg_status explain_model_mismatch(rg_comm *comm, const rg_param_list *params, int bad,
                                        int64_t n0) {
    int rank = rg_comm_rank(comm);
    uint64_t *h0 = rg_xcalloc((size_t)n0 + 1, sizeof *h0, "ddp: tensor hashes");
    for (int i = 0; rank == 0 && i < n0; i++) h0[i] = tensor_hash(params, i);
    int64_t k = 0;
    char mine[512], d0[512] = "", dbad[512] = "";
    rg_status st = rg_comm_broadcast(comm, h0, n0, RG_COMM_I64, 0);
    if (rank == bad)
        while (k < n0 && k < params->n && tensor_hash(params, (int)k) == h0[k]) k++;
    if (st == RG_OK) st = rg_comm_broadcast(comm, &k, 1, RG_COMM_I64, bad);
    describe_tensor(params, k, mine, sizeof mine);
    if (rank == 0) memcpy(d0, mine, sizeof d0);
    if (rank == bad) memcpy(dbad, mine, sizeof dbad);
    if (st == RG_OK) st = rg_comm_broadcast(comm, d0, sizeof d0, RG_COMM_U8, 0);
    if (st == RG_OK) st = rg_comm_broadcast(comm, dbad, sizeof dbad, RG_COMM_U8, bad);
    free(h0);
    if (st != RG_OK) return st;
    return rg_error(RG_EMISMATCH,
                    "ddp: the model on rank %d differs from rank 0's at tensor %" PRId64
                    ": rank 0 has %s, rank %d has %s; every rank must build the same model (names, "
                    "dtypes, shapes, and which tensors train); this is rank %d",
                    bad, k, d0, bad, dbad, rank);
}

static void describe_setup(const int64_t *a, char *buf, size_t cap) {
    snprintf(buf, cap,
             "%" PRId64 " bucket(s), accum_steps %" PRId64
             ", fp16 %s, overlap %s, defer_average %s, powersgd rank %" PRId64,
             a[AG_BUCKETS], a[AG_ACCUM], a[AG_FLAGS] & 1 ? "on" : "off",
             a[AG_FLAGS] & 2 ? "off" : "on", a[AG_FLAGS] & 4 ? "on" : "off",
             a[AG_FLAGS] & 8 ? a[AG_FLAGS] >> 8 : 0);
}

/* Collective: every rank fails alike when one rank's set-up failed (`mine`, with its message)
 * or differs from rank 0's. */
RG_NODISCARD
static rg_status check_same_everywhere(rg_ddp *d, const rg_param_list *params, rg_status mine_st) {
    int size = rg_comm_size(d->comm), rank = rg_comm_rank(d->comm), bad = -1, failed = -1;
    int64_t mine[AG_LEN], *all = rg_xcalloc((size_t)size * AG_LEN, sizeof *all, "ddp: set-up agreement");
    agreement(d, params, mine_st, mine);
    rg_status st = rg_comm_allgather(d->comm, mine, all, AG_LEN, RG_COMM_I64);
    for (int r = 0; st == RG_OK && r < size; r++) {
        if (all[AG_LEN * r + AG_STATUS] != RG_OK && failed < 0) failed = r;
        if (memcmp(&all[AG_LEN * r], all, AG_STATUS * sizeof *all) != 0 && bad < 0) bad = r;
    }
    if (mine_st != RG_OK) {
        st = mine_st; /* its own message stands */
    } else if (failed >= 0) {
        st = rg_error(RG_EPEER,
                      "ddp: rank %d could not allocate its gradient buckets; this is "
                      "rank %d",
                      failed, rank);
    } else if (bad >= 0 && memcmp(&all[AG_LEN * bad], all, AG_BUCKETS * sizeof *all) != 0) {
        st = explain_model_mismatch(d->comm, params, bad, all[AG_TENSORS]);
    } else if (bad >= 0) {
        char s0[160], sb[160];
        describe_setup(all, s0, sizeof s0);
        describe_setup(&all[AG_LEN * bad], sb, sizeof sb);
        st = rg_error(RG_EMISMATCH,
                      "ddp: rank %d sets up DDP differently from rank 0: rank 0 has %s; "
                      "rank %d has %s%s; give every rank the same bucket_mb, first_bucket_mb, "
                      "accum_steps, compressions, no_overlap and defer_average; this is rank %d",
                      bad, s0, bad, sb,
                      all[AG_BUCKETS] == all[AG_LEN * bad + AG_BUCKETS] &&
                              all[AG_PLAN] != all[AG_LEN * bad + AG_PLAN]
                          ? " (other bucket sizes)"
                          : "",
                      rank);
    }
    free(all);
    return st;
}

/* ---- construction (2): rank 0's values everywhere; the buckets ---- */

static rg_comm_dtype comm_dtype(rg_dtype dt) {
    switch (dt) {
    case RG_F32:
        return RG_COMM_F32;
    case RG_I32:
        return RG_COMM_I32;
    case RG_I64:
        return RG_COMM_I64;
    default:
        return RG_COMM_U8;
    }
}

RG_NODISCARD static rg_status broadcast_from_rank0(rg_comm *comm, const rg_param_list *params) {
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        int64_t count =
            t->numel * (comm_dtype(t->dtype) == RG_COMM_U8 ? (int64_t)rg_dtype_size(t->dtype) : 1);
        RG_TRY(rg_comm_broadcast(comm, t->data, count, comm_dtype(t->dtype), 0));
    }
    return RG_OK;
}

/* Assigns parameters (in reverse order) to buckets (dist/bucket_plan.h). */
static int plan_buckets(rg_ddp *d) {
    rg_bucket_plan plan = {
        .first_mb = d->opts.first_bucket_mb, .mb = d->opts.bucket_mb, .one = d->opts.no_overlap};
    for (int i = 0; i < d->n_entries; i++) {
        entry *e = &d->entries[i];
        e->bucket = rg_bucket_plan_next(&plan, e->param->numel, &e->offset);
        bucket *bk = &d->buckets[e->bucket];
        if (bk->n_params++ == 0) bk->first = i;
        bk->numel = e->offset + e->param->numel;
    }
    return plan.n_buckets;
}

static void on_grad_ready(rg_tensor *param, void *ctx);

/* Allocates each bucket's buffer. */
RG_NODISCARD static rg_status alloc_buckets(rg_ddp *d) {
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        size_t bytes = (size_t)bk->numel * sizeof(float);
        bk->data = d->be->alloc(bytes);
        if (!bk->data)
            return rg_error(RG_ENOMEM, "ddp: out of memory for bucket %d (%zu bytes)", b, bytes);
        d->be->memset0(bk->data, bytes);
        if (d->opts.compress_fp16) {
            bk->half = d->be->alloc((size_t)bk->numel * sizeof(uint16_t));
            if (!bk->half) return rg_error(RG_ENOMEM, "ddp: out of memory for bucket %d", b);
        }
        bk->pending = bk->n_params;
    }
    return RG_OK;
}

/* Points the parameters' gradients into their buckets and hooks them. */
static void attach_buckets(rg_ddp *d) {
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
}

static rg_ddp_opts defaults(const rg_ddp_opts *o) {
    rg_ddp_opts r = o ? *o : (rg_ddp_opts){0};
    rg_bucket_plan_defaults(&r.bucket_mb, &r.first_bucket_mb);
    RG_CHECK(r.accum_steps >= 0 && r.powersgd_rank >= 0,
             "ddp: accum_steps %d, powersgd_rank %d: 1 or more (or 0 for the defaults)",
             r.accum_steps, r.powersgd_rank);
    if (r.accum_steps <= 0) r.accum_steps = 1;
    if (r.powersgd_rank <= 0) r.powersgd_rank = 4;
    RG_CHECK(!(r.compress_fp16 && r.compress_powersgd), "ddp: choose fp16 or PowerSGD, not both");
    /* both send averages: float16 sums must stay in range, PowerSGD's Q is averaged */
    if (r.compress_fp16 || r.compress_powersgd) r.defer_average = false;
    return r;
}

/* The state of every matrix PowerSGD takes, in registration order (the same on every rank), each
 * with its own seed for Q's first values. */
RG_NODISCARD static rg_status init_psgd(rg_ddp *d, const rg_param_list *params) {
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t) ||
            !rg_psgd_worth(t->ndim, t->shape, d->opts.powersgd_rank))
            continue;
        compressed *c = &d->psgd[d->n_psgd++];
        c->param = t;
        if (!rg_psgd_init(&c->st, t->shape[0], t->numel / t->shape[0], d->opts.powersgd_rank,
                          0x5eed0000u + (uint64_t)i))
            return rg_error(RG_ENOMEM, "ddp: out of memory for PowerSGD's state of %s",
                            params->items[i].name);
    }
    return RG_OK;
}

static void plan_buffer_broadcast(rg_ddp *d);

rg_ddp *rg_ddp_new(const rg_param_list *params, rg_comm *comm, const rg_ddp_opts *opts) {
    RG_CHECK(params && comm, "rg_ddp_new: NULL parameters or communicator");
    rg_ddp *d = rg_xcalloc(1, sizeof *d, "rg_ddp_new: the reducer");
    d->comm = comm;
    d->params = params;
    plan_buffer_broadcast(d);
    d->opts = defaults(opts);
    d->entries = rg_xcalloc((size_t)params->n + 1, sizeof *d->entries, "rg_ddp_new: its entries");
    d->buckets = rg_xcalloc((size_t)params->n + 1, sizeof *d->buckets, "rg_ddp_new: its buckets");
    d->psgd = rg_xcalloc((size_t)params->n + 1, sizeof *d->psgd, "rg_ddp_new: PowerSGD's list");
    for (int i = params->n - 1; i >= 0; i--) { /* reverse registration order */
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        RG_CHECK(t->dtype == RG_F32, "ddp: parameter %s is not float32", params->items[i].name);
        if (d->n_entries == 0) d->device = t->device;
        RG_CHECK(rg_device_eq(t->device, d->device),
                 "ddp: parameters on different devices "
                 "(%s); move the whole model to one device first",
                 params->items[i].name);
        if (d->opts.compress_powersgd && rg_psgd_worth(t->ndim, t->shape, d->opts.powersgd_rank)) {
            RG_CHECK(t->device.type == RG_DEV_CPU,
                     "ddp: PowerSGD compresses host gradients only; %s is on a GPU",
                     params->items[i].name);
            continue; /* compressed after backward (rg_ddp_wait), not bucketed */
        }
        d->entries[d->n_entries++] = (entry){.param = t, .name = params->items[i].name};
    }
    rg_status psgd_st = d->opts.compress_powersgd ? init_psgd(d, params) : RG_OK;
    d->be = rg_backend_for(d->n_entries ? d->device : RG_CPU);
    d->n_buckets = plan_buckets(d);
    if (check_same_everywhere(d, params, psgd_st != RG_OK ? psgd_st : alloc_buckets(d)) != RG_OK ||
        broadcast_from_rank0(comm, params) != RG_OK) {
        rg_ddp_free(d);
        return NULL;
    }
    attach_buckets(d);
    return d;
}

/* ---- BatchNorm under data parallelism ---- */

/* The buffers' bytes, and a staging area to broadcast them in one call when all are on the
 * host (a ResNet has three per BatchNorm: dozens of small broadcasts per step otherwise). */
static void plan_buffer_broadcast(rg_ddp *d) {
    bool host = true;
    for (int i = 0; i < d->params->n; i++) {
        const rg_named_tensor *p = &d->params->items[i];
        if (!p->is_buffer) continue;
        d->buffer_bytes += rg_tensor_nbytes(p->tensor);
        host &= p->tensor->device.type == RG_DEV_CPU;
    }
    if (host && d->buffer_bytes)
        d->buffer_stage = rg_xmalloc(d->buffer_bytes, "ddp: the buffers' broadcast staging");
}

rg_status rg_ddp_broadcast_buffers(rg_ddp *d) {
    if (rg_comm_size(d->comm) == 1 || d->buffer_bytes == 0) return RG_OK;
    bool root = rg_comm_rank(d->comm) == 0;
    if (d->buffer_stage) { /* pack on rank 0, one broadcast, unpack elsewhere */
        size_t at = 0;
        for (int i = 0; root && i < d->params->n; i++) {
            rg_tensor *t = d->params->items[i].tensor;
            if (!d->params->items[i].is_buffer) continue;
            memcpy(d->buffer_stage + at, t->data, rg_tensor_nbytes(t)), at += rg_tensor_nbytes(t);
        }
        RG_TRY(rg_comm_broadcast(d->comm, d->buffer_stage, (int64_t)d->buffer_bytes, RG_COMM_U8, 0));
        at = 0;
        for (int i = 0; !root && i < d->params->n; i++) {
            rg_tensor *t = d->params->items[i].tensor;
            if (!d->params->items[i].is_buffer) continue;
            memcpy(t->data, d->buffer_stage + at, rg_tensor_nbytes(t)), at += rg_tensor_nbytes(t);
        }
        return RG_OK;
    }
    for (int i = 0; i < d->params->n; i++) { /* device buffers: the comm stages each itself */
        if (!d->params->items[i].is_buffer) continue;
        rg_tensor *t = d->params->items[i].tensor;
        int64_t count =
            t->numel * (comm_dtype(t->dtype) == RG_COMM_U8 ? (int64_t)rg_dtype_size(t->dtype) : 1);
        RG_TRY(rg_comm_broadcast(d->comm, t->data, count, comm_dtype(t->dtype), 0));
    }
    return RG_OK;
}

static rg_status sync_bn_allreduce(void *ctx, float *buf, int64_t n, rg_device dev) {
    (void)dev; /* the comm takes host and device buffers alike */
    return rg_comm_allreduce(ctx, buf, n, RG_COMM_F32, RG_REDUCE_SUM);
}

rg_bn_sync rg_ddp_sync_bn_hook(rg_comm *comm) {
    RG_CHECK(comm, "rg_ddp_sync_bn_hook: NULL communicator");
    return (rg_bn_sync){.allreduce_sum = sync_bn_allreduce, .ctx = comm};
}

/* ---- the step: hooks launch buckets in order; wait finishes and averages ---- */

/* `waited`: launched by rg_ddp_wait, which waits for it next, so it need not wake the comm
 * thread (dist/comm_thread.c); a hook's launch does, to reduce the bucket during backward. */
static void launch(rg_ddp *d, int b, bool waited) {
    bucket *bk = &d->buckets[b];
    rg_status st;
    if (d->opts.compress_fp16) {
        d->be->f32_to_f16(bk->numel, bk->data, bk->half);
        st = rg_comm_allreduce_launch(d->comm, bk->half, bk->numel, RG_COMM_F16, RG_REDUCE_AVG,
                                      waited, &bk->req);
    } else {
        st = rg_comm_allreduce_launch(d->comm, bk->data, bk->numel, RG_COMM_F32,
                                      d->opts.defer_average ? RG_REDUCE_SUM : RG_REDUCE_AVG,
                                      waited, &bk->req);
    }
    /* Enqueueing only fails if the communicator is already broken; wait reports it. */
    if (st != RG_OK) bk->req = NULL;
}

static void launch_ready_in_order(rg_ddp *d) {
    while (d->next_launch < d->n_buckets && d->buckets[d->next_launch].pending == 0)
        launch(d, d->next_launch++, false);
}

/* A gradient final twice in one round means its bucket may already be on the wire with the
 * old values and this rank's collectives would fall out of step with the other ranks': stop. */
static void on_grad_ready(rg_tensor *param, void *ctx) {
    entry *e = ctx;
    rg_ddp *d = e->ddp;
    if (d->micro_step + 1 < d->opts.accum_steps) return;    /* accumulating locally */
    if (d->opts.no_overlap || d->opts.no_allreduce) return; /* rg_ddp_wait does it all */
    RG_CHECK(!e->ready,
             "ddp: %s: its gradient was final twice before rg_ddp_wait (a second "
             "rg_backward in one step, or the backward of another model in the same step scope: "
             "a backward fires the hooks of every parameter its scope used); call rg_ddp_wait "
             "after each rg_backward, and give each model's backward its own step scope",
             e->name);
    e->ready = true;
    if (--d->buckets[e->bucket].pending == 0) launch_ready_in_order(d);
}

float rg_ddp_grad_scale(const rg_ddp *d) {
    return d->opts.defer_average ? 1.0f / (float)rg_comm_size(d->comm) : 1.0f;
}

/* PowerSGD over every compressed matrix, one after the other, after the buckets. */
RG_NODISCARD static rg_status reduce_compressed(rg_ddp *d) {
    int64_t floats = 0;
    for (int i = 0; i < d->n_psgd; i++) {
        rg_tensor *p = d->psgd[i].param;
        if (!p->grad) { /* unused in this backward: it contributes zeros */
            p->grad = rg_tensor_new(RG_F32, p->ndim, p->shape, p->device);
            if (!p->grad) return rg_error(RG_ENOMEM, "ddp: out of memory for a gradient");
            rg_tensor_fill_(p->grad, 0.0f);
        }
        RG_TRY(rg_psgd_reduce(&d->psgd[i].st, p->grad->data, d->comm, &floats));
    }
    d->bytes_per_step += floats * 4;
    return RG_OK;
}

int64_t rg_ddp_bytes_per_step(const rg_ddp *d) {
    return d->bytes_per_step;
}

int rg_ddp_num_compressed(const rg_ddp *d) {
    return d->n_psgd;
}

bool rg_ddp_will_sync(const rg_ddp *d) {
    return d->micro_step + 1 >= d->opts.accum_steps;
}

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
    while (d->next_launch < d->n_buckets) launch(d, d->next_launch++, true); /* unused params */
    rg_status st = RG_OK;
    for (int b = 0; b < d->n_buckets; b++) {
        bucket *bk = &d->buckets[b];
        rg_status s = bk->req ? rg_comm_wait(bk->req)
                              : rg_error(RG_EPEER,
                                         "ddp: bucket %d "
                                         "could not be sent",
                                         b);
        bk->req = NULL;
        if (s != RG_OK && st == RG_OK) st = s;
        if (s == RG_OK && d->opts.compress_fp16) d->be->f16_to_f32(bk->numel, bk->half, bk->data);
        bk->pending = bk->n_params;
    }
    for (int i = 0; i < d->n_entries; i++) d->entries[i].ready = false;
    d->next_launch = 0;
    d->micro_step = 0;
    int64_t floats = 0;
    for (int b = 0; b < d->n_buckets; b++) floats += d->buckets[b].numel;
    d->bytes_per_step = floats * (d->opts.compress_fp16 ? 2 : 4);
    if (st == RG_OK) st = reduce_compressed(d);
    return st;
}

/* ---- queries and teardown ---- */

int rg_ddp_num_buckets(const rg_ddp *d) {
    return d->n_buckets;
}
int rg_ddp_bucket_params(const rg_ddp *d, int i) {
    return d->buckets[i].n_params;
}
size_t rg_ddp_bucket_bytes(const rg_ddp *d, int i) {
    return (size_t)d->buckets[i].numel * sizeof(float);
}
int rg_ddp_launched_during_backward(const rg_ddp *d) {
    return d->launched_in_backward;
}
int rg_ddp_num_launched(const rg_ddp *d) {
    return d->next_launch;
}

void rg_ddp_free(rg_ddp *d) {
    if (!d) return;
    /* Buckets launched but never waited for: the comm thread may still write into them. */
    for (int b = 0; b < d->n_buckets; b++)
        if (d->buckets[b].req) RG_IGNORE(rg_comm_wait(d->buckets[b].req)); /* a free cannot fail */
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
    for (int i = 0; i < d->n_psgd; i++) rg_psgd_free(&d->psgd[i].st);
    free(d->psgd);
    free(d->buffer_stage);
    free(d->entries);
    free(d->buckets);
    free(d);
}
