/* layer.h — the module system: a layer is a struct with a two-entry vtable {forward, free}, a
 * name and the tensors it owns, in the spirit of KANN's nodes and a tiny nn.Module.
 *
 *   rg_rng_stream init = {.seed = 42};
 *   rg_layer *net = rg_sequential_new("");
 *   rg_layer_add(net, rg_linear_new("fc1", 784, 128, &init));
 *   rg_layer_add(net, rg_relu_new("relu1"));
 *   rg_layer_add(net, rg_linear_new("fc2", 128, 10, &init));
 *   rg_tensor *logits = rg_layer_forward(net, x, RG_TRAIN);
 *
 * A layer's name is its full dotted path ("fc1", "layer1.0.conv1") and its parameters are named
 * "<name>.weight" and "<name>.bias" with PyTorch's layouts, so rg_layer_params() is a state_dict.
 * A container (Sequential, a residual block) has children; its parameter list is the
 * concatenation of theirs, in the order they were added. Concrete layers embed rg_layer as their
 * first member and keep their settings beside it (layers/linear.c is the shortest example). */
#ifndef RG_LAYER_H
#define RG_LAYER_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/ops.h"
#include "ringgrad/params.h"
#include "ringgrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Training (dropout active) or evaluation (dropout is the identity). */
typedef enum { RG_EVAL, RG_TRAIN, RG_MODE_COUNT } rg_mode;

/* A position in a counter-based Philox stream (core/kernels.h): the numbers drawn next are
 * stream elements offset, offset + 1, ... under key `seed`. Saving the pair saves the generator. */
typedef struct {
    uint64_t seed;
    uint64_t offset;
} rg_rng_stream;

typedef struct rg_layer rg_layer;

/* public: filled by the author of a layer type, one static instance per type */
typedef struct {
    const char *kind; /* "Linear": for messages */
    /* The layer's output for x, made by ops in the current step scope. */
    rg_tensor *(*forward)(rg_layer *l, rg_tensor *x, rg_mode mode);
    /* Frees what the concrete layer allocated beyond the base struct; NULL when nothing. The base
     * (name, parameters, children) is freed by rg_layer_free. */
    void (*free)(rg_layer *l);
} rg_layer_vtable;

struct rg_layer {
    /* read-only: set by rg_layer_alloc and the rg_layer_add_* helpers; read them freely */
    const rg_layer_vtable *vt;
    char *name;           /* full dotted path; owned */
    rg_param_list params; /* a leaf's own tensors, or every child's for a container */
    rg_layer **children;  /* containers only; owned */
    int n_children;
    const rg_layer *parent; /* the container it was added to (rg_layer_add), or NULL */
    /* private: a concrete layer's own fields follow in its struct (rg_layer first) */
};

/* ---- using layers ---- */

/* Runs l->vt->forward. x is borrowed; the result belongs to the current step scope. */
RG_API rg_tensor *rg_layer_forward(rg_layer *l, rg_tensor *x, rg_mode mode);
/* The layer's tensors with their state_dict names, in registration order. Borrowed from l. */
RG_API const rg_param_list *rg_layer_params(const rg_layer *l);
/* Frees l, its parameters and its children. NULL is a no-op. */
RG_API void rg_layer_free(rg_layer *l);
/* Calls fn(layer, ctx) on l and then on every descendant, depth first in order. */
RG_API void rg_layer_visit(rg_layer *l, void (*fn)(rg_layer *layer, void *ctx), void *ctx);

/* ---- writing layers ---- */

/* Allocates a zeroed layer of `size` bytes (the concrete struct, rg_layer first) with a copy of
 * `name` (NULL means ""). Stops (RG_CHECK) when host memory runs out. The caller owns it. */
RG_API rg_layer *rg_layer_alloc(size_t size, const rg_layer_vtable *vt, const char *name);
/* Registers t as "<l->name>.<local>" (or "<local>" when the name is empty); l takes ownership of
 * t. A parameter (is_buffer false) is marked as requiring a gradient. Returns t. */
RG_API rg_tensor *rg_layer_add_param(rg_layer *l, const char *local, rg_tensor *t, bool is_buffer);
/* Appends child to the container l (l takes ownership) and its tensors to l's list. Returns
 * child, so that a builder can keep a handle. A layer goes into one container, once: adding it
 * again (a ReLU reused, as nn.Sequential allows), or a container into itself, stops (RG_CHECK). */
RG_API rg_layer *rg_layer_add(rg_layer *l, rg_layer *child);

/* ---- the layers (each in layers/<name>.c) ---- */

/* Children run in order: y = child_n(... child_1(x)). Add them with rg_layer_add. A Conv2d
 * followed by a ReLU runs as one fused op (rg_conv2d_relu), and with a MaxPool2d after the ReLU as
 * rg_conv2d_relu_maxpool2d; a BatchNorm2d followed by a ReLU as rg_batch_norm2d_relu: the same
 * results, bit for bit, in less time. RG_FUSE=0 in the environment turns that off, RG_FUSE=relu
 * leaves the pool out of it. */
RG_API rg_layer *rg_sequential_new(const char *name);
/* relu(the BatchNorm2d l's forward of x + residual), a residual block's end (models/resnet.c), as
 * one op (rg_batch_norm2d_add_relu) unless RG_FUSE=0, when the three run apart; NULL when l is
 * not a BatchNorm2d. */
RG_API rg_tensor *rg_batchnorm2d_forward_add_relu(rg_layer *l, rg_tensor *x, rg_tensor *residual,
                                                  rg_mode mode);
/* Children [first, last) of the container l only, fused as its forward is: x through
 * child_{last-1}(... child_first(x)). A pipeline stage runs its share of a Sequential this way. */
RG_API rg_tensor *rg_sequential_forward_range(rg_layer *l, int first, int last, rg_tensor *x,
                                              rg_mode mode);

/* y = x w^T + b;  x (N,in) -> (N,out); weight (out,in), bias (out), both initialised as
 * PyTorch's nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) drawn from *init (advanced). */
RG_API rg_layer *rg_linear_new(const char *name, int64_t in, int64_t out, rg_rng_stream *init);

typedef struct {
    int stride;   /* 0 means 1 */
    int padding;  /* zeros on each side */
    bool no_bias; /* ResNet's convolutions before a batch norm have none */
} rg_conv2d_opts;

/* y = conv(x, w) + b;  x (N,in_ch,H,W) -> (N,out_ch,P,Q); weight (out_ch,in_ch,k,k) (OIHW),
 * bias (out_ch), initialised as nn.Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
 * in_ch*k*k, drawn from *init (advanced). opts may be NULL (stride 1, no padding, a bias). */
RG_API rg_layer *rg_conv2d_new(const char *name, int64_t in_ch, int64_t out_ch, int kernel,
                               const rg_conv2d_opts *opts, rg_rng_stream *init);

/* y = max over each kernel x kernel window;  x (N,C,H,W) -> (N,C,P,Q). stride 0 means `kernel`
 * (PyTorch's default). */
RG_API rg_layer *rg_maxpool2d_new(const char *name, int kernel, int stride, int padding);

/* PyTorch's nn.BatchNorm2d(channels): momentum 0.1, eps 1e-5, affine; state_dict weight (=1),
 * bias (=0), running_mean (=0), running_var (=1), num_batches_tracked (int64 (), =0). Training
 * normalises with the batch's statistics and updates the running ones; evaluation uses them. */
RG_API rg_layer *rg_batchnorm2d_new(const char *name, int64_t channels);
/* Makes a BatchNorm2d a SyncBatchNorm: its statistics are summed over the ranks through `sync`
 * (borrowed; NULL turns it back into a per-rank BatchNorm). Returns false, changing nothing, when
 * l is not a BatchNorm2d. */
RG_API bool rg_batchnorm2d_set_sync(rg_layer *l, const rg_bn_sync *sync);

/* y[n,c,0,0] = mean of x[n,c,:,:];  x (N,C,H,W) -> (N,C,1,1) (AdaptiveAvgPool2d(1)) */
RG_API rg_layer *rg_global_avgpool_new(const char *name);

/* y = max(x, 0) */
RG_API rg_layer *rg_relu_new(const char *name);
/* true when l is a ReLU layer (made by rg_relu_new) */
RG_API bool rg_layer_is_relu(const rg_layer *l);
/* (N, d1, d2, ...) -> (N, d1*d2*...) in C,H,W order */
RG_API rg_layer *rg_flatten_new(const char *name);

/* Inverted dropout with probability p (0 <= p <= 1; 0 disables). The mask comes from the Philox
 * stream (seed, offset); the offset starts at 0 and advances on every training forward, so a run
 * is reproducible and a checkpoint that saves the stream resumes it exactly. */
RG_API rg_layer *rg_dropout_new(const char *name, float p, uint64_t seed);
/* The dropout layer's stream (read or restore it), or NULL when l is not a Dropout. Borrowed. */
RG_API rg_rng_stream *rg_dropout_stream(rg_layer *l);
/* Sets a Dropout's probability (0 <= p <= 1, else RG_CHECK). Returns false, changing nothing,
 * when l is not a Dropout. */
RG_API bool rg_dropout_set_p(rg_layer *l, float p);
/* A Dropout's probability; -1 when l is not a Dropout. */
RG_API float rg_dropout_p(const rg_layer *l);

/* ---- initialisation (layers/init.c) ---- */

/* U(-bound, bound) with bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)): PyTorch's
 * kaiming_uniform_. With a = sqrt(5) (nn.Linear's and nn.Conv2d's default) bound = 1/sqrt(fan_in).
 * Draws t->numel numbers from *rng (advanced). */
RG_API void rg_init_kaiming_uniform_(rg_tensor *t, double a, int64_t fan_in, rg_rng_stream *rng);
/* The bias of nn.Linear and nn.Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (0 when fan_in is 0). */
RG_API void rg_init_fan_in_uniform_(rg_tensor *t, int64_t fan_in, rg_rng_stream *rng);
/* An independent seed for sub-stream k of `seed` (SplitMix64 of both), e.g. one per dropout layer
 * so that no two layers draw the same mask. */
RG_API uint64_t rg_seed_derive(uint64_t seed, uint64_t k);

#ifdef __cplusplus
}
#endif

#endif
