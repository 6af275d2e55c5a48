/* args.h — ringgrad-train's command line: one table of options drives parsing, validation
 * messages and --help, so they cannot drift apart. */
#ifndef RG_TRAIN_ARGS_H
#define RG_TRAIN_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    /* what to train */
    const char *model, *data, *data_dir, *device;
    int image_size, channels, num_classes, workers; /* 0: from the data / automatic */
    const char *augment, *normalize;
    bool small_input, zero_init_residual, sync_bn; /* ResNet options */
    double label_smoothing;
    int epochs;
    int64_t max_steps; /* -1: no limit */
    int batch_size;    /* per rank */
    int eval_batch_size; /* 0: automatic (setup.c) */
    /* optimisation */
    const char *optim, *lr_schedule, *lr_scaling;
    double lr;     /* < 0: the optimizer's default */
    bool lr_given; /* --lr was on the command line (it then overrides a checkpoint's) */
    double momentum, weight_decay, lr_gamma;
    int warmup_steps, lr_step_size;
    double warmup_start; /* < 0: automatic (setup.c's set_schedule) */
    bool scale_lr;
    bool nesterov, no_wd_bn_bias; /* SGD's Nesterov momentum; no decay on 1-D parameters */
    /* reproducibility */
    int64_t seed;
    bool no_shuffle;
    double dropout; /* < 0: the model's own rates */
    /* machine */
    int threads; /* 0: cores per local rank */
    /* files */
    const char *init, *save, *resume, *timeline;
    int64_t save_every; /* 0: only after each epoch */
    int keep;           /* periodic checkpoints kept */
    bool timeline_ops;  /* --timeline-ops: each op's backward too */
    bool json;
    bool buffer_checksum; /* test option: print each rank's buffers' FNV-1a hash at evaluation */
    /* distribution */
    const char *strategy, *comm, *compress;
    double bucket_mb, stall_seconds;
    int accum_steps, powersgd_rank;
    int pipeline_stages, micro_batches; /* --strategy pipeline */
    bool no_overlap, no_allreduce;
    int servers, max_staleness; /* --strategy ps-sync|ps-async */
    const char *straggle;       /* "RANK:MS", parsed into the two below */
    int straggle_rank;          /* -1: none */
    double straggle_ms;
    bool help;
    bool version;
    uint64_t given; /* bit k: the k-th option of args.c's table was on the command line */
} train_args;

/* Fills defaults, then parses argv. Returns 0 on success; on a usage error prints
 * "ringgrad-train: <problem>" and a hint to stderr and returns 2. */
int train_args_parse(train_args *a, int argc, char **argv);
/* The settings every rank must share, as "--name value" lines for rg_dist_opts.agree. */
void train_args_agreed(const train_args *a, char *buf, size_t cap);
/* A "note:" line on `out` for each option given where it changes nothing (--servers without
 * --strategy ps-*, --micro-batches without --strategy pipeline, ...): a script may pass one set
 * of flags to every strategy, so these are notes, not errors. Returns how many. */
int train_args_notes(const train_args *a, FILE *out);
/* Prints the --help text to stdout. */
void train_args_usage(void);

#endif
