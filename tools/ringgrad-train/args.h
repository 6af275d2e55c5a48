/* args.h — ringgrad-train's command line: one table of options drives parsing, validation
 * messages and --help, so they cannot drift apart. */
#ifndef RG_TRAIN_ARGS_H
#define RG_TRAIN_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    /* what to train */
    const char *model, *data, *data_dir, *device;
    bool small_input, zero_init_residual, sync_bn; /* ResNet options */
    int num_classes;                               /* 0: the dataset's */
    double label_smoothing;
    int epochs;
    int64_t max_steps; /* -1: no limit */
    int batch_size;    /* per rank */
    /* optimisation */
    const char *optim, *lr_schedule;
    double lr, momentum, weight_decay, lr_gamma;
    int warmup_steps, lr_step_size;
    bool scale_lr;
    /* reproducibility */
    int64_t seed;
    bool no_shuffle;
    double dropout; /* < 0: the model's own rates */
    /* machine */
    int threads; /* 0: cores per local rank */
    /* files */
    const char *init, *save, *resume, *timeline;
    bool json;
    /* distribution */
    const char *comm, *compress;
    double bucket_mb, stall_seconds;
    int accum_steps;
    bool no_overlap, no_allreduce;
    bool help;
} train_args;

/* Fills defaults, then parses argv. Returns 0 on success; on a usage error prints
 * "ringgrad-train: <problem>" and a hint to stderr and returns 2. */
int train_args_parse(train_args *a, int argc, char **argv);
/* Prints the --help text to stdout. */
void train_args_usage(void);

#endif
