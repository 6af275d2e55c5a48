/* model.c — a model is a root layer plus what a training job needs around it: a name for
 * checkpoints and --model, the seed, and the list of random streams that a checkpoint saves. */
#include "models/zoo_impl.h"
#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rg_model {
    char *name;
    uint64_t seed;
    rg_layer *root;
    rg_named_stream *streams; /* one per Dropout, in forward order */
    int n_streams;
    int64_t bn_plane; /* rg_model_bn_plane */
};

static void collect_stream(rg_layer *l, void *ctx) {
    rg_model *m = ctx;
    rg_rng_stream *s = rg_dropout_stream(l);
    if (!s) return;
    rg_named_stream *ns = rg_xrealloc(m->streams, (size_t)(m->n_streams + 1) * sizeof *ns, "model: its streams");
    m->streams = ns;
    m->streams[m->n_streams++] = (rg_named_stream){.name = l->name, .stream = s};
}

rg_model *rg_model_new(const char *name, rg_layer *root, uint64_t seed) {
    RG_CHECK(name && root, "rg_model_new: NULL name or root layer");
    rg_model *m = rg_xcalloc(1, sizeof *m, "rg_model_new: the model");
    char *nm = rg_xmalloc(strlen(name) + 1, "rg_model_new: its name");
    m->name = strcpy(nm, name);
    m->seed = seed;
    m->root = root;
    rg_layer_visit(root, collect_stream, m);
    return m;
}

void rg_model_free(rg_model *m) {
    if (!m) return;
    rg_layer_free(m->root);
    free(m->streams);
    free(m->name);
    free(m);
}

rg_tensor *rg_model_forward(rg_model *m, rg_tensor *x, rg_mode mode) {
    RG_CHECK(m, "rg_model_forward: NULL model");
    return rg_layer_forward(m->root, x, mode);
}

const rg_param_list *rg_model_params(const rg_model *m) {
    return rg_layer_params(m->root);
}

static void set_dropout(rg_layer *l, void *ctx) {
    rg_dropout_set_p(l, *(float *)ctx);
}

void rg_model_set_dropout(rg_model *m, float p) {
    RG_CHECK(p >= 0.0f && p <= 1.0f, "model %s: dropout %g outside [0, 1]", m->name, (double)p);
    rg_layer_visit(m->root, set_dropout, &p);
}

const rg_named_stream *rg_model_streams(const rg_model *m, int *n) {
    *n = m->n_streams;
    return m->streams;
}

rg_status rg_model_to_device(rg_model *m, rg_device dev) {
    return rg_param_list_to_device(rg_model_params(m), dev);
}

const char *rg_model_name(const rg_model *m) {
    return m->name;
}
uint64_t rg_model_seed(const rg_model *m) {
    return m->seed;
}
rg_layer *rg_model_root(rg_model *m) {
    return m->root;
}
int64_t rg_model_bn_plane(const rg_model *m) {
    return m->bn_plane;
}

/* ---- the registry behind --model ---- */

static const struct {
    const char *name;
    rg_zoo_build_fn build;
    rg_zoo_bn_plane_fn bn_plane; /* NULL: no BatchNorm2d */
} known_models[] = {
    {"cnn", rg_zoo_cnn, NULL},
    {"mlp", rg_zoo_mlp, NULL},
    {"resnet18", rg_zoo_resnet18, rg_zoo_resnet_bn_plane},
    {"resnet34", rg_zoo_resnet34, rg_zoo_resnet_bn_plane},
    {"resnet50", rg_zoo_resnet50, rg_zoo_resnet_bn_plane},
    {"resnet20", rg_zoo_resnet20, rg_zoo_resnet_cifar_bn_plane},
    {"resnet56", rg_zoo_resnet56, rg_zoo_resnet_cifar_bn_plane},
};
enum { NUM_KNOWN = sizeof known_models / sizeof known_models[0] };

const char *rg_model_known_name(int i) {
    return i >= 0 && i < NUM_KNOWN ? known_models[i].name : NULL;
}

rg_status rg_model_new_for(const char *name, uint64_t seed, const rg_model_spec *spec,
                           rg_model **out) {
    RG_CHECK(out, "rg_model_new_for: NULL out");
    *out = NULL;
    rg_model_spec s = spec ? *spec : (rg_model_spec){0};
    if (!spec) s.channels = 1, s.height = 28, s.width = 28, s.num_classes = 10;
    const char *nm = name ? name : "(null)";
    if (s.channels <= 0 || s.height <= 0 || s.width <= 0 || s.num_classes <= 0)
        return rg_error(RG_EINVAL, "model %s: bad data shape %lldx%lldx%lld with %d classes", nm,
                        (long long)s.channels, (long long)s.height, (long long)s.width,
                        s.num_classes);
    for (int i = 0; i < NUM_KNOWN; i++) {
        if (!name || strcmp(name, known_models[i].name) != 0) continue;
        rg_layer *root = NULL;
        RG_TRY(known_models[i].build(&s, seed, &root));
        *out = rg_model_new(name, root, seed);
        if (known_models[i].bn_plane) (*out)->bn_plane = known_models[i].bn_plane(&s);
        return RG_OK;
    }
    char known[256] = "";
    for (int i = 0; i < NUM_KNOWN; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 known_models[i].name);
    return rg_error(RG_EINVAL, "unknown model '%s' (known: %s)", nm, known);
}

rg_model *rg_model_new_by_name(const char *name, uint64_t seed) {
    rg_model *m = NULL;
    rg_status st = rg_model_new_for(name, seed, NULL, &m);
    return st == RG_OK ? m : NULL;
}
