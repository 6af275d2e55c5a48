/* trainer.h — the state of one ringgrad-train run, shared by its files:
 *   ringgrad-train.c      main: set-up in order, the epochs, the summary, tear-down
 *   ringgrad-train/setup.c   model, optimizer, checkpoints, DDP, loaders
 *   ringgrad-train/data.c    datasets (fmnist, synthetic, imagefolder), augmentation options
 *   ringgrad-train/args.c    flags;  ringgrad-train/progress.c  the Keras-style bar
 *   ringgrad-train/guard.c   NaN/Inf per step, signals, output probes, the ranks' stop flags */
#ifndef RG_TRAINER_H
#define RG_TRAINER_H

#include "args.h"
#include "progress.h"
#include "ringgrad.h"

typedef struct {
    train_args a;
    rg_dist *dist;
    rg_comm *comm;
    int rank, world, threads;
    rg_device dev;
    rg_dataset *train_ds, *test_ds;
    rg_model *net;
    rg_optim *opt;
    rg_ddp *ddp;     /* --strategy ddp */
    rg_zero1 *zero;  /* --strategy zero1: owns opt */
    rg_pipeline *pipe;             /* --strategy pipeline: opt holds this stage's parameters */
    rg_comm *stage_comm, *dp_comm; /* pipeline: my pipeline's ranks; my stage's copies (D > 1) */
    int dp_rank, dp_size;          /* pipeline: which of the D pipelines, and D */
    rg_ps *ps;       /* --strategy ps-sync|ps-async: owns opt (a server's; NULL on a worker) */
    bool server;     /* this rank is a parameter server: it serves steps instead of training */
    int wrank, workers; /* this rank among the ranks that train, and their number (rank, world
                         * except with parameter servers) */
    int64_t *staleness_hist; /* ps: max_staleness + 1 bins, summed over the servers */
    int64_t ps_state_bytes;  /* ps: the servers' optimizer state, summed */
    rg_loader *train, *test;
    float *mean, *std; /* --normalize: (C) each, or NULL */
    progress prog;
    rg_bn_sync bn_sync; /* --sync-bn: the BatchNorm layers' hook into comm */

    int64_t step;         /* optimizer steps taken (across epochs, restored by --resume) */
    int64_t start_epoch;  /* first epoch to run (from --resume) */
    int64_t skip_batches; /* batches of start_epoch already trained before --resume */
    int eval_batch;       /* images per evaluation batch (--eval-batch-size, or setup.c's rule) */
    rg_checkpoint_meta resume_meta; /* what --resume read (rank 0) and broadcast */
    double train_seconds; /* time spent in training steps only */
    int64_t images;       /* images trained, all ranks */
    double last_loss, last_acc, test_acc;
    bool trained_any;
    /* guard.c: the per-step check, signals */
    int64_t epoch;        /* the epoch being trained */
    bool bad_loss;        /* a micro-batch of this step had a non-finite loss */
    float bad_loss_value;
    bool diverged;        /* a non-finite loss or gradient stopped training */
    int stop_signal;      /* the ranks agreed to stop after this step for this signal */
    bool local_error;     /* this rank failed (reported): every rank stops at the next check */
    rg_comm_req *guard_req; /* the flags exchange in flight (several ranks) */
    float *guard_flags;     /* its buffer: one slot per rank */
    int ps_flags;           /* parameter servers: this rank's own flags in this epoch */
    bool saving_periodic;   /* trainer_save called by guard_save_periodic (rank 0 alone, for ps) */
    const char *ps_bad;     /* ... and its first non-finite gradient (a parameter's name) */
    /* --json "epoch_log": after each epoch (the first RG_TRAIN_EPOCH_LOG), the test accuracy and
     * the wall seconds of training so far: each epoch from its start to the end of its metrics
     * sum, so the wait for the slowest worker counts and evaluation does not (docs/LABS.md,
     * lab 3: accuracy against time) */
    double wall_train;
#define RG_TRAIN_EPOCH_LOG 256
    double log_acc[RG_TRAIN_EPOCH_LOG], log_secs[RG_TRAIN_EPOCH_LOG];
    int n_log;
} trainer;

/* "ringgrad-train: error: <msg>" on stderr, naming the rank in a multi-rank job. */
void trainer_error(const trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Collective: the worst status over all ranks, so that every rank stops together when one cannot
 * go on (a missing file on one host). Each failing rank has already printed its message. */
RG_NODISCARD rg_status trainer_agree(trainer *t, rg_status mine);

/* Set-up steps (data.c, setup.c); each returns RG_OK or prints its error and returns the status. */
RG_NODISCARD rg_status trainer_setup_data(trainer *t);
/* The loader options of --augment, --normalize and --workers for the training or test loader
 * (batch, shuffle and shard are the caller's). */
rg_loader_opts trainer_loader_opts(const trainer *t, bool train);
/* Collective, after an epoch: a file that failed to decode in either loader stops every rank. */
RG_NODISCARD rg_status trainer_check_loaders(trainer *t);
RG_NODISCARD rg_status trainer_setup_model(trainer *t);
RG_NODISCARD rg_status trainer_setup_loaders(trainer *t);
/* The optimizer's "key=value" options from the flags (--lr, --momentum, --nesterov,
 * --weight-decay), and --no-wd-bn-bias on t->opt: no decay for the 1-D tensors of `params` (the
 * model's, or a pipeline stage's, with their full shapes). */
void trainer_optim_options(const trainer *t, char *opts, size_t cap);
void trainer_exclude_decay(trainer *t, const rg_param_list *params);
/* The optimizer of this run (--optim and its options) over every parameter of the model: what a
 * checkpoint holds when the ranks hold parts of the state (zero1's shards, the pipeline's
 * stages), made on rank 0 only for a save or a resume. NULL, with the message printed, when the
 * optimizer cannot be made. */
rg_optim *trainer_full_optimizer(trainer *t);
/* After rank 0 read a checkpoint into the model and its optimizer (and a strategy that shards the
 * optimizer state sent each rank its part): the position, learning rate and dropout streams to
 * every rank, and a learning rate given on the command line over the checkpoint's. Collective. */
RG_NODISCARD rg_status trainer_finish_resume(trainer *t, rg_checkpoint_meta *meta);
/* Root 0's optimizer state (every tensor of rg_optim_state) to every rank of c. Collective. */
RG_NODISCARD rg_status trainer_broadcast_state(rg_comm *c, rg_optim *o);
/* Rank 0's model buffers (BatchNorm statistics) to every rank, before each forward and each
 * evaluation, as PyTorch DDP's broadcast_buffers: under ddp and zero1, unless --sync-bn. The
 * pipeline's D replicas and the parameter servers' workers keep their own. Collective. */
RG_NODISCARD rg_status trainer_broadcast_buffers(trainer *t);

/* --strategy pipeline (pipe.c): the checks, the stages and their optimizer; one batch through
 * the pipeline (RG_TRAIN: its gradients, averaged over the D pipelines), in its own step scope;
 * then (trainer_pipe_update) the optimizer step on this stage's parameters. */
RG_NODISCARD rg_status trainer_setup_pipeline(trainer *t);
RG_NODISCARD rg_status trainer_pipe_step(trainer *t, const rg_batch *b, rg_mode mode,
                                         rg_pipeline_result *r);
void trainer_pipe_update(trainer *t);
/* Rank 0 writes a checkpoint of the current state; zero1's and the pipeline's other ranks send
 * their parts first, the rest return RG_OK. Collective under zero1 and pipeline. */
RG_NODISCARD rg_status trainer_save(trainer *t, int64_t epoch);


/* ---- guard.c ---- */
typedef enum {
    GUARD_GO,              /* take the optimizer step and go on */
    GUARD_STOP_AFTER_STEP, /* a signal: take the step, save, stop (every rank agrees) */
    GUARD_DIVERGED,        /* a non-finite loss or gradient somewhere: no step, stop (reported) */
    GUARD_FAILED,          /* the check itself failed (a peer died; reported) */
} guard_verdict;
/* SIGPIPE ignored (from start-up on). */
void guard_ignore_sigpipe(void);
/* SIGINT/SIGTERM: the first is noted for guard_step, the second exits. Installed when training
 * begins: before that there is nothing to save, and a signal ends the set-up at once (a large
 * synthetic set takes seconds to make, and a noted signal waited for all of it and a step). */
void guard_install_signals(void);
int guard_signal(void); /* the signal caught, or 0 */
/* Once: a warning when writing to stdout failed (a closed pipe). */
void guard_check_stdout(trainer *t);
/* Called after every micro-step with its loss; at a synchronising step (sync) it checks the
 * reduced gradients and, with several ranks, collects the flags exchanged at the previous step
 * and starts this step's exchange (collective, asynchronous). */
guard_verdict guard_step(trainer *t, float loss, bool sync);
/* Collective: the verdict of the exchange still in flight, when the steps end. */
guard_verdict guard_finish(trainer *t);
/* Parameter servers have no per-step allreduce (async workers must not line up): a worker's own
 * flags for the step (its signal, loss, gradients, failure) travel in-band with its push
 * (rg_ps_push_pull), and it stops when any come back. guard_ps_flags: this step's own flags, to
 * push. guard_ps_finish, at the end of every epoch's steps (collective over every rank, workers
 * and servers): a worker ends its period (rg_ps_end), then every rank's own flags are exchanged
 * and decide the verdict as guard_step's would (a signal caught by a server alone counts here). */
int guard_ps_flags(trainer *t, float loss);
guard_verdict guard_ps_finish(trainer *t, guard_verdict v);
/* Waits for (and ignores) an exchange in flight and frees the buffer; at tear-down. */
void guard_free(trainer *t);
/* Creates and removes a probe file next to path; an error names the flag and the path. */
RG_NODISCARD rg_status guard_probe_output(const char *flag, const char *path);
/* Collective: every rank's `mine` must equal rank 0's; otherwise an error on every rank naming
 * `what` and the ranks with their values. */
RG_NODISCARD rg_status guard_agree_i64(trainer *t, const char *what, int64_t mine);
/* Rank 0 probes --save and --timeline; every rank fails together (collective). */
RG_NODISCARD rg_status guard_check_outputs(trainer *t);
/* --save-every N: after step N, 2N, ... rank 0 writes FILE-step<S>.safetensors and removes the one
 * --keep saves before it. */
RG_NODISCARD rg_status guard_save_periodic(trainer *t, int64_t epoch);
/* "key":x, (null when not finite) and a JSON string literal */
void guard_json_number(FILE *out, const char *key, double x, const char *fmt);
void guard_json_string(FILE *out, const char *s);
/* The first error message trainer_error printed on this rank ("" if none). */
const char *trainer_first_error(void);
#endif
