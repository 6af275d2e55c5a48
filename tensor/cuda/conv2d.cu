/* conv2d.cu — 2-D convolution through cuDNN 9 (pairs with tensor/cpu/conv2d.c, which does
 * im2col + GEMM; the formulas are in ops/conv2d.c).
 *
 * What it teaches: how a framework drives cuDNN's convolution API.
 *   - Descriptors: cuDNN describes every tensor (x, y, bias), the filter and the convolution
 *     itself by descriptor objects. Building them costs host time, so each distinct shape gets a
 *     plan (descriptors + chosen algorithms) that is made once and cached in the device context.
 *   - Algorithms: forward, backward-data and backward-filter each have several algorithms
 *     (implicit GEMM, FFT, Winograd, ...) with different speed and workspace needs. By default
 *     (RG_CUDA_CONV_ALGO=find) the first call of each shape and direction times them all with
 *     cudnnFind*AlgorithmEx on that call's own inputs, into scratch outputs, as PyTorch does with
 *     torch.backends.cudnn.benchmark = True; RG_CUDA_CONV_ALGO=heuristic (the default with
 *     RG_CUDA_DETERMINISTIC=1, since timing may choose differently from run to run) takes cuDNN's
 *     heuristic ranking instead (cudnnGet*Algorithm_v7: no timing, no synchronisation). Either
 *     way the choice is the first algorithm that succeeded, fits the workspace limit
 *     (RG_CUDA_CONV_WORKSPACE_MB, default 1024), is not a tensor-core one unless RG_CUDA_TF32=1
 *     and, with RG_CUDA_DETERMINISTIC=1, is deterministic; it is made once per shape and
 *     direction, and RG_CUDA_CONV_VERBOSE=1 prints it. On the first H200 run the heuristic's
 *     picks ran ResNet-18's last two stages at 0.30-0.36 of the measured-fastest algorithm's
 *     speed on three of six passes (docs/PERFORMANCE.md).
 *   - Workspace comes from the caching allocator and goes back right after the call.
 *   - beta: cuDNN computes out = alpha*result + beta*out and does not read out when beta is 0 —
 *     exactly the backend table's convention, so beta is passed straight through.
 *   - Precision: CUDNN_FMA_MATH keeps float32 exact; with RG_CUDA_TF32=1 the descriptor allows
 *     tensor-op math and each direction uses the math type its algorithm was ranked with.
 * cuDNN's 4-D descriptors take int sizes and tensors below 2^31 elements, so a larger batch is
 * processed in chunks of images.
 *
 * The legacy convolution API used here is deprecated in cuDNN 9 in favour of the graph API; it is
 * still supported, and it is the readable one. With find timing, each shape and direction also
 * times the graph API's engine configurations (conv2d_graph.cu; RG_CUDA_CONV_API=graph, the
 * default) and runs its plan where it beat cudnnFind's pick, both timed the same way
 * (time_legacy); on the H100 that took ResNet-50's FP32 step from 43-44.5 to 39.7-40 ms.
 * RG_CUDA_CONV_API=legacy keeps cudnnFind's picks alone. All cuDNN calls run under the context's
 * cudnn_lock (a handle must not be used by two threads at once). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/cuda/conv2d_graph.h"

/* The algorithm chosen for one direction: the cuDNN enum of that direction, held as an int; with
 * RG_CUDA_CONV_API=graph (the default) also the graph API's plan where it timed faster
 * (conv2d_graph.cu). */
typedef struct {
    bool have;
    int algo;
    cudnnMathType_t math;
    size_t ws;            /* workspace bytes */
    float ms;             /* cudnnFind's time for algo (-1: not timed) */
    rg_conv_graph *graph; /* NULL: the legacy algorithm */
} algo_choice;

typedef struct conv_plan {
    rg_conv2d_shape key; /* n is this plan's chunk of images */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    algo_choice dir[DIR_COUNT]; /* made on first use of each direction */
    struct conv_plan *next;
} conv_plan;

/* A list: a network has a few dozen distinct conv shapes, and one comparison per plan costs
 * nothing next to a kernel launch. */
struct rg_cuda_conv_cache {
    conv_plan *plans;
};

static const float one = 1.0f;

static bool same_shape(const rg_conv2d_shape *a, const rg_conv2d_shape *b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->p == b->p && a->q == b->q &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h &&
           a->pad_w == b->pad_w;
}

static void set_4d(cudnnTensorDescriptor_t *d, int64_t n, int64_t c, int64_t h, int64_t w) {
    RG_CUDNN_CHECK(cudnnCreateTensorDescriptor(d));
    RG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n,
                                              (int)c, (int)h, (int)w));
}

static conv_plan *plan_new(const rg_cuda_ctx *ctx, const rg_conv2d_shape *s) {
    conv_plan *pl = (conv_plan *)calloc(1, sizeof *pl);
    RG_CHECK(pl, "cuda conv2d: out of host memory for a plan");
    pl->key = *s;
    set_4d(&pl->x, s->n, s->c, s->h, s->w);
    set_4d(&pl->y, s->n, s->k, s->p, s->q);
    set_4d(&pl->bias, 1, s->k, 1, 1);
    RG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&pl->w));
    RG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(pl->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)s->k,
                                              (int)s->c, (int)s->r, (int)s->s));
    RG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&pl->conv));
    RG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(pl->conv, s->pad_h, s->pad_w, s->stride_h,
                                                   s->stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    cudnnMathType_t math = ctx->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    RG_CUDNN_CHECK(cudnnSetConvolutionMathType(pl->conv, math));
    for (int d = 0; d < DIR_COUNT; d++) pl->dir[d].math = math;
    int n, k, p, q; /* cuDNN must agree with the op layer on the output shape */
    RG_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(pl->conv, pl->x, pl->w, &n, &k, &p, &q));
    RG_CHECK(n == s->n && k == s->k && p == s->p && q == s->q,
             "cuda conv2d: cuDNN's output "
             "(%d,%d,%d,%d) differs from (%lld,%lld,%lld,%lld)",
             n, k, p, q, (long long)s->n, (long long)s->k, (long long)s->p, (long long)s->q);
    return pl;
}

static size_t workspace_limit(void) {
    const char *e = getenv("RG_CUDA_CONV_WORKSPACE_MB");
    long mb = e ? atol(e) : 1024;
    return (size_t)(mb < 0 ? 0 : mb) << 20;
}

/* One row of cuDNN's ranking, whatever the direction. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
    float ms; /* cudnnFind's time; the heuristic's ranking has none (-1) */
} ranked_algo;

static constexpr int MAX_ALGOS = 16;
static_assert((int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= MAX_ALGOS &&
                  (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= MAX_ALGOS &&
                  (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= MAX_ALGOS,
              "MAX_ALGOS must hold every direction's ranking");

/* cuDNN's heuristic ranking for direction d (cudnnGet*Algorithm_v7), into out; returns its length. */
template <typename Perf>
static int copy_ranking(const Perf *perf, int n, bool timed, ranked_algo *out) {
    for (int i = 0; i < n; i++)
        out[i] = {(int)perf[i].algo, perf[i].status, perf[i].determinism, perf[i].mathType,
                  timed ? perf[i].time : -1.0f};
    return n;
}

static int rank_algos(const rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d, ranked_algo *out) {
    int n = 0;
    switch (d) {
    case DIR_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        RG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            ctx->cudnn, pl->x, pl->w, pl->conv, pl->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
        return copy_ranking(perf, n, false, out);
    }
    case DIR_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        RG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            ctx->cudnn, pl->w, pl->y, pl->conv, pl->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
            perf));
        return copy_ranking(perf, n, false, out);
    }
    case DIR_BWD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        RG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            ctx->cudnn, pl->x, pl->y, pl->conv, pl->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
            perf));
        return copy_ranking(perf, n, false, out);
    }
    default:
        RG_CHECK(false, "cuda conv2d: direction %d", (int)d);
    }
}

/* The exact workspace of algorithm `algo` of direction d. */
static cudnnStatus_t workspace_size(const rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d,
                                    int algo, size_t *bytes) {
    switch (d) {
    case DIR_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(ctx->cudnn, pl->x, pl->w, pl->conv, pl->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case DIR_BWD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            ctx->cudnn, pl->w, pl->y, pl->conv, pl->x, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    case DIR_BWD_FILTER:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            ctx->cudnn, pl->x, pl->y, pl->conv, pl->w, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    default:
        return CUDNN_STATUS_BAD_PARAM;
    }
}

/* The largest workspace that any algorithm of direction d needs within the limit: what
 * cudnnFind gets, so that it can time every algorithm the picker could take. */
static size_t find_workspace(const rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d,
                             size_t limit) {
    static const int count[DIR_COUNT] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    size_t most = 0;
    for (int a = 0; a < count[d]; a++) {
        size_t bytes = 0;
        if (workspace_size(ctx, pl, d, a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= limit &&
            bytes > most)
            most = bytes;
    }
    return most;
}

/* The inputs of one direction's call: fwd (x, w), bwd-data (w, dy), bwd-filter (x, dy). */
typedef struct {
    const float *a, *b;
} conv_inputs;

/* One legacy call of direction d with choice c: out = op(in.a, in.b) + beta*out. */
static void legacy_call(rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d, const algo_choice *c,
                        conv_inputs in, float beta, float *out, void *ws) {
    RG_CUDNN_CHECK(cudnnSetConvolutionMathType(pl->conv, c->math));
    switch (d) {
    case DIR_FWD:
        RG_CUDNN_CHECK(cudnnConvolutionForward(ctx->cudnn, &one, pl->x, in.a, pl->w, in.b, pl->conv,
                                               (cudnnConvolutionFwdAlgo_t)c->algo, ws, c->ws, &beta,
                                               pl->y, out));
        break;
    case DIR_BWD_DATA:
        RG_CUDNN_CHECK(cudnnConvolutionBackwardData(
            ctx->cudnn, &one, pl->w, in.a, pl->y, in.b, pl->conv,
            (cudnnConvolutionBwdDataAlgo_t)c->algo, ws, c->ws, &beta, pl->x, out));
        break;
    default:
        RG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
            ctx->cudnn, &one, pl->x, in.a, pl->y, in.b, pl->conv,
            (cudnnConvolutionBwdFilterAlgo_t)c->algo, ws, c->ws, &beta, pl->w, out));
        break;
    }
}

/* Milliseconds of the legacy choice on the call's inputs, timed as conv2d_graph.cu times a graph
 * plan (the fastest of RG_CONV_TIMED_REPS runs after one untimed, into scratch), so that the two
 * are compared on equal terms: cudnnFind's own figure is not a best-of, and on the H100 it read up
 * to twice this (0.738 against 0.372 ms for ResNet-50's stem forward), which gave the graph plan
 * races it had not won. -1 when there is no memory to time it. */
static float time_legacy(rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d, const algo_choice *c,
                         conv_inputs in) {
    float *o = (float *)rg_block_cache_get(
        ctx->mem, (size_t)conv_out_elems(&pl->key, d) * sizeof(float), RG_CUDA_STREAM_COMPUTE);
    void *ws = c->ws ? rg_block_cache_get(ctx->mem, c->ws, RG_CUDA_STREAM_COMPUTE) : NULL;
    float best = -1.0f;
    if (o && (ws || !c->ws)) {
        cudaStream_t st = rg_cuda_compute(ctx);
        cudaEvent_t ev[2];
        RG_CUDA_CHECK(cudaEventCreate(&ev[0]));
        RG_CUDA_CHECK(cudaEventCreate(&ev[1]));
        legacy_call(ctx, pl, d, c, in, 0.0f, o, ws);
        best = INFINITY;
        for (int r = 0; r < RG_CONV_TIMED_REPS; r++) {
            float ms = 0.0f;
            RG_CUDA_CHECK(cudaEventRecord(ev[0], st));
            legacy_call(ctx, pl, d, c, in, 0.0f, o, ws);
            RG_CUDA_CHECK(cudaEventRecord(ev[1], st));
            RG_CUDA_CHECK(cudaEventSynchronize(ev[1]));
            RG_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
            best = ms < best ? ms : best;
        }
        RG_CUDA_CHECK(cudaEventDestroy(ev[0]));
        RG_CUDA_CHECK(cudaEventDestroy(ev[1]));
    }
    if (ws) rg_cuda_scratch_free(ctx, ws);
    if (o) rg_cuda_scratch_free(ctx, o);
    return best;
}

/* cudnnFind*AlgorithmEx on the call's inputs: every algorithm timed (cuDNN synchronises the
 * handle's stream), the results fastest first, into out; returns their number. The outputs go
 * to scratch, so a call with beta = 1 keeps its accumulator. Timing is an optimisation, so
 * nothing here stops the run: without memory for the largest workspace it asks for half, down to
 * none (Find then times the algorithms that fit), and without memory for the output, or when
 * Find itself fails, it returns 0 and the caller takes the heuristic's choice. */
static int find_algos(rg_cuda_ctx *ctx, const conv_plan *pl, conv_dir d, conv_inputs in,
                      size_t limit, ranked_algo *out) {
    const rg_conv2d_shape *s = &pl->key;
    int64_t elems = conv_out_elems(s, d);
    float *o = (float *)rg_block_cache_get(ctx->mem, (size_t)elems * sizeof(float),
                                           RG_CUDA_STREAM_COMPUTE);
    if (!o) return 0;
    size_t ws_bytes = find_workspace(ctx, pl, d, limit);
    void *ws = NULL;
    /* the plan's math type, whatever an earlier direction's choice left on the descriptor */
    RG_CUDNN_CHECK(
        cudnnSetConvolutionMathType(pl->conv, ctx->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    while (ws_bytes && !(ws = rg_block_cache_get(ctx->mem, ws_bytes, RG_CUDA_STREAM_COMPUTE)))
        ws_bytes /= 2;
    int n = 0;
    cudnnStatus_t st;
    switch (d) {
    case DIR_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        st = cudnnFindConvolutionForwardAlgorithmEx(ctx->cudnn, pl->x, in.a, pl->w, in.b, pl->conv,
                                                    pl->y, o, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n,
                                                    perf, ws, ws_bytes);
        n = st == CUDNN_STATUS_SUCCESS ? copy_ranking(perf, n, true, out) : 0;
        break;
    }
    case DIR_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        st = cudnnFindConvolutionBackwardDataAlgorithmEx(
            ctx->cudnn, pl->w, in.a, pl->y, in.b, pl->conv, pl->x, o,
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, ws, ws_bytes);
        n = st == CUDNN_STATUS_SUCCESS ? copy_ranking(perf, n, true, out) : 0;
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        st = cudnnFindConvolutionBackwardFilterAlgorithmEx(
            ctx->cudnn, pl->x, in.a, pl->y, in.b, pl->conv, pl->w, o,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, ws, ws_bytes);
        n = st == CUDNN_STATUS_SUCCESS ? copy_ranking(perf, n, true, out) : 0;
        break;
    }
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        (void)cudaGetLastError(); /* a recoverable error (memory) must not fail the next launch */
        if (ctx->conv_verbose)
            fprintf(stderr,
                    "ringgrad: cuda conv2d: cudnnFind for %s failed (%s); using the heuristic\n",
                    conv_dir_name(d), cudnnGetErrorString(st));
    }
    if (ws) rg_cuda_scratch_free(ctx, ws);
    rg_cuda_scratch_free(ctx, o);
    return n;
}

/* The one algorithm picker, for every direction: the first algorithm of cuDNN's list (timed by
 * cudnnFind, or its heuristic ranking) that ran, is deterministic when required, is not a
 * tensor-core one unless TF32 is allowed, and needs at most the workspace limit. Made once per
 * plan and direction; caller holds cudnn_lock. */
static const algo_choice *choose(rg_cuda_ctx *ctx, conv_plan *pl, conv_dir d, conv_inputs in) {
    algo_choice *c = &pl->dir[d];
    if (c->have) return c;
    ranked_algo perf[MAX_ALGOS];
    size_t limit = workspace_limit();
    for (int pass = ctx->conv_find ? 0 : 1; pass < 2 && !c->have; pass++) {
        /* pass 0: cudnnFind's timings; pass 1 (or when Find offers none): the heuristic */
        int n = pass == 0 ? find_algos(ctx, pl, d, in, limit, perf) : rank_algos(ctx, pl, d, perf);
        for (int i = 0; i < n && !c->have; i++) {
            size_t bytes = 0;
            if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
            if (ctx->deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
            if (!ctx->tf32 && (perf[i].math == CUDNN_TENSOR_OP_MATH ||
                               perf[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
                continue; /* a tensor-core algorithm: TF32 or lower precision */
            if (workspace_size(ctx, pl, d, perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
                bytes > limit)
                continue;
            c->algo = perf[i].algo, c->ws = bytes, c->have = true, c->ms = perf[i].ms;
            if (ctx->tf32) c->math = perf[i].math; /* without TF32, FMA math stays */
            if (ctx->conv_verbose) {
                const rg_conv2d_shape *k = &pl->key;
                fprintf(stderr,
                        "ringgrad: cuda conv2d (%lld,%lld,%lld,%lld) * (%lld,%lld,%lld,%lld) "
                        "stride %lld pad %lld: %s algorithm %d (%s, rank %d), workspace %.1f "
                        "MiB%s\n",
                        (long long)k->n, (long long)k->c, (long long)k->h, (long long)k->w,
                        (long long)k->k, (long long)k->c, (long long)k->r, (long long)k->s,
                        (long long)k->stride_h, (long long)k->pad_h, conv_dir_name(d), c->algo,
                        pass == 0 ? "timed by cudnnFind" : "cuDNN's heuristic", i,
                        (double)bytes / 1048576.0, c->math == CUDNN_FMA_MATH ? "" : ", tensor ops");
            }
        }
    }
    RG_CHECK(c->have,
             "cuda conv2d: cuDNN offers no usable %s algorithm for this shape (raise "
             "RG_CUDA_CONV_WORKSPACE_MB, or unset RG_CUDA_DETERMINISTIC?)",
             conv_dir_name(d));
    /* RG_CUDA_CONV_API=graph (the default): the graph API's fastest plan, where it beats the
     * legacy pick timed the same way */
    if (ctx->conv_graph && c->ms > 0.0f && rg_cuda_aligned16(in.a) && rg_cuda_aligned16(in.b)) {
        float ms = 0.0f;
        rg_conv_graph *g = rg_conv_graph_tune(ctx, &pl->key, d, in.a, in.b, limit, &ms);
        float legacy_ms = g ? time_legacy(ctx, pl, d, c, in) : -1.0f;
        bool take = g && ((legacy_ms >= 0.0f && ms < legacy_ms) || ctx->conv_graph_only);
        if (g && ctx->conv_verbose)
            fprintf(stderr,
                    "ringgrad: cuda conv2d %s: graph engine %lld %.3f ms, legacy algorithm %d "
                    "%.3f ms (cudnnFind: %.3f): %s\n",
                    conv_dir_name(d), (long long)rg_conv_graph_engine(g), (double)ms, c->algo,
                    (double)legacy_ms, (double)c->ms, take ? "graph" : "legacy");
        if (take)
            c->graph = g;
        else
            rg_conv_graph_release(g);
    }
    return c;
}

/* The graph plan for a call of this choice: only with beta 0 (the plan has it built in) and
 * 16-byte aligned pointers (what the plan's tensors promise); NULL for the legacy algorithm. */
static const rg_conv_graph *graph_for(const algo_choice *a, float beta, const void *p,
                                      const void *q, const void *r) {
    return a->graph && beta == 0.0f && rg_cuda_aligned16(p) && rg_cuda_aligned16(q) &&
                   rg_cuda_aligned16(r)
               ? a->graph
               : NULL;
}

/* Workspace for a call that runs g if not NULL, else the legacy algorithm. */
static void *call_workspace(rg_cuda_ctx *ctx, const algo_choice *a, const rg_conv_graph *g) {
    size_t bytes = g ? rg_conv_graph_workspace(g) : a->ws;
    return bytes ? rg_cuda_scratch(ctx, bytes) : NULL;
}

/* The plan for shape s with a chunk of n images; caller holds cudnn_lock. */
static conv_plan *plan_for(rg_cuda_ctx *ctx, const rg_conv2d_shape *s, int64_t n) {
    rg_conv2d_shape key = *s;
    key.n = n;
    if (!ctx->conv) {
        ctx->conv = (rg_cuda_conv_cache *)calloc(1, sizeof *ctx->conv);
        RG_CHECK(ctx->conv, "cuda conv2d: out of host memory");
    }
    for (conv_plan *pl = ctx->conv->plans; pl; pl = pl->next)
        if (same_shape(&pl->key, &key)) return pl;
    conv_plan *pl = plan_new(ctx, &key);
    pl->next = ctx->conv->plans, ctx->conv->plans = pl;
    return pl;
}

int rg_cuda_conv_graph_count(void) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    int n = 0;
    pthread_mutex_lock(&ctx->cudnn_lock);
    for (conv_plan *pl = ctx->conv ? ctx->conv->plans : NULL; pl; pl = pl->next)
        for (int d = 0; d < DIR_COUNT; d++) n += pl->dir[d].graph != NULL;
    pthread_mutex_unlock(&ctx->cudnn_lock);
    return n;
}

/* Images per cuDNN call, so that no tensor of a call reaches 2^31 elements. */
static int64_t batch_chunk(const rg_conv2d_shape *s) {
    int64_t x_img = s->c * s->h * s->w, y_img = s->k * s->p * s->q;
    int64_t img = x_img > y_img ? x_img : y_img;
    RG_CHECK(s->c > 0 && s->k > 0 && s->r > 0 && s->s > 0 && s->p > 0 && s->q > 0,
             "cuda conv2d: empty shape (C %lld, K %lld, kernel %lldx%lld, output %lldx%lld)",
             (long long)s->c, (long long)s->k, (long long)s->r, (long long)s->s, (long long)s->p,
             (long long)s->q);
    RG_CHECK(img <= INT_MAX && s->k * s->c * s->r * s->s <= INT_MAX,
             "cuda conv2d: one image or the filter has 2^31 elements or more (cuDNN's limit)");
    int64_t chunk = INT_MAX / img;
    return chunk < s->n ? chunk : s->n;
}

/* A fused ReLU (rg_conv2d_shape.relu, .relu_y) runs here as the separate elementwise kernels,
 * queued on the same compute stream as cuDNN's calls: cuDNN's own fusion
 * (cudnnConvolutionBiasActivationForward) takes only the implicit-precomputed-GEMM algorithm for
 * ReLU, which would override the algorithm choice above. The fusion's gain is the CPU's, where
 * the ReLU passes are memory-bound (tensor/cpu/conv2d.c). */

/* When a ReLU was fused: dy masked by its output (rg_k_relu_grad), in scratch that the caller
 * frees after its last launch; *dy then points there. NULL otherwise. */
static float *relu_masked_dy(rg_cuda_ctx *ctx, const rg_conv2d_shape *s, const float **dy) {
    if (!s->relu_y) return NULL;
    int64_t n = s->n * s->k * s->p * s->q;
    float *dz = (float *)rg_cuda_scratch(ctx, (size_t)n * sizeof(float));
    rg_cuda_relu_backward(n, s->relu_y, *dy, 0.0f, dz);
    *dy = dz;
    return dz;
}

/* A fused max-pool (rg_conv2d_shape.pool) runs as the separate kernels as well, on the same
 * stream: the convolution's output and its gradient go through scratch. On the GPU the fusion
 * saves nothing worth a kernel of its own (the pool is a small share of a step there); it exists
 * for the CPU's memory traffic. */

/* When a pool was fused: the gradient of the convolution's output, as max-pool's backward and
 * then the ReLU's would have written it, in scratch that the caller frees after its last launch;
 * *dy then points there. *plain is s without the fused ReLU and pool. NULL without a pool. */
static float *unpooled_dy(rg_cuda_ctx *ctx, const rg_conv2d_shape *s, const float **dy,
                          rg_conv2d_shape *plain) {
    *plain = *s;
    if (!s->pool) return NULL;
    plain->pool = NULL, plain->pool_argmax = NULL, plain->relu_y = NULL;
    int64_t pooled = s->n * s->k * s->pool->p * s->pool->q, len = s->n * s->k * s->p * s->q;
    float *dz = (float *)rg_cuda_scratch(ctx, (size_t)len * sizeof(float));
    float *dm = s->relu_y ? (float *)rg_cuda_scratch(ctx, (size_t)pooled * sizeof(float)) : NULL;
    if (dm) rg_cuda_relu_backward(pooled, s->relu_y, *dy, 0.0f, dm);
    rg_cuda_maxpool2d_backward(s->pool, dm ? dm : *dy, s->pool_argmax, 0.0f, dz);
    if (dm) rg_cuda_scratch_free(ctx, dm); /* stream-ordered: reused only after the launch */
    *dy = dz;
    return dz;
}

/* y (N,K,P,Q) = conv(x (N,C,H,W), w (K,C,R,S)) + b (K), then max(0, y) with s->relu, then the
 * max-pool s->pool (y then being the pool's output) */
void rg_cuda_conv2d_forward(const rg_conv2d_shape *s, const float *x, const float *w,
                            const float *b, float *y) {
    if (s->n == 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    if (s->pool) {
        rg_conv2d_shape plain = *s;
        plain.pool = NULL, plain.pool_argmax = NULL;
        size_t bytes = (size_t)(s->n * s->k * s->p * s->q) * sizeof(float);
        float *t = (float *)rg_cuda_scratch(ctx, bytes);
        rg_cuda_conv2d_forward(&plain, x, w, b, t);
        rg_cuda_maxpool2d_forward(s->pool, t, y, s->pool_argmax);
        rg_cuda_scratch_free(ctx, t);
        return;
    }
    int64_t chunk = batch_chunk(s), x_img = s->c * s->h * s->w, y_img = s->k * s->p * s->q;
    pthread_mutex_lock(&ctx->cudnn_lock);
    for (int64_t n0 = 0; n0 < s->n; n0 += chunk) {
        conv_plan *pl = plan_for(ctx, s, chunk < s->n - n0 ? chunk : s->n - n0);
        const algo_choice *a = choose(ctx, pl, DIR_FWD, {x + n0 * x_img, w});
        const rg_conv_graph *g = graph_for(a, 0.0f, x + n0 * x_img, w, y + n0 * y_img);
        void *ws = call_workspace(ctx, a, g);
        if (g) {
            rg_conv_graph_run(ctx, g, x + n0 * x_img, w, y + n0 * y_img, ws);
        } else {
            legacy_call(ctx, pl, DIR_FWD, a, {x + n0 * x_img, w}, 0.0f, y + n0 * y_img, ws);
        }
        if (ws) rg_cuda_scratch_free(ctx, ws);
        if (b)
            RG_CUDNN_CHECK(
                cudnnAddTensor(ctx->cudnn, &one, pl->bias, b, &one, pl->y, y + n0 * y_img));
    }
    pthread_mutex_unlock(&ctx->cudnn_lock);
    if (s->relu) rg_cuda_relu_forward(s->n * y_img, y, y);
}

/* dx (N,C,H,W) = beta*dx + conv_transpose(dy (N,K,P,Q), w (K,C,R,S)); dy masked by s->relu_y */
void rg_cuda_conv2d_backward_data(const rg_conv2d_shape *s, const float *dy, const float *w,
                                  float beta, float *dx) {
    if (s->n == 0) return;
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    rg_conv2d_shape plain;
    float *dp = unpooled_dy(ctx, s, &dy, &plain);
    s = &plain;
    int64_t chunk = batch_chunk(s), x_img = s->c * s->h * s->w, y_img = s->k * s->p * s->q;
    float *dz = relu_masked_dy(ctx, s, &dy);
    pthread_mutex_lock(&ctx->cudnn_lock);
    for (int64_t n0 = 0; n0 < s->n; n0 += chunk) {
        conv_plan *pl = plan_for(ctx, s, chunk < s->n - n0 ? chunk : s->n - n0);
        const algo_choice *a = choose(ctx, pl, DIR_BWD_DATA, {w, dy + n0 * y_img});
        const rg_conv_graph *g = graph_for(a, beta, w, dy + n0 * y_img, dx + n0 * x_img);
        void *ws = call_workspace(ctx, a, g);
        if (g) {
            rg_conv_graph_run(ctx, g, w, dy + n0 * y_img, dx + n0 * x_img, ws);
        } else {
            legacy_call(ctx, pl, DIR_BWD_DATA, a, {w, dy + n0 * y_img}, beta, dx + n0 * x_img, ws);
        }
        if (ws) rg_cuda_scratch_free(ctx, ws);
    }
    pthread_mutex_unlock(&ctx->cudnn_lock);
    if (dz) rg_cuda_scratch_free(ctx, dz);
    if (dp) rg_cuda_scratch_free(ctx, dp);
}

/* dw (K,C,R,S) = beta*dw + corr(x (N,C,H,W), dy (N,K,P,Q));  db (K) = beta*db + sum_{n,p,q} dy;
 * dy masked by s->relu_y */
void rg_cuda_conv2d_backward_filter(const rg_conv2d_shape *s, const float *x, const float *dy,
                                    float beta, float *dw, float *db) {
    rg_cuda_ctx *ctx = rg_cuda_ctx_current();
    if (s->n == 0) { /* empty sums */
        rg_cuda_scale(ctx, s->k * s->c * s->r * s->s, beta, dw);
        if (db) rg_cuda_scale(ctx, s->k, beta, db);
        return;
    }
    rg_conv2d_shape plain;
    float *dp = unpooled_dy(ctx, s, &dy, &plain);
    s = &plain;
    int64_t chunk = batch_chunk(s), x_img = s->c * s->h * s->w, y_img = s->k * s->p * s->q;
    float *dz = relu_masked_dy(ctx, s, &dy);
    /* Accumulating (beta != 0, every step when gradients are zeroed rather than dropped): cuDNN
     * writes a fresh dw (beta 0) into scratch and an axpby adds it, unless
     * RG_CUDA_WGRAD_SEPARATE=0. cuDNN's own beta != 0 path adds a scaling pass over dw per call
     * (scalePackedTensor, 94 a ResNet-50 step) and cudnnFind timed the algorithms at beta 0. */
    int64_t wn = conv_out_elems(s, DIR_BWD_FILTER);
    float *acc = beta != 0.0f && ctx->wgrad_separate
                     ? (float *)rg_cuda_scratch(ctx, (size_t)wn * sizeof(float))
                     : NULL;
    float *out = acc ? acc : dw;
    pthread_mutex_lock(&ctx->cudnn_lock);
    for (int64_t n0 = 0; n0 < s->n; n0 += chunk) {
        float b = n0 == 0 ? beta : 1.0f; /* later chunks accumulate onto the first */
        float bw = n0 == 0 && acc ? 0.0f : b;
        conv_plan *pl = plan_for(ctx, s, chunk < s->n - n0 ? chunk : s->n - n0);
        const algo_choice *a = choose(ctx, pl, DIR_BWD_FILTER, {x + n0 * x_img, dy + n0 * y_img});
        const rg_conv_graph *g = graph_for(a, bw, x + n0 * x_img, dy + n0 * y_img, out);
        void *ws = call_workspace(ctx, a, g);
        if (g) {
            rg_conv_graph_run(ctx, g, x + n0 * x_img, dy + n0 * y_img, out, ws);
        } else {
            legacy_call(ctx, pl, DIR_BWD_FILTER, a, {x + n0 * x_img, dy + n0 * y_img}, bw, out, ws);
        }
        if (ws) rg_cuda_scratch_free(ctx, ws);
        if (db)
            RG_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx->cudnn, &one, pl->y, dy + n0 * y_img,
                                                        &b, pl->bias, db));
    }
    pthread_mutex_unlock(&ctx->cudnn_lock);
    if (acc) {
        rg_cuda_axpby(wn, 1.0f, acc, beta, dw); /* dw = fresh + beta*dw */
        rg_cuda_scratch_free(ctx, acc);
    }
    if (dz) rg_cuda_scratch_free(ctx, dz);
    if (dp) rg_cuda_scratch_free(ctx, dp);
}

/* Both backward passes: cuDNN has no combined call, so the two above, one after the other (a fused
 * pool's gradient unpooled once for both). */
void rg_cuda_conv2d_backward(const rg_conv2d_shape *s, const float *x, const float *dy,
                             const float *w, float beta_x, float *dx, float beta_w, float *dw,
                             float *db) {
    rg_conv2d_shape plain;
    float *dp = s->n > 0 ? unpooled_dy(rg_cuda_ctx_current(), s, &dy, &plain) : NULL;
    if (dp) s = &plain;
    if (dx) rg_cuda_conv2d_backward_data(s, dy, w, beta_x, dx);
    if (dw) rg_cuda_conv2d_backward_filter(s, x, dy, beta_w, dw, db);
    if (dp) rg_cuda_scratch_free(rg_cuda_ctx_current(), dp);
}
