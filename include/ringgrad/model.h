/* model.h — a model: a named root layer, its parameters and its random streams.
 *
 *   rg_model *net = rg_model_new_by_name("cnn", 42);     (or rg_model_cnn(42))
 *   rg_scope_begin();
 *   rg_tensor *logits = rg_model_forward(net, x, RG_TRAIN);  x (N,1,28,28) -> (N,10)
 *   ...
 *   rg_scope_end();
 *   rg_model_free(net);
 *
 * The bundled models are built for the data's image shape and classes (rg_model_new_for; the
 * older entry points build them for Fashion-MNIST, (N,1,28,28) and 10 classes) and name their
 * parameters as the equivalent PyTorch module does (torchvision's for the ResNets), so their
 * checkpoints load into PyTorch unchanged. A user model is any layer tree handed to rg_model_new. */
#ifndef RG_MODEL_H
#define RG_MODEL_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/layer.h"
#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rg_model rg_model;

/* A named random stream of the model (one per Dropout, named after the layer). */
typedef struct {
    const char *name;      /* "dropout1"; borrowed from the layer */
    rg_rng_stream *stream; /* borrowed from the layer */
} rg_named_stream;

/* Wraps a layer tree as a model named `name` ("cnn"; checkpoints record it). Takes ownership of
 * root. `seed` is recorded for checkpoints and reports. Free with rg_model_free. */
RG_API rg_model *rg_model_new(const char *name, rg_layer *root, uint64_t seed);

/* The Fashion-MNIST CNN of PyTorch's MNIST example (for 1x28x28 images and 10 classes):
 * conv1 Conv2d(1,32,3) -> ReLU -> conv2 Conv2d(32,64,3) -> ReLU -> MaxPool2d(2) -> dropout1(0.25)
 * -> Flatten -> fc1 Linear(9216,128) -> ReLU -> dropout2(0.5) -> fc2 Linear(128,10).
 * Weights from Philox stream (seed, 0); dropout k uses seed rg_seed_derive(seed, k). */
RG_API rg_model *rg_model_cnn(uint64_t seed);

/* A multilayer perceptron (for 1x28x28 images and 10 classes): Flatten -> fc1 Linear(784,256) -> ReLU -> dropout1(0.2)
 * -> fc2 Linear(256,128) -> ReLU -> fc3 Linear(128,10). Seeds as rg_model_cnn. */
RG_API rg_model *rg_model_mlp(uint64_t seed);

/* What a bundled model is built for: the data's image shape and classes, and the ResNet options. */
typedef struct {
    int64_t channels, height, width; /* every image is (C,H,W) */
    int num_classes;                 /* the classifier's outputs */
    bool small_input;        /* ResNet-18/34/50: 3x3/1 stem and no max-pool (28-64 px images) */
    bool zero_init_residual; /* ResNets: each block's last BatchNorm weight starts at 0 */
} rg_model_spec;

/* The bundled model called `name` built for `spec` (NULL: Fashion-MNIST, 1x28x28 and 10 classes):
 * "cnn", "mlp", "resnet18", "resnet34", "resnet50" (torchvision's layout and names), "resnet20",
 * "resnet56" (He et al.'s CIFAR ResNets, named in torchvision's pattern). On success *out is a
 * new model the caller frees. Returns RG_EINVAL with a message when the name is unknown (listing
 * the known ones) or the model cannot take the spec's images (naming the shape: the CNN's fc1
 * needs 28x28), and sets *out to NULL. */
RG_API RG_NODISCARD rg_status rg_model_new_for(const char *name, uint64_t seed,
                                               const rg_model_spec *spec, rg_model **out);
/* rg_model_new_for(name, seed, NULL, ...): returns the model, or NULL with RG_EINVAL and a
 * message listing the known names when there is none. */
RG_API rg_model *rg_model_new_by_name(const char *name, uint64_t seed);
/* The i-th name rg_model_new_by_name knows, or NULL past the last. Static string. */
RG_API const char *rg_model_known_name(int i);

/* Frees the model, its layers and their tensors. NULL is a no-op. */
RG_API void rg_model_free(rg_model *m);

/* The logits for a batch: x (N,C,H,W) of the model's spec -> (N,classes). mode RG_TRAIN applies
 * dropout (advancing the streams) and batch statistics in BatchNorm (updating the running ones),
 * RG_EVAL does not. The result and everything made on the way
 * belong to the current step scope. */
RG_API rg_tensor *rg_model_forward(rg_model *m, rg_tensor *x, rg_mode mode);

/* The model's tensors with PyTorch state_dict names, in forward order. Borrowed from m. */
RG_API const rg_param_list *rg_model_params(const rg_model *m);

/* Sets the probability of every Dropout in the model (the trainer's --dropout; 0 disables). */
RG_API void rg_model_set_dropout(rg_model *m, float p);

/* The model's random streams, *n of them. Borrowed from m. */
RG_API const rg_named_stream *rg_model_streams(const rg_model *m, int *n);

/* Moves every parameter and buffer to dev (see rg_param_list_to_device). */
RG_API RG_NODISCARD rg_status rg_model_to_device(rg_model *m, rg_device dev);

/* The model's name ("cnn"), seed and root layer. Borrowed from m. */
RG_API const char *rg_model_name(const rg_model *m);
RG_API uint64_t rg_model_seed(const rg_model *m);
RG_API rg_layer *rg_model_root(rg_model *m);

/* For a model of rg_model_new_for, the pixels per image (H*W) of the smallest plane one of its
 * BatchNorm2d normalises: ResNet-18 on 28x28 images has 1x1 planes in layer4, so 1. 0 for a model
 * without BatchNorm2d, and for one made by rg_model_new (its shapes are unknown until it runs).
 * In training a BatchNorm2d needs more than one value per channel, batch x H x W > 1 (it stops
 * the process otherwise, as PyTorch raises): ringgrad-train checks its batches against this. */
RG_API int64_t rg_model_bn_plane(const rg_model *m);

#ifdef __cplusplus
}
#endif

#endif
