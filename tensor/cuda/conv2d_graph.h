/* conv2d_graph.h — one direction of a convolution through cuDNN's graph API (conv2d_graph.cu),
 * for conv2d.cu, which takes it where it beats the legacy algorithm cudnnFind chose. */
#ifndef RG_TENSOR_CUDA_CONV2D_GRAPH_H
#define RG_TENSOR_CUDA_CONV2D_GRAPH_H

#include "tensor/cuda/cuda_impl.h"

/* The three directions of a convolution, each with its own algorithms in cuDNN. */
typedef enum { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER, DIR_COUNT } conv_dir;

static inline const char *conv_dir_name(conv_dir d) {
    return d == DIR_FWD ? "forward" : d == DIR_BWD_DATA ? "backward-data" : "backward-filter";
}

/* Elements of direction d's output: y (N,K,P,Q), dx (N,C,H,W) or dw (K,C,R,S). */
static inline int64_t conv_out_elems(const rg_conv2d_shape *s, conv_dir d) {
    return d == DIR_FWD        ? s->n * s->k * s->p * s->q
           : d == DIR_BWD_DATA ? s->n * s->c * s->h * s->w
                               : s->k * s->c * s->r * s->s;
}

/* Timed runs of a candidate, graph plan or legacy algorithm, after one untimed; the fastest
 * counts. */
#define RG_CONV_TIMED_REPS 3

typedef struct rg_conv_graph rg_conv_graph;

/* The fastest execution plan cuDNN's graph API has for direction d of shape s (alpha 1, beta 0):
 * the heuristics' engine configurations (mode A, then the fallback list) that are allowed (no
 * tensor cores unless RG_CUDA_TF32=1, no reduced-precision or down-converting engines, no engine
 * that compiles at run time, deterministic under RG_CUDA_DETERMINISTIC=1, workspace within
 * limit), each timed on the call's inputs a and b (fwd: x, w; backward-data: w, dy;
 * backward-filter: x, dy) into scratch output. Its time goes to *ms. NULL when none could be
 * built or run (RG_CUDA_CONV_VERBOSE=1 says why): an optimisation never stops the run. The caller
 * holds the context's cudnn_lock. */
rg_conv_graph *rg_conv_graph_tune(rg_cuda_ctx *ctx, const rg_conv2d_shape *s, conv_dir d,
                                  const float *a, const float *b, size_t limit, float *ms);

/* Workspace bytes of the plan, and cuDNN's global index of its engine (for messages). */
size_t rg_conv_graph_workspace(const rg_conv_graph *g);
int64_t rg_conv_graph_engine(const rg_conv_graph *g);

/* Frees a plan that lost to a legacy algorithm (NULL: nothing). */
void rg_conv_graph_release(rg_conv_graph *g);

/* out = op(a, b) with the plan, on the compute stream; ws holds rg_conv_graph_workspace bytes.
 * Caller holds cudnn_lock. */
void rg_conv_graph_run(rg_cuda_ctx *ctx, const rg_conv_graph *g, const float *a, const float *b,
                       float *out, void *ws);

#endif
