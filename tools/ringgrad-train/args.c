/* args.c — parsing and validating ringgrad-train's flags from one option table. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_INT, OPT_I64, OPT_DBL, OPT_STR, OPT_FLAG, OPT_KIND_COUNT } opt_kind;

typedef struct {
    const char *name, *metavar, *help;
    opt_kind kind;
    size_t offset;
    double min, max; /* numeric range, inclusive */
    const char *choices; /* "a|b|c" for strings, or NULL */
} opt;

#define F(field) offsetof(train_args, field)
static const opt options[] = {
    {"model", "NAME", "model to train", OPT_STR, F(model), 0, 0, "cnn|mlp|resnet18|resnet34|resnet50|resnet20|resnet56"},
    {"small-input", NULL, "resnet18/34/50: 3x3 stride-1 stem and no max-pool (for 28-64 px images)", OPT_FLAG, F(small_input), 0, 0, NULL},
    {"zero-init-residual", NULL, "ResNets: start each block's last BatchNorm weight at 0", OPT_FLAG, F(zero_init_residual), 0, 0, NULL},
    {"num-classes", "K", "classifier outputs (default: the dataset's classes)", OPT_INT, F(num_classes), 1, 1e7, NULL},
    {"label-smoothing", "X", "cross-entropy label smoothing (PyTorch's formula)", OPT_DBL, F(label_smoothing), 0, 1, NULL},
    {"sync-bn", NULL, "SyncBatchNorm: batch statistics over every rank's batch", OPT_FLAG, F(sync_bn), 0, 0, NULL},
    {"data", "NAME", "dataset: Fashion-MNIST or generated data", OPT_STR, F(data), 0, 0, "fmnist|synthetic"},
    {"data-dir", "DIR", "Fashion-MNIST folder (default: $RG_DATA_DIR or /usr/share/datasets/fashion-mnist)", OPT_STR, F(data_dir), 0, 0, NULL},
    {"device", "DEV", "cpu, cuda or cuda:N (with CUDA, each rank takes the GPU of its local rank)", OPT_STR, F(device), 0, 0, NULL},
    {"epochs", "N", "passes over the training set", OPT_INT, F(epochs), 1, 1e6, NULL},
    {"max-steps", "N", "stop after N optimizer steps (0 allowed: evaluate only)", OPT_I64, F(max_steps), 0, 1e15, NULL},
    {"batch-size", "N", "images per step on each rank (global batch = N x ranks)", OPT_INT, F(batch_size), 1, 1 << 20, NULL},
    {"optim", "NAME", "optimizer", OPT_STR, F(optim), 0, 0, "adam|adamw|sgd"},
    {"lr", "X", "learning rate (default 1e-3 for adam/adamw, 0.01 for sgd)", OPT_DBL, F(lr), 1e-12, 1e6, NULL},
    {"momentum", "X", "SGD momentum", OPT_DBL, F(momentum), 0, 1, NULL},
    {"weight-decay", "X", "L2 penalty (adam, sgd) or decoupled decay (adamw)", OPT_DBL, F(weight_decay), 0, 1e6, NULL},
    {"lr-schedule", "NAME", "learning-rate schedule after warmup", OPT_STR, F(lr_schedule), 0, 0, "constant|step|cosine"},
    {"lr-step-size", "N", "step schedule: multiply by --lr-gamma every N steps", OPT_INT, F(lr_step_size), 1, 1e9, NULL},
    {"lr-gamma", "X", "step schedule factor", OPT_DBL, F(lr_gamma), 0, 1, NULL},
    {"warmup-steps", "N", "linear warmup from 0 to the full rate over N steps", OPT_INT, F(warmup_steps), 0, 1e9, NULL},
    {"scale-lr", NULL, "linear scaling rule: lr x world size (use with --warmup-steps; Goyal et al.)", OPT_FLAG, F(scale_lr), 0, 0, NULL},
    {"seed", "N", "seed for initialisation, shuffling and dropout", OPT_I64, F(seed), 0, 9e15, NULL},
    {"no-shuffle", NULL, "take batches in file order (batch i holds images iB .. iB+B-1)", OPT_FLAG, F(no_shuffle), 0, 0, NULL},
    {"dropout", "P", "override every dropout rate (0 disables dropout)", OPT_DBL, F(dropout), 0, 1, NULL},
    {"threads", "N", "CPU threads per rank (default: $RG_NUM_THREADS, else cores / ranks on this host)", OPT_INT, F(threads), 0, 4096, NULL},
    {"init", "FILE", "start from the weights in a safetensors checkpoint", OPT_STR, F(init), 0, 0, NULL},
    {"save", "FILE", "write a checkpoint (weights, optimizer, position) after each epoch and at the end", OPT_STR, F(save), 0, 0, NULL},
    {"resume", "FILE", "continue exactly from a checkpoint written by --save", OPT_STR, F(resume), 0, 0, NULL},
    {"timeline", "FILE", "write a Chrome-trace JSON of the run (open in Perfetto or chrome://tracing)", OPT_STR, F(timeline), 0, 0, NULL},
    {"json", NULL, "print a one-line JSON summary as the last line", OPT_FLAG, F(json), 0, 0, NULL},
    {"comm", "NAME", "collective backend (default: $RG_COMM, else nccl on cuda and mpi on cpu)", OPT_STR, F(comm), 0, 0, "mpi|ring|nccl"},
    {"bucket-mb", "X", "gradient bucket size in MiB", OPT_DBL, F(bucket_mb), 1e-6, 1e6, NULL},
    {"no-overlap", NULL, "baseline: one allreduce of all gradients after backward, no buckets", OPT_FLAG, F(no_overlap), 0, 0, NULL},
    {"no-allreduce", NULL, "baseline: send no gradients, only keep the ranks in step (replicas drift apart)", OPT_FLAG, F(no_allreduce), 0, 0, NULL},
    {"accum-steps", "K", "gradient accumulation: reduce and step every K batches", OPT_INT, F(accum_steps), 1, 1e6, NULL},
    {"compress", "NAME", "gradient compression on the wire", OPT_STR, F(compress), 0, 0, "none|fp16"},
    {"stall-seconds", "S", "report ranks that have not joined a collective after S seconds", OPT_DBL, F(stall_seconds), 0.1, 1e7, NULL},
    {"help", NULL, "show this help", OPT_FLAG, F(help), 0, 0, NULL},
};
#undef F

static void defaults(train_args *a) {
    *a = (train_args){
        .model = "cnn", .data = "fmnist", .device = "cpu", .epochs = 2, .max_steps = -1,
        .batch_size = 128, .optim = "adam", .lr = -1, .momentum = 0, .lr_schedule = "constant",
        .lr_step_size = 1000, .lr_gamma = 0.1, .seed = 42, .dropout = -1, .bucket_mb = 25,
        .accum_steps = 1, .compress = "none", .stall_seconds = 60,
    };
}

static bool in_choices(const char *v, const char *choices) {
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, v, n) == 0) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one write, so that under mpirun the ranks' messages do not interleave */
    fprintf(stderr, "ringgrad-train: %s\nTry 'ringgrad-train --help'.\n", msg);
    return 2;
}

static int set_value(train_args *a, const opt *o, const char *v) {
    char *end = NULL, *field = (char *)a + o->offset;
    errno = 0;
    if (o->kind == OPT_STR) {
        if (!*v) return usage_error("--%s needs a value", o->name);
        if (o->choices && !in_choices(v, o->choices))
            return usage_error("--%s: '%s' is not one of %s", o->name, v, o->choices);
        *(const char **)field = v;
        return 0;
    }
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x))
        return usage_error("--%s: '%s' is not a number", o->name, v);
    if (x < o->min || x > o->max)
        return usage_error("--%s: %s is out of range (%g to %g)", o->name, v, o->min, o->max);
    if ((o->kind == OPT_INT || o->kind == OPT_I64) && x != floor(x))
        return usage_error("--%s: '%s' is not a whole number", o->name, v);
    if (o->kind == OPT_INT) *(int *)field = (int)x;
    else if (o->kind == OPT_I64) *(int64_t *)field = (int64_t)x;
    else *(double *)field = x;
    return 0;
}

int train_args_parse(train_args *a, int argc, char **argv) {
    defaults(a);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) return usage_error("unexpected argument '%s'", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
            if (strlen(options[k].name) == len && strncmp(options[k].name, name, len) == 0) o = &options[k];
        if (!o) return usage_error("unknown option '%s'", arg);
        if (o->kind == OPT_FLAG) {
            if (eq) return usage_error("--%s takes no value", o->name);
            *(bool *)((char *)a + o->offset) = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return usage_error("--%s needs a value", o->name);
        if (set_value(a, o, v)) return 2;
    }
    if (a->lr < 0) a->lr = strcmp(a->optim, "sgd") == 0 ? 0.01 : 1e-3;
    if (a->resume && a->init) return usage_error("--resume and --init exclude each other");
    return 0;
}

void train_args_usage(void) {
    printf("Usage: ringgrad-train [options]\n"
           "       mpirun -np N ringgrad-train [options]   (data-parallel over N ranks)\n\n"
           "Trains a model on Fashion-MNIST; with no options, the CNN with Adam (lr 1e-3,\n"
           "batch 128) for 2 epochs.\n\nOptions:\n");
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++) {
        const opt *o = &options[k];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-22s %s", left, o->help);
        if (o->choices) printf(" (%s)", o->choices);
        printf("\n");
    }
    printf("\nEnvironment: RG_NUM_THREADS, RG_COMM, RG_DATA_DIR, RG_STALL_SECONDS, and RG_PROGRESS=lines|bar\n"
           "(the progress bar redraws in place on a terminal; under mpirun a rank's stdout is a\n"
           "terminal even when mpirun writes to a file, so scripts/rg-mpirun sets lines then).\n");
}
