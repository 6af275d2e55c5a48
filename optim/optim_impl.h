/* optim_impl.h — the optimizer struct, shared by optim.c (common parts) and one file per rule
 * (sgd.c, adam.c). Private to optim/. */
#ifndef RG_OPTIM_IMPL_H
#define RG_OPTIM_IMPL_H

#include "ringgrad/optim.h"

#define RG_OPTIM_MAX_BUFS 2

struct rg_optim {
    const char *kind;                   /* "sgd", "adam", "adamw" */
    void (*update)(rg_optim *o, int i); /* applies the rule to parameter i (it has a gradient) */
    rg_named_tensor *params;            /* the trainable parameters; tensors borrowed */
    int n;
    float lr;
    int64_t step;         /* rg_optim_step calls */
    int64_t *param_steps; /* per parameter: updates applied (torch's state['step']) */
    int n_bufs;
    rg_tensor **bufs[RG_OPTIM_MAX_BUFS]; /* per parameter, e.g. exp_avg and exp_avg_sq */
    rg_sgd_opts sgd;
    rg_adam_opts adam;
    bool has_schedule;
    rg_lr_schedule schedule;
    rg_param_list state; /* names over step, param_steps and bufs, for checkpoints */
};

/* Allocates an optimizer over the trainable tensors of `params` with n_bufs zeroed state
 * buffers per parameter, named "optim.state.<param>.<buf_names[b]>". NULL with RG_ENOMEM when a
 * buffer does not fit. The caller fills kind, update, lr and its options. */
rg_optim *rg_optim_alloc(const rg_param_list *params, int n_bufs, const char *const *buf_names);

#endif
