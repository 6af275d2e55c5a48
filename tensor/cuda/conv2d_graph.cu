/* conv2d_graph.cu — one direction of a convolution through cuDNN's graph (backend) API.
 *
 * Why a second API: the legacy calls in conv2d.cu give each algorithm one fixed configuration,
 * and cudnnFind times those. cuDNN's graph API describes the same convolution as a graph of one
 * operation and lists engine configurations for it (an engine plus its knob settings: tile
 * sizes, split-K, ...), many of them out of the legacy API's reach; PyTorch 2 builds its
 * convolutions this way and times the configurations (torch.backends.cudnn.benchmark). On the
 * H200 that ran ResNet-50's weight gradients in 8.7 ms of kernels a step against 12-14 ms for
 * the legacy algorithms cudnnFind picked (docs/PERFORMANCE.md, ninth session).
 *
 * The steps, each a descriptor that is created, given attributes and finalized:
 *   tensors (x, w, y; NCHW strides, a unique id each) and the convolution (padding, stride),
 *   the operation (forward, backward-data or backward-filter: alpha 1, beta 0),
 *   the operation graph of that one operation,
 *   the heuristics' engine configurations for the graph (mode A, then the fallback list),
 *   one execution plan per allowed configuration, each run on the call's own inputs and timed,
 *   the fastest plan kept; a variant pack (the data pointers by unique id, the workspace) per run.
 * conv2d.cu keeps whichever is faster, this plan or cudnnFind's legacy algorithm. Every failure
 * here means "no plan": timing is an optimisation and never stops the run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/cuda/conv2d_graph.h"

#define GRAPH_MAX_CONFIGS 64 /* configurations read from the heuristics per shape and direction */
#define GRAPH_MAX_TRIES 12   /* of which allowed ones built and timed, in the heuristics' order */

enum { UID_A = 1, UID_B = 2, UID_OUT = 3 }; /* the operation's inputs a, b and its output */

/* Descriptors a plan depends on (its configuration, engine, graph, operation, tensors): kept as
 * long as the plan, destroyed together. */
typedef struct {
    cudnnBackendDescriptor_t *d;
    int n, cap;
} desc_list;

struct rg_conv_graph {
    cudnnBackendDescriptor_t plan;
    int64_t ws, engine;
    desc_list keep;
};

/* The first failure of a build, for RG_CUDA_CONV_VERBOSE. */
typedef struct {
    cudnnStatus_t st;
    const char *what;
} build_error;

#define TRY(e, call)                                                                               \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                         \
            if ((e)->st == CUDNN_STATUS_SUCCESS) (e)->st = st_, (e)->what = #call;                 \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

static bool create(desc_list *l, cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *out,
                   build_error *e) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        void *p = realloc(l->d, (size_t)cap * sizeof *l->d);
        RG_CHECK(p, "cuda conv2d: out of host memory for cuDNN descriptors");
        l->d = (cudnnBackendDescriptor_t *)p, l->cap = cap;
    }
    TRY(e, cudnnBackendCreateDescriptor(type, out));
    l->d[l->n++] = *out;
    return true;
}

static void destroy_all(desc_list *l) {
    while (l->n > 0) RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(l->d[--l->n]));
    free(l->d);
    l->d = NULL, l->cap = 0;
}

static bool set1(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                 cudnnBackendAttributeType_t type, const void *value, build_error *e) {
    TRY(e, cudnnBackendSetAttribute(d, name, type, 1, value));
    return true;
}

/* A float tensor (n, c, h, w), packed NCHW, 16-byte aligned data. */
static bool tensor(desc_list *l, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w,
                   cudnnBackendDescriptor_t *t, build_error *e) {
    int64_t dims[4] = {n, c, h, w}, strides[4] = {c * h * w, h * w, w, 1}, align = 16;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    if (!create(l, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t, e)) return false;
    TRY(e, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    TRY(e, cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    if (!set1(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, e) ||
        !set1(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, e) ||
        !set1(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align, e))
        return false;
    TRY(e, cudnnBackendFinalize(*t));
    return true;
}

/* Each direction's operation: its descriptor type and the attributes of x, w, y, the
 * convolution, alpha and beta. */
typedef struct {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
} op_attrs;

static const op_attrs ops[DIR_COUNT] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
};

/* The graph of one convolution operation of direction d; a and b are its inputs, in the order
 * rg_conv_graph_run takes them (fwd: x, w; backward-data: w, dy; backward-filter: x, dy). */
static bool build_graph(const rg_cuda_ctx *ctx, const rg_conv2d_shape *s, conv_dir d, desc_list *l,
                        cudnnBackendDescriptor_t *graph, build_error *e) {
    int64_t uid_x = d == DIR_BWD_DATA ? UID_OUT : UID_A;
    int64_t uid_w = d == DIR_FWD ? UID_B : d == DIR_BWD_DATA ? UID_A : UID_OUT;
    int64_t uid_y = d == DIR_FWD ? UID_OUT : UID_B;
    cudnnBackendDescriptor_t x, w, y, conv, op;
    if (!tensor(l, uid_x, s->n, s->c, s->h, s->w, &x, e) ||
        !tensor(l, uid_w, s->k, s->c, s->r, s->s, &w, e) ||
        !tensor(l, uid_y, s->n, s->k, s->p, s->q, &y, e))
        return false;

    int64_t dims = 2, dil[2] = {1, 1}, stride[2] = {s->stride_h, s->stride_w};
    int64_t pad[2] = {s->pad_h, s->pad_w};
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    if (!create(l, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv, e) ||
        !set1(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp, e) ||
        !set1(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, e) ||
        !set1(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &dims, e))
        return false;
    TRY(e,
        cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
    TRY(e, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
                                    2, stride));
    TRY(e, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
                                    pad));
    TRY(e, cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
                                    pad));
    TRY(e, cudnnBackendFinalize(conv));

    const op_attrs *a = &ops[d];
    float alpha = 1.0f, beta = 0.0f;
    if (!create(l, a->type, &op, e) || !set1(op, a->x, CUDNN_TYPE_BACKEND_DESCRIPTOR, &x, e) ||
        !set1(op, a->w, CUDNN_TYPE_BACKEND_DESCRIPTOR, &w, e) ||
        !set1(op, a->y, CUDNN_TYPE_BACKEND_DESCRIPTOR, &y, e) ||
        !set1(op, a->conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, &conv, e) ||
        !set1(op, a->alpha, CUDNN_TYPE_FLOAT, &alpha, e) ||
        !set1(op, a->beta, CUDNN_TYPE_FLOAT, &beta, e))
        return false;
    TRY(e, cudnnBackendFinalize(op));

    if (!create(l, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph, e) ||
        !set1(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &op, e) ||
        !set1(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &ctx->cudnn, e))
        return false;
    TRY(e, cudnnBackendFinalize(*graph));
    return true;
}

/* Up to max engine configurations of the heuristics' mode for the graph, into cfg. */
static int heuristic_configs(desc_list *l, cudnnBackendDescriptor_t graph,
                             cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t *cfg, int max,
                             build_error *e) {
    cudnnBackendDescriptor_t heur;
    int64_t count = 0;
    if (max <= 0 || !create(l, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur, e) ||
        !set1(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph,
              e) ||
        !set1(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, e))
        return 0;
    cudnnStatus_t st = cudnnBackendFinalize(heur);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
    if (st != CUDNN_STATUS_SUCCESS) {
        if (e->st == CUDNN_STATUS_SUCCESS) e->st = st, e->what = "the engine heuristics";
        return 0;
    }
    count = count < max ? count : max;
    for (int64_t i = 0; i < count; i++)
        if (!create(l, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i], e)) return 0;
    if (count > 0) {
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, cfg);
        if (st != CUDNN_STATUS_SUCCESS) {
            if (e->st == CUDNN_STATUS_SUCCESS) e->st = st, e->what = "the heuristics' results";
            return 0;
        }
    }
    return (int)count;
}

/* Whether the configuration's engine may run here (see conv2d_graph.h); its global index. */
static bool allowed(const rg_cuda_ctx *ctx, desc_list *l, cudnnBackendDescriptor_t cfg,
                    int64_t *index, build_error *e) {
    cudnnBackendDescriptor_t eng;
    int64_t got = 0;
    if (!create(l, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng, e)) return false;
    TRY(e, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                    1, &got, &eng));
    cudnnBackendNumericalNote_t num[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    TRY(e,
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &got, num));
    for (int64_t i = 0; i < got; i++) {
        if (num[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && !ctx->tf32) return false;
        if (num[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC && ctx->deterministic) return false;
        if (num[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
            num[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
            return false;
    }
    cudnnBackendBehaviorNote_t beh[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    TRY(e, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                    CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &got, beh));
    for (int64_t i = 0; i < got; i++)
        if (beh[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false; /* seconds to build */
    TRY(e, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got,
                                    index));
    return true;
}

/* The execution plan of one configuration and its workspace; false when cuDNN cannot make it
 * (CUDNN_STATUS_NOT_SUPPORTED for many configurations of a shape: normal). */
static bool make_plan(const rg_cuda_ctx *ctx, cudnnBackendDescriptor_t cfg,
                      cudnnBackendDescriptor_t *plan, int64_t *ws) {
    int64_t got = 0;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan) !=
        CUDNN_STATUS_SUCCESS)
        return false;
    if (cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                 &ctx->cudnn) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendFinalize(*plan) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                 1, &got, ws) == CUDNN_STATUS_SUCCESS)
        return true;
    RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(*plan));
    return false;
}

/* One run of a plan on the handle's (compute) stream: a variant pack for these pointers. */
static cudnnStatus_t execute(const rg_cuda_ctx *ctx, cudnnBackendDescriptor_t plan, const float *a,
                             const float *b, float *out, void *ws) {
    cudnnBackendDescriptor_t pack;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    int64_t uids[3] = {UID_A, UID_B, UID_OUT};
    void *ptrs[3] = {(void *)a, (void *)b, (void *)out};
    st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                                  uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                      1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(ctx->cudnn, plan, pack);
    RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(pack)); /* the pack is read when queued */
    return st;
}

/* Milliseconds of the plan's fastest of RG_CONV_TIMED_REPS runs (after one untimed), -1 if it
 * fails. */
static float time_plan(rg_cuda_ctx *ctx, cudnnBackendDescriptor_t plan, const float *a,
                       const float *b, float *out, void *ws, cudaEvent_t ev[2]) {
    cudaStream_t st = rg_cuda_compute(ctx);
    if (execute(ctx, plan, a, b, out, ws) != CUDNN_STATUS_SUCCESS) {
        (void)cudaGetLastError(); /* a refused launch must not fail the next one */
        return -1.0f;
    }
    float best = INFINITY;
    for (int r = 0; r < RG_CONV_TIMED_REPS; r++) {
        RG_CUDA_CHECK(cudaEventRecord(ev[0], st));
        if (execute(ctx, plan, a, b, out, ws) != CUDNN_STATUS_SUCCESS) return -1.0f;
        RG_CUDA_CHECK(cudaEventRecord(ev[1], st));
        RG_CUDA_CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0.0f;
        RG_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        best = ms < best ? ms : best;
    }
    return best;
}

static void graph_free(rg_conv_graph *g) {
    if (g->plan) RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(g->plan));
    destroy_all(&g->keep);
    free(g);
}

rg_conv_graph *rg_conv_graph_tune(rg_cuda_ctx *ctx, const rg_conv2d_shape *s, conv_dir d,
                                  const float *a, const float *b, size_t limit, float *ms) {
    build_error e = {CUDNN_STATUS_SUCCESS, NULL};
    rg_conv_graph *g = (rg_conv_graph *)calloc(1, sizeof *g);
    RG_CHECK(g, "cuda conv2d: out of host memory for a graph plan");
    cudnnBackendDescriptor_t graph, cfg[GRAPH_MAX_CONFIGS];
    int n = 0, tried = 0, barred = 0, unbuilt = 0;
    if (build_graph(ctx, s, d, &g->keep, &graph, &e)) {
        /* the whole lists: without TF32 the first dozen on Hopper are mostly tensor-core
         * engines (the first H200 run read only 12: no allowed one for 60 of ResNet-50's 68
         * FP32 passes, a plan for all 68 with TF32) */
        n = heuristic_configs(&g->keep, graph, CUDNN_HEUR_MODE_A, cfg, GRAPH_MAX_CONFIGS, &e);
        n += heuristic_configs(&g->keep, graph, CUDNN_HEUR_MODE_FALLBACK, cfg + n,
                               GRAPH_MAX_CONFIGS - n, &e);
    }
    int64_t elems = conv_out_elems(s, d);
    float *o = n ? (float *)rg_block_cache_get(ctx->mem, (size_t)elems * sizeof(float),
                                               RG_CUDA_STREAM_COMPUTE)
                 : NULL;
    float best = INFINITY;
    if (o) {
        cudaEvent_t ev[2];
        RG_CUDA_CHECK(cudaEventCreate(&ev[0]));
        RG_CUDA_CHECK(cudaEventCreate(&ev[1]));
        for (int i = 0; i < n && tried < GRAPH_MAX_TRIES; i++) {
            cudnnBackendDescriptor_t plan;
            int64_t engine = -1, ws_bytes = 0;
            if (!allowed(ctx, &g->keep, cfg[i], &engine, &e)) {
                barred++;
                continue;
            }
            if (!make_plan(ctx, cfg[i], &plan, &ws_bytes)) {
                unbuilt++;
                continue;
            }
            void *ws = NULL;
            if (ws_bytes < 0 || (size_t)ws_bytes > limit ||
                (ws_bytes > 0 &&
                 !(ws = rg_block_cache_get(ctx->mem, (size_t)ws_bytes, RG_CUDA_STREAM_COMPUTE)))) {
                RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(plan));
                unbuilt++;
                continue;
            }
            float t = time_plan(ctx, plan, a, b, o, ws, ev);
            tried++;
            if (ws) rg_cuda_scratch_free(ctx, ws);
            if (t >= 0.0f && t < best) {
                if (g->plan) RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(g->plan));
                g->plan = plan, g->ws = ws_bytes, g->engine = engine, best = t;
            } else {
                RG_CUDNN_CHECK(cudnnBackendDestroyDescriptor(plan));
            }
        }
        RG_CUDA_CHECK(cudaEventDestroy(ev[0]));
        RG_CUDA_CHECK(cudaEventDestroy(ev[1]));
        rg_cuda_scratch_free(ctx, o);
    }
    if (!g->plan) {
        if (ctx->conv_verbose)
            fprintf(
                stderr,
                "ringgrad: cuda conv2d: no graph-API plan for %s (%d configurations: %d not "
                "allowed, %d not built or over the workspace limit, %d timed; first failure: %s: "
                "%s)\n",
                conv_dir_name(d), n, barred, unbuilt, tried, e.what ? e.what : "none",
                e.what ? cudnnGetErrorString(e.st) : "-");
        graph_free(g);
        return NULL;
    }
    *ms = best;
    return g;
}

size_t rg_conv_graph_workspace(const rg_conv_graph *g) {
    return (size_t)g->ws;
}

int64_t rg_conv_graph_engine(const rg_conv_graph *g) {
    return g->engine;
}

void rg_conv_graph_release(rg_conv_graph *g) {
    if (g) graph_free(g);
}

void rg_conv_graph_run(rg_cuda_ctx *ctx, const rg_conv_graph *g, const float *a, const float *b,
                       float *out, void *ws) {
    RG_CUDNN_CHECK(execute(ctx, g->plan, a, b, out, ws));
}
