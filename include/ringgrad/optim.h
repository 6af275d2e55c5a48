/* optim.h — optimizers (SGD, Adam, AdamW) and learning-rate schedules.
 *
 *   rg_optim *opt = rg_adam_new(rg_model_params(net), &(rg_adam_opts){.lr = 1e-3f});
 *   each step:  forward, rg_backward(loss), [rg_ddp_wait], rg_optim_step(opt),
 *               rg_optim_zero_grad(opt)
 *
 * The update rules are exactly torch.optim's (single-tensor versions); the per-element formulas
 * are in core/kernels.h and run as fused backend kernels on the parameters' device. As in
 * torch, a parameter that has no gradient yet is skipped, and each parameter counts its own steps
 * (Adam's bias correction, SGD's first momentum step). The state (momentum buffers, moments, step
 * counts) can be listed by name for checkpoints: "optim.state.fc1.weight.exp_avg", "optim.step". */
#ifndef RG_OPTIM_H
#define RG_OPTIM_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rg_optim rg_optim;

/* torch.optim.SGD: d = g + wd*p; with momentum buf = mu*buf + (1-dampening)*d (buf = d on a
 * parameter's first step) and d = nesterov ? d + mu*buf : buf; then p -= lr*d. */
typedef struct {
    float lr;       /* > 0 */
    float momentum; /* 0: plain SGD, no buffer */
    float dampening;
    float weight_decay; /* L2 penalty added to the gradient */
    bool nesterov;      /* needs momentum > 0 and dampening 0, as in torch */
} rg_sgd_opts;

/* torch.optim.Adam / AdamW. Zero fields select torch's defaults, noted per field. */
typedef struct {
    float lr;           /* 0 selects 1e-3 */
    float beta1, beta2; /* 0 selects 0.9 and 0.999 */
    float eps;          /* 0 selects 1e-8 */
    float weight_decay; /* Adam: added to the gradient (L2); AdamW: p *= 1 - lr*wd (decoupled) */
    bool decoupled;     /* AdamW's rule; rg_adamw_new sets it */
} rg_adam_opts;

/* Optimizers over the parameters of `params` (buffers are skipped). The list's tensors are
 * borrowed and must outlive the optimizer; the state is allocated now, on each parameter's
 * device, so create the optimizer after moving the model. Options are copied; NULL opts selects
 * the defaults (not allowed for SGD, whose lr has none). Returns NULL with RG_ENOMEM when the
 * state does not fit, and with RG_EINVAL when one tensor is listed twice. Free with
 * rg_optim_free. */
RG_API rg_optim *rg_sgd_new(const rg_param_list *params, const rg_sgd_opts *opts);
RG_API rg_optim *rg_adam_new(const rg_param_list *params, const rg_adam_opts *opts);
/* Adam with decoupled weight decay (opts->decoupled is forced on). Unlike torch, weight_decay
 * stays 0 unless given; torch's AdamW default is 0.01. */
RG_API rg_optim *rg_adamw_new(const rg_param_list *params, const rg_adam_opts *opts);

/* ---- by name: the registry (a new optimizer registers in optim/registry.c) ---- */

/* The optimizer registered as `name` ("sgd", "adam", "adamw"), with options given as
 * "key=value,key=value" (NULL or "" for the defaults), the keys being the fields of its options
 * struct: rg_optim_new("sgd", params, "lr=0.1,momentum=0.9,nesterov=1"). Absent keys take the
 * defaults of rg_<name>_new, and SGD's lr defaults to 0.01 here. Returns NULL with RG_EINVAL
 * naming an unknown optimizer, key or value (and listing the known ones), or with RG_ENOMEM. */
RG_API rg_optim *rg_optim_new(const char *name, const rg_param_list *params, const char *options);
/* The registered names, "sgd, adam, adamw". Static string. */
RG_API const char *rg_optim_names(void);

/* Updates every parameter that has a gradient, with the current learning rate; then, if a
 * schedule is set, moves the learning rate to the schedule's value for the next step. */
RG_API void rg_optim_step(rg_optim *opt);
/* Sets every existing gradient to zero in place (memset). Gradients are never freed or
 * reallocated: under DDP they are views into a bucket. */
RG_API void rg_optim_zero_grad(rg_optim *opt);

/* The learning rate the next rg_optim_step uses, and setting it (>= 0). */
RG_API float rg_optim_get_lr(const rg_optim *opt);
RG_API void rg_optim_set_lr(rg_optim *opt, float lr);
/* The factor the update applies to every gradient as it reads it (default 1): the kernels use
 * grad_scale * grad in place of grad, in the same pass. DDP uses it to fold its 1/N average into
 * the step instead of a separate pass over the gradients (rg_ddp_opts.defer_average; set it to
 * rg_ddp_grad_scale(ddp)), as fused optimizers fold in a loss scale. scale > 0. */
RG_API void rg_optim_set_grad_scale(rg_optim *opt, float scale);
RG_API float rg_optim_get_grad_scale(const rg_optim *opt);
/* Number of rg_optim_step calls so far (restored by a checkpoint). */
RG_API int64_t rg_optim_num_steps(const rg_optim *opt);
/* "sgd", "adam" or "adamw". Static string. */
RG_API const char *rg_optim_kind(const rg_optim *opt);

/* ---- weight decay per parameter ---- */

/* The usual ResNet recipe (torchvision's --norm-weight-decay 0 --bias-weight-decay 0, timm's
 * default) decays only the weights of convolutions and dense layers: tensors of 2 or more
 * dimensions. rg_param_takes_decay says so of a parameter by its shape; 1-D tensors (biases,
 * BatchNorm's weight and bias) do not. */
RG_API bool rg_param_takes_decay(const rg_tensor *param);
/* Turns weight decay (the L2 term, or AdamW's decoupled decay) off for the optimizer's parameter
 * called `name`, or for every piece of it this optimizer holds (ZeRO-1 and parameter servers hand
 * the optimizer pieces named after their parameter). Returns the number of pieces: 0 when the
 * optimizer holds none of it. */
RG_API int rg_optim_exclude_decay(rg_optim *opt, const char *name);
/* rg_optim_exclude_decay for every trainable tensor of `params` (the model's list, with its full
 * shapes) that !rg_param_takes_decay. Returns how many of them the optimizer holds. */
RG_API int rg_optim_exclude_decay_1d(rg_optim *opt, const rg_param_list *params);
/* Whether the optimizer's parameter `name` takes weight decay (false if it holds no such). */
RG_API bool rg_optim_decays(const rg_optim *opt, const char *name);

/* ---- learning-rate schedules: step -> lr ---- */

typedef enum { RG_LR_CONSTANT, RG_LR_STEP, RG_LR_COSINE, RG_LR_KIND_COUNT } rg_lr_kind;

typedef struct {
    rg_lr_kind kind;
    double base_lr;
    /* RG_LR_STEP (torch StepLR): lr = base * gamma^floor(t / step_size) */
    int64_t step_size;
    double gamma;
    /* RG_LR_COSINE (torch CosineAnnealingLR): lr = eta_min + (base - eta_min)(1 + cos(pi
     * t/t_max))/2 */
    int64_t t_max;
    double eta_min;
    /* Linear warmup before the schedule (torch SequentialLR of LinearLR(warmup_start,
     * total_iters=warmup_steps) and the schedule): for t < warmup_steps, lr = base *
     * (warmup_start + (1 - warmup_start) t / warmup_steps); afterwards the schedule at
     * t - warmup_steps. warmup_steps 0: no warmup. warmup_start 0 starts from lr 0. */
    int64_t warmup_steps;
    double warmup_start;
} rg_lr_schedule;

/* The learning rate at step (or epoch) t >= 0. Stops (RG_CHECK) on an invalid schedule
 * (step_size or t_max < 1 for their kinds). */
RG_API float rg_lr_schedule_at(const rg_lr_schedule *s, int64_t t);

/* Lets the optimizer apply a schedule by itself (copied; NULL removes it): the learning rate
 * becomes the schedule's value at rg_optim_num_steps(), now and after every step. To schedule
 * per epoch instead, call rg_optim_set_lr(opt, rg_lr_schedule_at(&s, epoch)) yourself. */
RG_API void rg_optim_set_schedule(rg_optim *opt, const rg_lr_schedule *s);

/* ---- state, for checkpoints ---- */

/* The optimizer's state as named tensors: "optim.step" (int64, shape ()), and per parameter
 * "optim.state.<name>.step" (int64, shape ()) plus "<...>.momentum_buffer" (SGD with momentum)
 * or "<...>.exp_avg" and "<...>.exp_avg_sq" (Adam). Writing into these tensors (a checkpoint
 * load) restores the state. Borrowed from opt, valid until rg_optim_free. */
RG_API const rg_param_list *rg_optim_state(rg_optim *opt);

/* Bytes of the state's buffers (moments, momentum buffers; step counters excluded): what the
 * optimizer costs in memory, e.g. to compare DDP with ZeRO-1 (ringgrad-train --json). */
RG_API size_t rg_optim_state_bytes(const rg_optim *opt);

/* Frees the optimizer and its state (not the parameters). NULL is a no-op. */
RG_API void rg_optim_free(rg_optim *opt);

#ifdef __cplusplus
}
#endif

#endif
