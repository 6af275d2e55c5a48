/* optim_impl.h — the optimizer base struct, shared by optim.c (common parts) and one file per
 * rule (sgd.c, adam.c), and the registry's entry type (registry.c). Private to optim/.
 *
 * Each rule owns its options: it embeds `rg_optim` as the first member of its own struct
 * (sgd.c: `struct { rg_optim base; rg_sgd_opts opts; }`), so the base knows nothing of SGD or
 * Adam. A new optimizer is one file (its struct, its update, its key table and descriptor) plus
 * one line in registry.c. */
#ifndef RG_OPTIM_IMPL_H
#define RG_OPTIM_IMPL_H

#include <stddef.h>

#include "ringgrad/optim.h"

#define RG_OPTIM_MAX_BUFS 2

struct rg_optim {
    const char *kind;                   /* "sgd", "adam", "adamw" */
    /* applies the rule to parameters idx[0..count) (each has a gradient), all of one step:
     * one call, so that a rule may update them all in one multi-tensor kernel */
    void (*update)(rg_optim *o, const int *idx, int count);
    rg_named_tensor *params;            /* the trainable parameters; tensors borrowed */
    int n;
    float lr;
    float grad_scale;     /* the kernels read grad * grad_scale (1, or DDP's 1/N) */
    int64_t step;         /* rg_optim_step calls */
    int64_t *param_steps; /* per parameter: updates applied (torch's state['step']) */
    bool *no_decay;       /* per parameter: weight decay off (rg_optim_exclude_decay) */
    int *ready;           /* a step's parameters with a gradient (n slots) */
    int n_bufs;
    rg_tensor **bufs[RG_OPTIM_MAX_BUFS]; /* per parameter, e.g. exp_avg and exp_avg_sq */
    bool has_schedule;
    rg_lr_schedule schedule;
    rg_param_list state; /* names over step, param_steps and bufs, for checkpoints */
};

/* Allocates an optimizer of `size` bytes (a rule's struct, rg_optim first) over the trainable
 * tensors of `params` with n_bufs zeroed state buffers per parameter, named
 * "optim.state.<param>.<buf_names[b]>". NULL with RG_ENOMEM when a buffer does not fit. The
 * caller fills kind, update, lr and its options. */
rg_optim *rg_optim_alloc(size_t size, const rg_param_list *params, int n_bufs,
                         const char *const *buf_names);

/* A rule's weight decay for parameter i: `weight_decay`, or 0 when it was excluded. */
float rg_optim_decay_of(const rg_optim *o, int i, float weight_decay);

/* ---- the registry: name -> constructor from "key=value" options ---- */

typedef enum { RG_OPTKEY_FLOAT, RG_OPTKEY_BOOL } rg_optim_key_type;

/* One option a rule accepts by name: a field of its options struct. */
typedef struct {
    const char *key; /* "lr", "momentum", ... */
    rg_optim_key_type type;
    size_t offset; /* offsetof(<rule>_opts, field) */
} rg_optim_key;

typedef struct {
    const char *name;   /* what rg_optim_new and --optim take */
    size_t opts_size;   /* sizeof the rule's options struct */
    const rg_optim_key *keys;
    int n_keys;
    /* Fills the options with the rule's defaults (what rg_optim_new uses for absent keys). */
    void (*defaults)(void *opts);
    /* Checks the options and builds the optimizer; NULL with RG_EINVAL (a message naming the
     * bad value) or RG_ENOMEM. */
    rg_optim *(*create)(const rg_param_list *params, const void *opts);
} rg_optim_desc;

extern const rg_optim_desc rg_sgd_desc, rg_adam_desc, rg_adamw_desc;

#endif
