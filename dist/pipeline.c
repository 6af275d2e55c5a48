/* pipeline.c — pipeline parallelism with the GPipe schedule (see pipeline.h).
 *
 * What it teaches: model parallelism needs only point-to-point messages at the cut, and
 * micro-batches are what keep the stages busy. For S = 2 stages and M = 4 micro-batches:
 *
 *   stage 0  F0 F1 F2 F3 .. .. .. .. B3 B2 B1 B0        F: forward, B: backward of micro-batch i
 *   stage 1  .. F0 F1 F2 F3 B3 B2 B1 B0 .. .. ..        ..: idle (the bubble)
 *
 * With equal stages each rank is busy M of M + S - 1 slots in each half: the idle fraction is
 * (S-1)/(M+S-1). Every message is a rg_comm_send/recv on the comm thread: an activation goes
 * forward as a small header (its shape) then its data; its gradient comes back with the shape the
 * sender already knows. The last stage weights each micro-batch's mean loss by b_i/B, so the sum
 * of the M backwards is the gradient of the whole batch's mean loss. */
#include "ringgrad/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/shard_state.h"
#include "ringgrad/autograd.h"
#include "ringgrad/ops.h"
#include "ringgrad/optim.h"
#include "ringgrad/scope.h"
#include "ringgrad/trace.h"

enum { TAG_SHAPE = 1, TAG_ACT, TAG_GRAD, TAG_RESULT, TAG_GATHER, TAG_STATE };

/* the comm's element type for each tensor dtype */
static const rg_comm_dtype wire[RG_DTYPE_COUNT] = {RG_COMM_F32, RG_COMM_I32, RG_COMM_I64,
                                                   RG_COMM_U8};

struct rg_pipeline {
    rg_layer *root;
    rg_comm *comm;
    int stage, stages, micro_batches;
    int first[RG_PIPELINE_MAX_STAGES + 1]; /* stage s runs children [first[s], first[s+1]) */
    rg_param_list params;                  /* this stage's; items owned, tensors borrowed */
    rg_device dev;
};

/* ---- the split ---- */

static int64_t child_params(const rg_layer *root, int i) {
    return rg_param_list_numel(&root->children[i]->params);
}

/* The split that minimises the largest stage's parameter count (dynamic programming over the
 * children); among equal splits the latest cut wins, which keeps the cheap layers that shrink an
 * activation (pooling, flatten) before the cut. */
static void balance(const rg_layer *root, int stages, int *first) {
    enum { MAXC = 256 };
    int n = root->n_children;
    static int64_t best[RG_PIPELINE_MAX_STAGES + 1][MAXC + 1];
    static int from[RG_PIPELINE_MAX_STAGES + 1][MAXC + 1];
    int64_t pre[MAXC + 1] = {0};
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + child_params(root, i);
    for (int k = 0; k <= n; k++) best[1][k] = k >= 1 ? pre[k] : INT64_MAX;
    for (int s = 2; s <= stages; s++)
        for (int k = 0; k <= n; k++) {
            best[s][k] = INT64_MAX;
            for (int j = s - 1; j < k; j++) {
                if (best[s - 1][j] == INT64_MAX) continue;
                int64_t c = pre[k] - pre[j], m = c > best[s - 1][j] ? c : best[s - 1][j];
                if (m <= best[s][k]) best[s][k] = m, from[s][k] = j;
            }
        }
    first[stages] = n;
    for (int s = stages; s >= 2; s--) first[s - 1] = from[s][first[s]];
    first[0] = 0;
}

RG_NODISCARD static rg_status make_split(rg_pipeline *p, const rg_pipeline_opts *o) {
    int n = p->root->n_children, S = p->stages;
    if (S > RG_PIPELINE_MAX_STAGES || n > 256)
        return rg_error(RG_EINVAL,
                        "pipeline: %d stages over %d layers: at most %d stages and "
                        "256 layers",
                        S, n, RG_PIPELINE_MAX_STAGES);
    if (n < S)
        return rg_error(RG_EINVAL, "pipeline: %d stages but the model has only %d layers", S, n);
    bool given = false;
    for (int s = 0; s < S - 1; s++) given |= o->split[s] != 0;
    if (!given) {
        balance(p->root, S, p->first);
        return RG_OK;
    }
    p->first[0] = 0, p->first[S] = n;
    for (int s = 1; s < S; s++) {
        p->first[s] = o->split[s - 1];
        if (p->first[s] <= p->first[s - 1] || p->first[s] >= n)
            return rg_error(RG_EINVAL,
                            "pipeline: split %d (first layer of stage %d) must be in "
                            "(%d, %d)",
                            p->first[s], s, p->first[s - 1], n);
    }
    return RG_OK;
}

/* Rank 0's parameters and buffers to every rank, and this stage's parameter list. */
RG_NODISCARD static rg_status setup_params(rg_pipeline *p) {
    const rg_param_list *all = &p->root->params;
    for (int i = 0; i < all->n; i++) {
        rg_tensor *t = all->items[i].tensor;
        if (i == 0) p->dev = t->device;
        RG_TRY(rg_comm_broadcast(p->comm, t->data, t->numel, wire[t->dtype], 0));
    }
    int n = 0;
    for (int c = p->first[p->stage]; c < p->first[p->stage + 1]; c++)
        n += p->root->children[c]->params.n;
    p->params.items = calloc(n ? (size_t)n : 1, sizeof *p->params.items);
    if (!p->params.items) return rg_error(RG_ENOMEM, "pipeline: out of memory");
    for (int c = p->first[p->stage]; c < p->first[p->stage + 1]; c++) {
        const rg_param_list *l = &p->root->children[c]->params;
        for (int i = 0; i < l->n; i++) p->params.items[p->params.n++] = l->items[i];
    }
    return RG_OK;
}

rg_pipeline *rg_pipeline_new(rg_layer *root, rg_comm *comm, const rg_pipeline_opts *opts) {
    RG_CHECK(root && comm, "rg_pipeline_new: NULL argument");
    rg_pipeline_opts o = opts ? *opts : (rg_pipeline_opts){0};
    if (o.micro_batches <= 0) o.micro_batches = 1;
    rg_pipeline *p = calloc(1, sizeof *p);
    if (!p) return rg_error(RG_ENOMEM, "pipeline: out of memory"), NULL;
    *p = (rg_pipeline){.root = root,
                       .comm = comm,
                       .stage = rg_comm_rank(comm),
                       .stages = rg_comm_size(comm),
                       .micro_batches = o.micro_batches,
                       .dev = RG_CPU};
    rg_status st = make_split(p, &o);
    if (st == RG_OK) st = setup_params(p);
    if (st != RG_OK) {
        rg_pipeline_free(p);
        return NULL;
    }
    return p;
}

void rg_pipeline_free(rg_pipeline *p) {
    if (!p) return;
    free(p->params.items);
    free(p);
}

int rg_pipeline_stage(const rg_pipeline *p) {
    return p->stage;
}
int rg_pipeline_stages(const rg_pipeline *p) {
    return p->stages;
}
int rg_pipeline_first_child(const rg_pipeline *p, int s) {
    RG_CHECK(s >= 0 && s <= p->stages, "rg_pipeline_first_child: stage %d of %d", s, p->stages);
    return p->first[s];
}
const rg_param_list *rg_pipeline_params(const rg_pipeline *p) {
    return &p->params;
}

const char *rg_pipeline_describe(const rg_pipeline *p, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int s = 0; s < p->stages && len < n; s++) {
        int64_t np = 0;
        for (int c = p->first[s]; c < p->first[s + 1]; c++) np += child_params(p->root, c);
        int w = snprintf(buf + len, n - len, "%sstage %d: %s..%s (%lld parameters)", s ? " | " : "",
                         s, p->root->children[p->first[s]]->name,
                         p->root->children[p->first[s + 1] - 1]->name, (long long)np);
        len += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* ---- one step ---- */

/* Rows [lo, lo + b) of a host tensor, on dev, in the current scope. */
static rg_tensor *rows(const rg_tensor *t, int64_t lo, int64_t b, rg_device dev) {
    int64_t shape[RG_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[0] = b;
    rg_tensor *r = rg_tensor_empty(t->dtype, t->ndim, shape, RG_CPU);
    size_t row = rg_tensor_nbytes(t) / (size_t)t->shape[0];
    memcpy(r->data, (const char *)t->data + row * (size_t)lo, row * (size_t)b);
    return dev.type == RG_DEV_CPU ? r : rg_tensor_to(r, dev);
}

/* An activation to the next stage: its shape, then its data. */
RG_NODISCARD static rg_status send_act(rg_pipeline *p, const rg_tensor *a) {
    int64_t hdr[1 + RG_MAX_DIMS] = {a->ndim};
    memcpy(hdr + 1, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    RG_TRY(rg_comm_send(p->comm, hdr, 1 + RG_MAX_DIMS, RG_COMM_I64, p->stage + 1, TAG_SHAPE));
    return rg_comm_send(p->comm, a->data, a->numel, RG_COMM_F32, p->stage + 1, TAG_ACT);
}

RG_NODISCARD static rg_status recv_act(rg_pipeline *p, rg_tensor **out) {
    int64_t hdr[1 + RG_MAX_DIMS] = {0};
    RG_TRY(rg_comm_recv(p->comm, hdr, 1 + RG_MAX_DIMS, RG_COMM_I64, p->stage - 1, TAG_SHAPE));
    if (hdr[0] < 1 || hdr[0] > RG_MAX_DIMS)
        return rg_error(RG_EMISMATCH, "pipeline: stage %d sent an activation of %lld dims",
                        p->stage - 1, (long long)hdr[0]);
    *out = rg_tensor_empty(RG_F32, (int)hdr[0], hdr + 1, p->dev);
    return rg_comm_recv(p->comm, (*out)->data, (*out)->numel, RG_COMM_F32, p->stage - 1, TAG_ACT);
}

static rg_tensor *run_stage(rg_pipeline *p, rg_tensor *a, rg_mode mode) {
    return rg_sequential_forward_range(p->root, p->first[p->stage], p->first[p->stage + 1], a,
                                       mode);
}

static void trace_mb(const char *name, int64_t t0, int i) {
    rg_trace_arg arg = {.name = "micro_batch", .value = i};
    rg_trace_complete(name, "compute", t0, rg_trace_now(), 1, &arg);
}

typedef struct {
    rg_tensor *in, *out; /* this stage's input (a leaf on stages > 0) and output (or scaled loss) */
} mb_state;

/* The M forwards; the last stage's loss and correct count go into *res. */
RG_NODISCARD static rg_status forwards(rg_pipeline *p, int M, rg_tensor *x, rg_tensor *y,
                                       rg_mode mode, mb_state *mb, double *loss, int64_t *correct) {
    int64_t B = x->shape[0], lo = 0;
    bool last = p->stage == p->stages - 1, train = mode == RG_TRAIN;
    for (int i = 0; i < M; i++) {
        int64_t b = B / M + (i < B % M);
        if (p->stage == 0)
            mb[i].in = rows(x, lo, b, p->dev);
        else {
            RG_TRY(recv_act(p, &mb[i].in));
            if (train) rg_tensor_set_requires_grad(mb[i].in, true);
        }
        int64_t t0 = rg_trace_now();
        rg_tensor *out = run_stage(p, mb[i].in, mode);
        if (last) {
            rg_tensor *yb = rows(y, lo, b, RG_CPU);
            rg_tensor *ce =
                rg_cross_entropy(out, p->dev.type == RG_DEV_CPU ? yb : rg_tensor_to(yb, p->dev));
            *loss += (double)rg_tensor_item(ce) * (double)b / (double)B;
            rg_tensor *pred = rg_tensor_to(rg_argmax(out), RG_CPU);
            const int64_t *pv = pred->data, *yv = yb->data;
            for (int64_t k = 0; k < b; k++) *correct += pv[k] == yv[k];
            out = train ? rg_scale(ce, (float)b / (float)B) : ce;
        }
        mb[i].out = out;
        trace_mb("forward", t0, i);
        if (!last) RG_TRY(send_act(p, out));
        lo += b;
    }
    return RG_OK;
}

/* The M backwards, last micro-batch first (GPipe's order: the last forward is the freshest). */
RG_NODISCARD static rg_status backwards(rg_pipeline *p, int M, mb_state *mb) {
    bool last = p->stage == p->stages - 1;
    for (int i = M - 1; i >= 0; i--) {
        if (last) {
            int64_t t0 = rg_trace_now();
            rg_backward(mb[i].out);
            trace_mb("backward", t0, i);
        } else {
            rg_tensor *dy = rg_tensor_empty_like(mb[i].out);
            RG_TRY(rg_comm_recv(p->comm, dy->data, dy->numel, RG_COMM_F32, p->stage + 1, TAG_GRAD));
            int64_t t0 = rg_trace_now();
            rg_backward_grad(mb[i].out, dy);
            trace_mb("backward", t0, i);
        }
        if (p->stage > 0) {
            rg_tensor *g = mb[i].in->grad;
            RG_CHECK(g, "pipeline: stage %d's input got no gradient", p->stage);
            RG_TRY(rg_comm_send(p->comm, g->data, g->numel, RG_COMM_F32, p->stage - 1, TAG_GRAD));
        }
    }
    return RG_OK;
}

rg_status rg_pipeline_step(rg_pipeline *p, rg_tensor *x, rg_tensor *y, rg_mode mode,
                           rg_pipeline_result *out) {
    RG_CHECK(x && y && x->device.type == RG_DEV_CPU && y->device.type == RG_DEV_CPU,
             "rg_pipeline_step: x and y must be host tensors");
    RG_CHECK(x->ndim >= 1 && y->ndim == 1 && x->shape[0] == y->shape[0] && x->shape[0] >= 1,
             "rg_pipeline_step: batch of %lld images and %lld labels",
             x->ndim ? (long long)x->shape[0] : 0LL, y->ndim ? (long long)y->shape[0] : 0LL);
    /* A batch of fewer images than micro-batches (an epoch's last) runs as one-image
     * micro-batches; every stage sees the same B, so they agree on M. */
    int M = x->shape[0] < p->micro_batches ? (int)x->shape[0] : p->micro_batches;
    mb_state *mb = calloc((size_t)M, sizeof *mb);
    if (!mb) return rg_error(RG_ENOMEM, "pipeline: out of memory");
    double loss = 0;
    int64_t correct = 0;
    if (mode != RG_TRAIN) rg_no_grad_begin();
    rg_status st = forwards(p, M, x, y, mode, mb, &loss, &correct);
    if (mode != RG_TRAIN) rg_no_grad_end();
    if (st == RG_OK && mode == RG_TRAIN) st = backwards(p, M, mb);
    free(mb);
    /* the last stage tells the others what it measured */
    int64_t r[2] = {0, correct}; /* the loss's bits in the first: one message, a nan kept */
    memcpy(&r[0], &loss, sizeof loss);
    int last = p->stages - 1;
    for (int s = 0; st == RG_OK && s < last; s++)
        st = p->stage == last ? rg_comm_send(p->comm, r, 2, RG_COMM_I64, s, TAG_RESULT)
             : p->stage == s  ? rg_comm_recv(p->comm, r, 2, RG_COMM_I64, last, TAG_RESULT)
                              : RG_OK;
    memcpy(&loss, &r[0], sizeof loss);
    if (out) *out = (rg_pipeline_result){.loss = (float)loss, .correct = r[1]};
    return st;
}

/* ---- checkpoints: every stage's part to rank 0, and back ---- */

/* t to rank 0 (stage s) or from stage s (rank 0). */
RG_NODISCARD static rg_status move(rg_pipeline *p, rg_tensor *t, int s, int tag) {
    return p->stage == 0 ? rg_comm_recv(p->comm, t->data, t->numel, wire[t->dtype], s, tag)
                         : rg_comm_send(p->comm, t->data, t->numel, wire[t->dtype], 0, tag);
}

typedef struct {
    rg_rng_stream *items[64];
    int n;
} streams;

static void collect(rg_layer *l, void *ctx) {
    streams *s = ctx;
    rg_rng_stream *r = rg_dropout_stream(l);
    if (r && s->n < 64) s->items[s->n] = r;
    s->n += r != NULL;
}

rg_status rg_pipeline_gather(rg_pipeline *p) {
    for (int s = 1; s < p->stages; s++) {
        if (p->stage != 0 && p->stage != s) continue;
        for (int c = p->first[s]; c < p->first[s + 1]; c++) {
            rg_layer *child = p->root->children[c];
            for (int i = 0; i < child->params.n; i++)
                RG_TRY(move(p, child->params.items[i].tensor, s, TAG_GATHER));
            /* the dropout streams: only the stage that runs a Dropout advances its position */
            streams st = {.n = 0};
            rg_layer_visit(child, collect, &st);
            if (st.n > 64) /* on every rank alike */
                return rg_error(RG_EINVAL, "pipeline: %s holds %d Dropout layers (at most 64)",
                                child->name, st.n);
            for (int k = 0; k < st.n; k++) {
                uint64_t v[2] = {st.items[k]->seed, st.items[k]->offset};
                RG_TRY(p->stage == 0 ? rg_comm_recv(p->comm, v, 2, RG_COMM_I64, s, TAG_GATHER)
                                     : rg_comm_send(p->comm, v, 2, RG_COMM_I64, 0, TAG_GATHER));
                st.items[k]->seed = v[0], st.items[k]->offset = v[1];
            }
        }
    }
    return RG_OK;
}

/* Whether `name` is "optim.state.<param>.<kind>", a kind having no dot. */
static bool state_of(const char *name, const char *param) {
    static const char pre[] = "optim.state.";
    size_t n = strlen(param);
    if (strncmp(name, pre, sizeof pre - 1) != 0) return false;
    name += sizeof pre - 1;
    return strncmp(name, param, n) == 0 && name[n] == '.' && !strchr(name + n + 1, '.');
}

/* The k-th state entry of `param` in o (in o's order), or NULL. */
static rg_tensor *nth_state(rg_optim *o, const char *param, int k) {
    const rg_param_list *l = rg_optim_state(o);
    for (int i = 0; i < l->n; i++)
        if (state_of(l->items[i].name, param) && k-- == 0) return l->items[i].tensor;
    return NULL;
}

/* Stage s's optimizer state between its `opt` and rank 0's `full`: copied on rank 0 for stage 0,
 * sent (gather) or received (scatter) otherwise; then the step count and learning rate. */
RG_NODISCARD static rg_status move_state(rg_pipeline *p, rg_optim *opt, rg_optim *full,
                                         bool gather) {
    RG_CHECK(opt && (p->stage != 0 || full), "pipeline: %s_state needs this stage's optimizer%s",
             gather ? "gather" : "scatter", p->stage == 0 ? " and the full one" : "");
    for (int s = 0; s < p->stages; s++) {
        if (p->stage != 0 && p->stage != s) continue;
        for (int c = p->first[s]; c < p->first[s + 1]; c++) {
            const rg_param_list *l = &p->root->children[c]->params;
            for (int i = 0; i < l->n; i++) {
                const char *name = l->items[i].name;
                for (int k = 0;; k++) {
                    rg_tensor *mine = p->stage == s ? nth_state(opt, name, k) : NULL;
                    rg_tensor *whole = p->stage == 0 ? nth_state(full, name, k) : NULL;
                    if (p->stage == s ? !mine : !whole) break;
                    if (s == 0) { /* rank 0's own stage */
                        RG_CHECK(whole && whole->numel == mine->numel,
                                 "pipeline: the full optimizer's state of %s differs from the "
                                 "stage's (another optimizer?)",
                                 name);
                        rg_tensor_copy_(gather ? whole : mine, gather ? mine : whole);
                    } else {
                        bool recv = (p->stage == 0) == gather; /* rank 0 receives a gather */
                        rg_tensor *t = p->stage == 0 ? whole : mine;
                        int peer = p->stage == 0 ? s : 0;
                        RG_TRY(recv ? rg_comm_recv(p->comm, t->data, t->numel, wire[t->dtype], peer,
                                                   TAG_STATE)
                                    : rg_comm_send(p->comm, t->data, t->numel, wire[t->dtype], peer,
                                                   TAG_STATE));
                    }
                }
            }
        }
    }
    /* the global step count and the learning rate: stage 0's into the full optimizer (gather),
     * the full optimizer's to every stage (scatter) */
    int64_t v[2] = {0, 0};
    if (p->stage == 0) rg_shard_position(gather ? opt : full, v);
    if (gather) {
        if (p->stage == 0) rg_shard_set_position(full, v);
        return RG_OK;
    }
    RG_TRY(rg_comm_broadcast(p->comm, v, 2, RG_COMM_I64, 0));
    rg_shard_set_position(opt, v);
    return RG_OK;
}

rg_status rg_pipeline_gather_state(rg_pipeline *p, rg_optim *opt, rg_optim *full) {
    return move_state(p, opt, full, true);
}

rg_status rg_pipeline_scatter_state(rg_pipeline *p, rg_optim *opt, rg_optim *full) {
    return move_state(p, opt, full, false);
}
