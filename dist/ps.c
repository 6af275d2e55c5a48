/* ps.c — parameter servers (see ps.h): the last K ranks hold the weights and the optimizer, the
 * first W ranks compute gradients, and nothing is allreduced.
 *
 *   flat weights (padded to K equal shards; a tensor may straddle two, as in zero1.c):
 *     [ shard 0 -> server 0 (rank W) | shard 1 -> server 1 (rank W+1) | ... ]
 *   worker w, per step, for s = 0..K-1:
 *       send  gflat[s] + header {w, step, GRAD, flags}  -> rank W+s   (tag PUSH)
 *       recv  wflat[s] + the server's flags             <- rank W+s   (tag PULL)
 *   worker w, at the end of its period (an epoch, or a stop):
 *       send  header {w, step, END, flags}               -> every server (tag PUSH)
 *   server s, sync:  recv workers 0..W-1 in order, sum, one optimizer step (scale 1/W), send all;
 *                    until a round of W ENDs
 *   server s, async: recv from any worker, one optimizer step on that gradient (scale 1/W), then
 *                    answer every waiting worker that is at most S steps ahead of the slowest
 *                    worker still running; until every worker's END
 *
 * Stopping (a signal, a non-finite loss): the flags travel in-band. A worker's flags go to every
 * server with its push; a server ORs what it receives and returns it with every pull, so within
 * a step (sync) or a few (async) every worker sees them and ends its period early. No extra
 * message per step, and async workers are never lined up by a collective.
 *
 * Deadlock: a worker talks to one server at a time and always pulls right after it pushed, so a
 * server's send only ever goes to a worker blocked in the matching recv; a server's recv waits for
 * any worker, and the slowest worker is never held back (its lead over the slowest is 0). */
#include "ringgrad/ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/shard_state.h"
#include "ringgrad/trace.h"
#include "ringgrad/tensor.h"

enum { TAG_PUSH = 1100, TAG_PULL = 1101, TAG_STATE = 1102 };
/* a push's header, after the shard: the worker, its step, what it is, the worker's flags */
enum { H_WORKER, H_STEP, H_KIND, H_FLAGS, HDR };
enum { KIND_GRAD, KIND_END };

typedef struct {
    rg_tensor *param;
    const char *name;
    int64_t offset;
} pentry;

struct rg_ps {
    rg_comm *comm;
    rg_ps_opts opts;
    int rank, size, workers, index;
    bool server;
    pentry *entries;
    int n_entries;
    int64_t numel, shard; /* shard = ceil(numel / K) */
    /* worker */
    float *gflat, *wflat; /* (K * shard): gradients (params' grads are views), weights */
    float *sendbuf;       /* (shard + HDR) */
    int64_t step; /* steps taken (a worker's pushes; a sync server's rounds), from rg_ps_set_step */
    /* server */
    float *wshard, *gsum, *tmp; /* (shard), (shard + HDR), (shard + HDR) */
    rg_named_tensor *views;
    int n_views;
    rg_optim *optim;
    char *optim_name, *optim_options; /* as given, for checkpoints' buffer kinds */
    int64_t *done; /* (W) gradients applied per worker in this rg_ps_serve */
    bool *waiting; /* (W) pushed, pull not yet answered */
    bool *ended;   /* (W) sent END in this rg_ps_serve */
    float *stash;  /* (W x (shard + HDR)), made when needed: a push of the next period that came */
    bool *stashed; /* (W)   from a worker already ended in this one, kept for the next call */
    int flags;     /* OR of the flags received in this rg_ps_serve */
    int64_t *hist; /* (S + 1) */
};

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    RG_CHECK(p, "ps: out of host memory");
    return p;
}

/* The server's pieces of the parameters that overlap its shard [lo, hi): views into wshard with
 * grads into gsum, named after their parameters. */
RG_NODISCARD static rg_status make_views(rg_ps *ps) {
    int64_t lo = (int64_t)ps->index * ps->shard, hi = lo + ps->shard;
    ps->views = xcalloc((size_t)ps->n_entries + 1, sizeof *ps->views);
    for (int i = 0; i < ps->n_entries; i++) {
        const pentry *e = &ps->entries[i];
        int64_t a = e->offset > lo ? e->offset : lo;
        int64_t b = e->offset + e->param->numel < hi ? e->offset + e->param->numel : hi;
        if (a >= b) continue;
        int64_t len = b - a;
        rg_tensor *w = rg_tensor_wrap(RG_F32, 1, &len, RG_CPU, ps->wshard + (a - lo));
        if (!w) return rg_error(RG_ENOMEM, "ps: out of host memory");
        w->grad = rg_tensor_wrap(RG_F32, 1, &len, RG_CPU, ps->gsum + (a - lo));
        if (!w->grad) return rg_tensor_free(w), rg_error(RG_ENOMEM, "ps: out of host memory");
        rg_tensor_set_requires_grad(w, true);
        ps->views[ps->n_views++] = (rg_named_tensor){.name = e->name, .tensor = w};
        memcpy(ps->wshard + (a - lo), (float *)e->param->data + (a - e->offset),
               (size_t)len * sizeof(float));
    }
    return RG_OK;
}

/* Worker: gradients become views into gflat; weights copied into wflat. */
static void attach(rg_ps *ps) {
    for (int i = 0; i < ps->n_entries; i++) {
        pentry *e = &ps->entries[i];
        rg_tensor *p = e->param;
        rg_tensor *view = rg_tensor_wrap(RG_F32, p->ndim, p->shape, RG_CPU, ps->gflat + e->offset);
        RG_CHECK(view, "ps: %s", rg_last_error());
        if (p->grad) rg_tensor_copy_(view, p->grad);
        rg_tensor_free(p->grad);
        p->grad = view;
        memcpy(ps->wflat + e->offset, p->data, (size_t)p->numel * sizeof(float));
    }
}

RG_NODISCARD static rg_status agree(rg_ps *ps, rg_status mine) {
    int64_t me = mine, *all = xcalloc((size_t)ps->size, sizeof *all);
    rg_status st = rg_comm_allgather(ps->comm, &me, all, 1, RG_COMM_I64);
    for (int r = 0; st == RG_OK && r < ps->size; r++)
        if (all[r] != RG_OK && mine == RG_OK)
            st = rg_error(RG_EPEER, "ps: rank %d could not set up; this is rank %d", r, ps->rank);
    free(all);
    return st == RG_OK ? mine : st;
}

RG_NODISCARD static rg_status check_opts(const rg_ps *ps, rg_comm *comm) {
    if (rg_comm_kind(comm) == RG_COMM_NCCL)
        return rg_error(RG_ENOTSUP, "parameter servers need the mpi or ring comm (point-to-point "
                                    "from any worker); nccl has no receive-from-any");
    if (ps->size < 2)
        return rg_error(RG_EINVAL,
                        "parameter servers need 2 or more ranks (at least one server "
                        "and one worker); this job has %d",
                        ps->size);
    if (ps->opts.servers < 1 || ps->opts.servers >= ps->size)
        return rg_error(RG_EINVAL, "--servers %d: need 1 <= K < %d ranks (the rest are workers)",
                        ps->opts.servers, ps->size);
    if (ps->opts.max_staleness < 0)
        return rg_error(RG_EINVAL, "--max-staleness %d: must be >= 0", ps->opts.max_staleness);
    if (ps->opts.save_every < 0 || (ps->opts.save_every && ps->opts.mode != RG_PS_SYNC))
        return rg_error(RG_EINVAL,
                        "ps: save_every %lld: must be >= 0, and 0 in async mode (no "
                        "step boundary the servers share)",
                        (long long)ps->opts.save_every);
    return RG_OK;
}

rg_ps *rg_ps_new(const rg_param_list *params, rg_comm *comm, const char *optim, const char *options,
                 const rg_ps_opts *opts) {
    RG_CHECK(params && comm && optim && opts, "rg_ps_new: NULL argument");
    rg_ps *ps = xcalloc(1, sizeof *ps);
    ps->comm = comm, ps->opts = *opts;
    ps->optim_name = strdup(optim), ps->optim_options = strdup(options ? options : "");
    RG_CHECK(ps->optim_name && ps->optim_options, "rg_ps_new: out of host memory");
    if (ps->opts.mode == RG_PS_SYNC) ps->opts.max_staleness = 0;
    ps->rank = rg_comm_rank(comm), ps->size = rg_comm_size(comm);
    rg_status st = check_opts(ps, comm);
    int K = st == RG_OK ? ps->opts.servers : 1;
    ps->workers = ps->size - K;
    ps->server = ps->rank >= ps->workers;
    ps->index = ps->server ? ps->rank - ps->workers : ps->rank;
    ps->entries = xcalloc((size_t)params->n + 1, sizeof *ps->entries);
    for (int i = 0; i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        if (params->items[i].is_buffer || !rg_tensor_requires_grad(t)) continue;
        if (st == RG_OK && (t->dtype != RG_F32 || t->device.type != RG_DEV_CPU))
            st = rg_error(RG_ENOTSUP,
                          "ps: parameter %s is not float32 on the CPU (the parameter "
                          "servers work on host memory)",
                          params->items[i].name);
        ps->entries[ps->n_entries++] =
            (pentry){.param = t, .name = params->items[i].name, .offset = ps->numel};
        ps->numel += t->numel;
    }
    ps->shard = (ps->numel + K - 1) / K;
    if (ps->shard == 0) ps->shard = 1;
    st = agree(ps, st);
    /* rank 0's parameters and buffers everywhere (as rg_ddp_new) */
    for (int i = 0; st == RG_OK && i < params->n; i++) {
        rg_tensor *t = params->items[i].tensor;
        st = rg_comm_broadcast(comm, t->data, (int64_t)rg_tensor_nbytes(t), RG_COMM_U8, 0);
    }
    rg_status mine = RG_OK;
    if (st == RG_OK && ps->server) {
        ps->wshard = xcalloc((size_t)ps->shard + 1, sizeof(float)); /* + the flags, for pulls */
        ps->gsum = xcalloc((size_t)ps->shard + HDR, sizeof(float));
        ps->tmp = xcalloc((size_t)ps->shard + HDR, sizeof(float));
        ps->done = xcalloc((size_t)ps->workers, sizeof *ps->done);
        ps->waiting = xcalloc((size_t)ps->workers, sizeof *ps->waiting);
        ps->ended = xcalloc((size_t)ps->workers, sizeof *ps->ended);
        ps->hist = xcalloc((size_t)ps->opts.max_staleness + 1, sizeof *ps->hist);
        mine = make_views(ps);
        if (mine == RG_OK) {
            rg_param_list list = {ps->views, ps->n_views};
            ps->optim = rg_optim_new(optim, &list, options);
            if (!ps->optim) mine = RG_EINVAL; /* its message stands */
        }
        /* the gradient is a sum of W (sync) or one worker's (async): the 1/W as the grad scale */
        if (mine == RG_OK) rg_optim_set_grad_scale(ps->optim, 1.0f / (float)ps->workers);
    } else if (st == RG_OK) {
        ps->gflat = xcalloc((size_t)(ps->shard * K), sizeof(float));
        /* + 1: a pull of shard s brings the server's flags in the float after the shard */
        ps->wflat = xcalloc((size_t)(ps->shard * K) + 1, sizeof(float));
        ps->sendbuf = xcalloc((size_t)ps->shard + HDR, sizeof(float));
        attach(ps);
    }
    if (st == RG_OK) st = agree(ps, mine);
    if (st != RG_OK) {
        rg_ps_free(ps);
        return NULL;
    }
    return ps;
}

bool rg_ps_is_server(const rg_ps *ps) {
    return ps->server;
}
int rg_ps_workers(const rg_ps *ps) {
    return ps->workers;
}
int rg_ps_index(const rg_ps *ps) {
    return ps->index;
}
rg_optim *rg_ps_optim(rg_ps *ps) {
    return ps->optim;
}
size_t rg_ps_state_bytes(const rg_ps *ps) {
    return ps->optim ? rg_optim_state_bytes(ps->optim) : 0;
}
int64_t rg_ps_bytes_per_step(const rg_ps *ps) {
    return 2 * ps->shard * ps->opts.servers * (int64_t)sizeof(float);
}

/* The header of a push from this worker. */
static void header(rg_ps *ps, int kind, int flags) {
    float *h = ps->sendbuf + ps->shard;
    h[H_WORKER] = (float)ps->index, h[H_STEP] = (float)ps->step;
    h[H_KIND] = (float)kind, h[H_FLAGS] = (float)flags;
}

rg_status rg_ps_push_pull(rg_ps *ps, int flags, int *seen) {
    RG_CHECK(!ps->server, "rg_ps_push_pull: rank %d is a server", ps->rank);
    RG_CHECK(flags >= 0 && flags < (1 << 24), "rg_ps_push_pull: flags %d", flags);
    int any = 0;
    for (int s = 0; s < ps->opts.servers; s++) {
        memcpy(ps->sendbuf, ps->gflat + s * ps->shard, (size_t)ps->shard * sizeof(float));
        header(ps, KIND_GRAD, flags);
        int peer = ps->workers + s;
        RG_TRY(rg_comm_send(ps->comm, ps->sendbuf, ps->shard + HDR, RG_COMM_F32, peer, TAG_PUSH));
        /* the shard, then the server's flags over the next shard's first float (or the spare
         * one after the last shard): read before the next pull overwrites it */
        float *w = ps->wflat + s * ps->shard;
        RG_TRY(rg_comm_recv(ps->comm, w, ps->shard + 1, RG_COMM_F32, peer, TAG_PULL));
        any |= (int)w[ps->shard];
    }
    ps->step++;
    for (int i = 0; i < ps->n_entries; i++) {
        const pentry *e = &ps->entries[i];
        memcpy(e->param->data, ps->wflat + e->offset, (size_t)e->param->numel * sizeof(float));
    }
    memset(ps->gflat, 0, (size_t)(ps->shard * ps->opts.servers) * sizeof(float));
    if (seen) *seen = any;
    return RG_OK;
}

rg_status rg_ps_end(rg_ps *ps, int flags) {
    RG_CHECK(!ps->server, "rg_ps_end: rank %d is a server", ps->rank);
    header(ps, KIND_END, flags);
    for (int s = 0; s < ps->opts.servers; s++) /* a whole push's size: one message shape */
        RG_TRY(rg_comm_send(ps->comm, ps->sendbuf, ps->shard + HDR, RG_COMM_F32, ps->workers + s,
                            TAG_PUSH));
    return RG_OK;
}

/* One optimizer step on gsum, marked in the timeline with the worker and the staleness. */
static void apply(rg_ps *ps, int worker, int64_t staleness) {
    int64_t t0 = rg_trace_now();
    rg_optim_step(ps->optim);
    if (rg_trace_enabled()) {
        rg_trace_arg args[2] = {{"worker", worker}, {"staleness", staleness}};
        rg_trace_complete("ps_apply", "compute", t0, rg_trace_now(), 2, args);
    }
}

RG_NODISCARD static rg_status pull_to(rg_ps *ps, int worker) {
    ps->wshard[ps->shard] = (float)ps->flags; /* every flag received so far, to every worker */
    return rg_comm_send(ps->comm, ps->wshard, ps->shard + 1, RG_COMM_F32, worker, TAG_PULL);
}

RG_NODISCARD static rg_status move_state(rg_ps *ps, rg_optim *full, bool gather);

RG_NODISCARD static rg_status serve_sync(rg_ps *ps, int64_t *steps) {
    int64_t n = ps->shard;
    for (;;) {
        int ended = 0;
        for (int w = 0; w < ps->workers; w++) { /* in worker order: the same sum as DDP's */
            float *buf = w == 0 ? ps->gsum : ps->tmp;
            RG_TRY(rg_comm_recv(ps->comm, buf, n + HDR, RG_COMM_F32, w, TAG_PUSH));
            ps->flags |= (int)buf[n + H_FLAGS];
            if ((int)buf[n + H_KIND] == KIND_END)
                ended++;
            else if (w > 0)
                for (int64_t i = 0; i < n; i++) ps->gsum[i] += ps->tmp[i];
        }
        if (ended == ps->workers) return RG_OK;
        if (ended) /* sync workers end together: the same steps, the same flags */
            return rg_error(RG_EPEER,
                            "ps-sync: %d of %d workers ended after %lld steps while "
                            "the others pushed gradients",
                            ended, ps->workers, (long long)*steps);
        apply(ps, -1, 0);
        ps->hist[0] += ps->workers;
        (*steps)++;
        for (int w = 0; w < ps->workers; w++) RG_TRY(pull_to(ps, w));
        /* a periodic checkpoint: rank 0 gathers after this step, the other workers go on */
        ps->step++;
        if (ps->opts.save_every && ps->step % ps->opts.save_every == 0)
            RG_TRY(move_state(ps, NULL, true));
    }
}

/* The fewest steps applied among the workers still running (INT64_MAX when none is). */
static int64_t slowest(const rg_ps *ps) {
    int64_t m = INT64_MAX;
    for (int w = 0; w < ps->workers; w++)
        if (!ps->ended[w] && ps->done[w] < m) m = ps->done[w];
    return m;
}

/* Answers every waiting worker within the staleness bound of the slowest one still running. */
RG_NODISCARD static rg_status release(rg_ps *ps) {
    int64_t low = slowest(ps);
    for (int v = 0; v < ps->workers; v++)
        if (ps->waiting[v] && (low == INT64_MAX || ps->done[v] - low <= ps->opts.max_staleness)) {
            ps->waiting[v] = false;
            RG_TRY(pull_to(ps, v));
        }
    return RG_OK;
}

/* One push in gsum (a gradient or an END) from a running worker. */
RG_NODISCARD static rg_status take(rg_ps *ps, int *left, int64_t *steps) {
    const float *h = ps->gsum + ps->shard;
    int w = (int)h[H_WORKER], S = ps->opts.max_staleness;
    ps->flags |= (int)h[H_FLAGS];
    if ((int)h[H_KIND] == KIND_END) { /* no longer the slowest: release who waited on it */
        ps->ended[w] = true, (*left)--;
        if (ps->done[w] > *steps) *steps = ps->done[w];
        return release(ps);
    }
    int64_t stale = ps->done[w] - slowest(ps);
    apply(ps, w, stale);
    ps->hist[stale < 0 ? 0 : stale > S ? S : stale]++;
    ps->done[w]++;
    ps->waiting[w] = true;
    return release(ps);
}

RG_NODISCARD static rg_status serve_async(rg_ps *ps, int64_t *steps) {
    int left = ps->workers;
    size_t msg = (size_t)(ps->shard + HDR);
    memset(ps->done, 0, (size_t)ps->workers * sizeof *ps->done);
    memset(ps->ended, 0, (size_t)ps->workers * sizeof *ps->ended);
    for (int w = 0; ps->stash && w < ps->workers; w++) /* this period's first pushes, kept */
        if (ps->stashed[w]) {
            ps->stashed[w] = false;
            memcpy(ps->gsum, ps->stash + (size_t)w * msg, msg * sizeof(float));
            RG_TRY(take(ps, &left, steps));
        }
    while (left > 0) {
        RG_TRY(rg_comm_recv(ps->comm, ps->gsum, ps->shard + HDR, RG_COMM_F32, RG_COMM_ANY_SOURCE,
                            TAG_PUSH));
        int w = (int)ps->gsum[ps->shard + H_WORKER];
        if (w < 0 || w >= ps->workers || ps->waiting[w] || (ps->stash && ps->stashed[w]))
            return rg_error(RG_EPEER, "ps-async: a push from worker %d out of turn", w);
        if (ps->ended[w]) { /* it began the next period while others finish this one */
            if (!ps->stash) {
                ps->stash = xcalloc((size_t)ps->workers * msg, sizeof(float));
                ps->stashed = xcalloc((size_t)ps->workers, sizeof *ps->stashed);
            }
            memcpy(ps->stash + (size_t)w * msg, ps->gsum, msg * sizeof(float));
            ps->stashed[w] = true;
            continue;
        }
        RG_TRY(take(ps, &left, steps));
    }
    return RG_OK;
}

rg_status rg_ps_serve(rg_ps *ps, int *flags, int64_t *steps) {
    RG_CHECK(ps->server, "rg_ps_serve: rank %d is a worker", ps->rank);
    int64_t n = 0;
    ps->flags = 0;
    rg_status st = ps->opts.mode == RG_PS_SYNC ? serve_sync(ps, &n) : serve_async(ps, &n);
    if (flags) *flags = ps->flags;
    if (steps) *steps = n;
    return st;
}

/* ---- checkpoints: the servers' shards to rank 0 and back ----
 *
 * A checkpoint holds what one process's optimizer would: every parameter's weights and state
 * buffers in full. The servers hold both, in shards; rank 0 (a worker) gathers them, kind by kind,
 * into a flat buffer laid out as the workers' (server s's shard at s * shard), then into its
 * parameters and the full optimizer; the scatter is the reverse. The other workers take no part. */

/* Server: its shard's buffer `kind` (NULL: the weights) into buf, or from it. */
static void shard_io(rg_ps *ps, const char *kind, float *buf, bool to_buf) {
    if (!kind) {
        memcpy(to_buf ? buf : ps->wshard, to_buf ? ps->wshard : buf,
               (size_t)ps->shard * sizeof(float));
        return;
    }
    for (int i = 0; i < ps->n_views; i++) {
        rg_tensor *v = ps->views[i].tensor;
        float *st = rg_tensor_f32(rg_shard_state_of(ps->optim, ps->views[i].name, kind));
        float *at = buf + ((float *)v->data - ps->wshard);
        memcpy(to_buf ? at : st, to_buf ? st : at, (size_t)v->numel * sizeof(float));
    }
}

/* Rank 0: flat (the workers' layout) into its parameters (kind NULL) or full's buffers `kind`,
 * or from them. */
static void flat_io(rg_ps *ps, rg_optim *full, const char *kind, float *flat, bool to_flat) {
    for (int i = 0; i < ps->n_entries; i++) {
        const pentry *e = &ps->entries[i];
        float *t =
            kind ? rg_tensor_f32(rg_shard_state_of(full, e->name, kind)) : (float *)e->param->data;
        size_t bytes = (size_t)e->param->numel * sizeof(float);
        memcpy(to_flat ? flat + e->offset : t, to_flat ? t : flat + e->offset, bytes);
    }
}

/* One kind (NULL: the weights) between the servers and rank 0's flat buffer. */
RG_NODISCARD static rg_status move_kind(rg_ps *ps, const char *kind, float *flat, bool gather) {
    int K = ps->opts.servers;
    for (int s = 0; s < K; s++) {
        float *piece = flat + (int64_t)s * ps->shard;
        int server = ps->workers + s;
        if (ps->rank == 0)
            RG_TRY(gather
                       ? rg_comm_recv(ps->comm, piece, ps->shard, RG_COMM_F32, server, TAG_STATE)
                       : rg_comm_send(ps->comm, piece, ps->shard, RG_COMM_F32, server, TAG_STATE));
        else if (ps->rank == server && gather) {
            shard_io(ps, kind, ps->tmp, true);
            RG_TRY(rg_comm_send(ps->comm, ps->tmp, ps->shard, RG_COMM_F32, 0, TAG_STATE));
        } else if (ps->rank == server) {
            RG_TRY(rg_comm_recv(ps->comm, ps->tmp, ps->shard, RG_COMM_F32, 0, TAG_STATE));
            shard_io(ps, kind, ps->tmp, false);
        }
    }
    return RG_OK;
}

/* Both ways: the weights, then each kind of state buffer, then the step count and learning
 * rate (server 0's to rank 0, or rank 0's to every server). */
RG_NODISCARD static rg_status move_state(rg_ps *ps, rg_optim *full, bool gather) {
    RG_CHECK(ps->rank != 0 || full, "rg_ps_%s_state: rank 0 needs the full optimizer",
             gather ? "gather" : "scatter");
    if (ps->rank != 0 && !ps->server) return RG_OK; /* the other workers hold nothing */
    char kinds[RG_SHARD_MAX_KINDS][32];
    int nk = 0;
    RG_TRY(rg_shard_kinds(ps->optim_name, ps->optim_options, kinds, &nk));
    float *flat = ps->rank == 0 ? ps->wflat : NULL; /* K x shard (+ 1), free between steps */
    rg_status st = RG_OK;
    for (int k = -1; st == RG_OK && k < nk; k++) {
        const char *kind = k < 0 ? NULL : kinds[k];
        if (flat && !gather) flat_io(ps, full, kind, flat, true);
        st = move_kind(ps, kind, flat, gather);
        if (st == RG_OK && flat && gather) flat_io(ps, full, kind, flat, false);
    }
    int64_t v[2];
    rg_shard_position(ps->server ? ps->optim : full, v);
    int server0 = ps->workers;
    for (int s = 0; st == RG_OK && s < ps->opts.servers; s++) {
        int server = ps->workers + s;
        if (gather && s == 0 && (ps->rank == 0 || ps->rank == server0))
            st = ps->rank == 0 ? rg_comm_recv(ps->comm, v, 2, RG_COMM_I64, server0, TAG_STATE)
                               : rg_comm_send(ps->comm, v, 2, RG_COMM_I64, 0, TAG_STATE);
        if (!gather && (ps->rank == 0 || ps->rank == server))
            st = ps->rank == 0 ? rg_comm_send(ps->comm, v, 2, RG_COMM_I64, server, TAG_STATE)
                               : rg_comm_recv(ps->comm, v, 2, RG_COMM_I64, 0, TAG_STATE);
    }
    if (st != RG_OK) return st;
    rg_optim *o = gather ? full : ps->optim;
    if (o) rg_shard_set_position(o, v);
    return RG_OK;
}

void rg_ps_set_step(rg_ps *ps, int64_t step) {
    ps->step = step;
}

rg_status rg_ps_gather_state(rg_ps *ps, rg_optim *full) {
    return move_state(ps, full, true);
}

rg_status rg_ps_scatter_state(rg_ps *ps, rg_optim *full) {
    return move_state(ps, full, false);
}

rg_status rg_ps_staleness_hist(rg_ps *ps, int64_t *hist, int n) {
    RG_CHECK(n == ps->opts.max_staleness + 1, "rg_ps_staleness_hist: %d bins, want %d", n,
             ps->opts.max_staleness + 1);
    for (int i = 0; i < n; i++) hist[i] = ps->hist ? ps->hist[i] : 0;
    return rg_comm_allreduce(ps->comm, hist, n, RG_COMM_I64, RG_REDUCE_SUM);
}

void rg_ps_free(rg_ps *ps) {
    if (!ps) return;
    for (int i = 0; ps->gflat && i < ps->n_entries; i++) { /* ordinary gradients again */
        rg_tensor *p = ps->entries[i].param;
        if (!p->grad || (p->grad->flags & RG_TENSOR_OWNS_DATA)) continue;
        rg_tensor *g = rg_tensor_new(RG_F32, p->ndim, p->shape, p->device);
        RG_CHECK(g, "rg_ps_free: %s", rg_last_error());
        rg_tensor_copy_(g, p->grad);
        rg_tensor_free(p->grad);
        p->grad = g;
    }
    rg_optim_free(ps->optim);
    for (int i = 0; i < ps->n_views; i++) rg_tensor_free(ps->views[i].tensor);
    free(ps->views);
    free(ps->gflat), free(ps->wflat), free(ps->sendbuf);
    free(ps->wshard), free(ps->gsum), free(ps->tmp);
    free(ps->done), free(ps->waiting), free(ps->ended), free(ps->hist), free(ps->entries);
    free(ps->stash), free(ps->stashed);
    free(ps->optim_name), free(ps->optim_options);
    free(ps);
}
