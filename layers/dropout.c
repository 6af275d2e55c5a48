/* dropout.c — the Dropout layer: holds its probability and its position in a Philox stream.
 *
 * What it teaches: with a counter-based generator the whole random state of a layer is two
 * integers. The offset advances by the number of elements on every training forward, so a run is
 * reproducible and a checkpoint that saves (seed, offset) resumes with the very same masks. */
#include "ringgrad/layer.h"
#include "ringgrad/ops.h"

typedef struct {
    rg_layer base;
    float p;
    rg_rng_stream stream;
} dropout_layer;

static rg_tensor *dropout_forward(rg_layer *l, rg_tensor *x, rg_mode mode) {
    dropout_layer *d = (dropout_layer *)l;
    return rg_dropout(x, d->p, mode == RG_TRAIN, d->stream.seed, &d->stream.offset);
}

static const rg_layer_vtable dropout_vt = {.kind = "Dropout", .forward = dropout_forward};

static void check_p(const char *name, float p) {
    RG_CHECK(p >= 0.0f && p <= 1.0f, "Dropout %s: probability %g outside [0, 1]", name, (double)p);
}

rg_layer *rg_dropout_new(const char *name, float p, uint64_t seed) {
    check_p(name ? name : "", p);
    dropout_layer *d = (dropout_layer *)rg_layer_alloc(sizeof *d, &dropout_vt, name);
    d->p = p;
    d->stream = (rg_rng_stream){.seed = seed, .offset = 0};
    return &d->base;
}

rg_rng_stream *rg_dropout_stream(rg_layer *l) {
    return l && l->vt == &dropout_vt ? &((dropout_layer *)l)->stream : NULL;
}

bool rg_dropout_set_p(rg_layer *l, float p) {
    if (!l || l->vt != &dropout_vt) return false;
    check_p(l->name, p);
    ((dropout_layer *)l)->p = p;
    return true;
}

float rg_dropout_p(const rg_layer *l) {
    return l && l->vt == &dropout_vt ? ((const dropout_layer *)l)->p : -1.0f;
}
