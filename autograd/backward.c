/* backward.c — reverse-mode differentiation: walk the tape backwards once.
 *
 * Before the walk, mark the ops that lead to the loss, and count for each leaf (parameter) how
 * many of them consume it. During the walk, each processed node decrements its leaves' counts; a
 * count reaching zero means no later (in reverse: earlier) op can add to that gradient any more,
 * so the gradient is final and the parameter's gradient-ready hooks fire: exactly once per
 * backward, and only for parameters the loss depends on. This is the moment data parallelism
 * hooks into.
 *
 * The counts belong to one backward, so they live in a small hash table in the scope arena, not
 * in the tensors: nothing of a backward outlives it. */
#include "autograd/autograd_impl.h"

#include "ringgrad/trace.h"

#include "tensor/scope_impl.h"

/* Pending consumers per leaf: open addressing on the tensor's address, a power-of-two size at
 * least twice the number of (node, input) pairs, so probes stay short. */
typedef struct {
    const rg_tensor *key;
    int64_t pending;
} leaf_count;

typedef struct {
    leaf_count *slots;
    uint64_t mask;
} leaf_table;

static leaf_count *leaf_slot(leaf_table *t, const rg_tensor *x) {
    uint64_t h = (uint64_t)(uintptr_t)x * UINT64_C(0x9E3779B97F4A7C15);
    for (uint64_t i = h >> 32;; i++) {
        leaf_count *s = &t->slots[i & t->mask];
        if (s->key == x || !s->key) return s->key = x, s;
    }
}

static bool is_leaf_param(const rg_tensor *t) { return rg_needs_grad(t) && !t->grad_fn; }

/* x's gradient is final: fire its hooks. Should a consumer's backward have produced no gradient
 * for x, hooks (a DDP reducer reading it) still get a real one: zero. */
static void grad_ready(rg_tensor *x) {
    if (!rg_grad_hooks_any(x)) return;
    if (!x->grad) {
        rg_grad_begin(x);
        rg_tensor_zero_(x->grad);
    }
    rg_grad_hooks_fire(x);
}

/* Marks which ops lead to the loss (node `last`): the loss's own, and every op whose result feeds
 * one that does. Ops that do not (another model's forward, an accuracy computed on the side) are
 * skipped, so their parameters' hooks do not fire in this backward. */
static bool *mark_live(rg_node **nodes, int64_t last) {
    bool *live = rg_scope_alloc((size_t)last + 1);
    live[last] = true;
    for (int64_t i = last; i >= 0; i--) {
        rg_node *n = nodes[i];
        n->out->grad = NULL; /* op results get fresh gradients on every backward */
        for (int j = 0; live[i] && j < n->n_in; j++) {
            const rg_node *src = n->in[j] ? n->in[j]->grad_fn : NULL;
            if (src && src->index < i && nodes[src->index] == src) live[src->index] = true;
        }
    }
    return live;
}

/* Counts, for every leaf parameter, the live nodes that consume it. */
static leaf_table count_leaves(rg_node **nodes, int64_t last, const bool *live) {
    int64_t edges = 0;
    for (int64_t i = 0; i <= last; i++) edges += live[i] ? nodes[i]->n_in : 0;
    uint64_t size = 16;
    while (size < 2 * (uint64_t)edges) size *= 2;
    leaf_table t = {rg_scope_alloc(size * sizeof(leaf_count)), size - 1};
    for (int64_t i = 0; i <= last; i++)
        for (int j = 0; live[i] && j < nodes[i]->n_in; j++)
            if (is_leaf_param(nodes[i]->in[j])) leaf_slot(&t, nodes[i]->in[j])->pending++;
    return t;
}

/* The tape index of y's node, after checking that y can be differentiated from this scope.
 * `what` and `noun` name the caller and y in messages ("backward", "loss"). */
static int64_t node_of(const char *what, const char *noun, const rg_tensor *y, rg_node ***nodes) {
    RG_CHECK(y->grad_fn, "%s: the %s does not depend on anything that requires a gradient "
                         "(or it was computed in no-grad mode)", what, noun);
    int64_t n_nodes;
    *nodes = rg_tape_nodes(&n_nodes);
    int64_t last = y->grad_fn->index;
    RG_CHECK(last < n_nodes && (*nodes)[last] == y->grad_fn,
             "%s: the %s was computed in another step scope", what, noun);
    return last;
}

/* Seeds y's gradient with dy and walks the tape back from y. */
static void run_backward(rg_tensor *y, const rg_tensor *dy, rg_node **nodes, int64_t last) {
    bool *live = mark_live(nodes, last);
    leaf_table leaves = count_leaves(nodes, last, live);
    y->grad = rg_tensor_empty_like(y);
    rg_tensor_copy_(y->grad, dy);
    const bool trace = rg_trace_ops_enabled(); /* each op's backward as a timeline event */
    for (int64_t i = last; i >= 0; i--) {
        rg_node *n = nodes[i];
        if (!live[i]) continue;
        if (n->out->grad) {
            int64_t t0 = trace ? rg_trace_now() : 0;
            n->backward(n);
            if (trace) rg_trace_complete(n->op, "backward op", t0, rg_trace_now(), 0, NULL);
        }
        for (int j = 0; j < n->n_in; j++) {
            rg_tensor *x = n->in[j];
            if (is_leaf_param(x) && --leaf_slot(&leaves, x)->pending == 0) grad_ready(x);
        }
    }
}

void rg_backward(rg_tensor *loss) {
    RG_CHECK(loss, "backward: NULL loss");
    RG_CHECK(loss->dtype == RG_F32 && loss->numel == 1,
             "backward: loss must be one float32 element, got %lld elements of %s",
             (long long)loss->numel, rg_dtype_name(loss->dtype));
    rg_node **nodes;
    int64_t last = node_of("backward", "loss", loss, &nodes);
    rg_tensor *one = rg_tensor_empty_like(loss);
    rg_tensor_fill_(one, 1.0f);
    run_backward(loss, one, nodes, last);
}

void rg_backward_grad(rg_tensor *y, const rg_tensor *dy) {
    RG_CHECK(y && dy, "rg_backward_grad: NULL argument");
    RG_CHECK(y->dtype == RG_F32 && dy->dtype == RG_F32 && rg_tensor_same_shape(y, dy) &&
                 rg_device_eq(y->device, dy->device),
             "rg_backward_grad: the gradient must match the output in shape, dtype and device");
    rg_node **nodes;
    int64_t last = node_of("rg_backward_grad", "output", y, &nodes);
    run_backward(y, dy, nodes, last);
}

void rg_zero_grad(rg_tensor *t) {
    if (t && t->grad) rg_tensor_zero_(t->grad);
}
