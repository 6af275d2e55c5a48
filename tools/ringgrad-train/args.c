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
    {"label-smoothing", "X", "cross-entropy label smoothing (PyTorch's formula)", OPT_DBL, F(label_smoothing), 0, 1, NULL},
    {"sync-bn", NULL, "SyncBatchNorm: batch statistics over every rank's batch (ddp, zero1)", OPT_FLAG, F(sync_bn), 0, 0, NULL},
    {"data", "NAME", "dataset: Fashion-MNIST, generated data, or an image folder (DIR/train/<class>/*, DIR/val/<class>/*)", OPT_STR, F(data), 0, 0, "fmnist|synthetic|imagefolder"},
    {"data-dir", "DIR", "Fashion-MNIST folder (default: $RG_DATA_DIR or /usr/share/datasets/fashion-mnist), or the image folder's root", OPT_STR, F(data_dir), 0, 0, NULL},
    {"image-size", "S", "imagefolder, synthetic: SxS images (imagefolder resizes; default: the first image's size, synthetic 28; 0: that default)", OPT_INT, F(image_size), 0, 16384, NULL},
    {"channels", "C", "imagefolder: 1 (gray) or 3 (RGB), converted (default: the first image's); synthetic: channels (default 1); 0: the default", OPT_INT, F(channels), 0, 1024, NULL},
    {"num-classes", "K", "classifier outputs (default: the dataset's classes); with --data synthetic, how many to generate (default 10); 0: the default", OPT_INT, F(num_classes), 0, 1000000, NULL},
    {"augment", "NAME", "training augmentation: flip-crop = pad 4, random crop, flip (CIFAR); rrc = RandomResizedCrop + flip, evaluated on Resize(S*8/7) + CenterCrop(S) (ImageNet)", OPT_STR, F(augment), 0, 0, "none|flip-crop|rrc"},
    {"normalize", "SPEC", "per-channel (x/255 - mean)/std: none, imagenet, fmnist, MEAN,STD (every channel) or M1,..,MC,S1,..,SC", OPT_STR, F(normalize), 0, 0, NULL},
    {"workers", "N", "threads per rank that decode and augment batches (default: threads per rank, at most 4, for imagefolder, synthetic sets made as read, or --augment; else 1; 0: that default)", OPT_INT, F(workers), 0, 256, NULL},
    {"device", "DEV", "cpu, cuda or cuda:N (with CUDA, each rank takes the GPU of its local rank)", OPT_STR, F(device), 0, 0, NULL},
    {"epochs", "N", "passes over the training set", OPT_INT, F(epochs), 1, 1e6, NULL},
    {"max-steps", "N", "stop after N optimizer steps (0 allowed: evaluate only)", OPT_I64, F(max_steps), 0, 1e15, NULL},
    {"batch-size", "N", "images per step on each rank (global batch = N x ranks)", OPT_INT, F(batch_size), 1, 1 << 20, NULL},
    {"eval-batch-size", "N", "images per evaluation batch (default: 1000, at most 4 Mi input values per batch, at least --batch-size; 0: that default)", OPT_INT, F(eval_batch_size), 0, 1 << 20, NULL},
    {"optim", "NAME", "optimizer, by its name in the registry (optim/registry.c): adam, adamw or sgd", OPT_STR, F(optim), 0, 0, NULL},
    {"lr", "X", "learning rate (default 1e-3 for adam/adamw, 0.01 for sgd)", OPT_DBL, F(lr), 1e-12, 1e6, NULL},
    {"momentum", "X", "SGD momentum", OPT_DBL, F(momentum), 0, 1, NULL},
    {"nesterov", NULL, "SGD: Nesterov momentum (needs --optim sgd and --momentum)", OPT_FLAG, F(nesterov), 0, 0, NULL},
    {"weight-decay", "X", "L2 penalty (adam, sgd; default 0) or decoupled decay (adamw; default 0.01, as torch.optim.AdamW)", OPT_DBL, F(weight_decay), 0, 1e6, NULL},
    {"no-wd-bn-bias", NULL, "no weight decay on 1-D parameters (biases, BatchNorm weights and biases); conv and dense weights keep it", OPT_FLAG, F(no_wd_bn_bias), 0, 0, NULL},
    {"lr-schedule", "NAME", "learning-rate schedule after warmup", OPT_STR, F(lr_schedule), 0, 0, "constant|step|cosine"},
    {"lr-step-size", "N", "step schedule: multiply by --lr-gamma every N steps", OPT_INT, F(lr_step_size), 1, 1e9, NULL},
    {"lr-gamma", "X", "step schedule factor", OPT_DBL, F(lr_gamma), 0, 1, NULL},
    {"warmup-steps", "N", "ramp the rate linearly over the first N steps: with --scale-lr from --lr to the scaled rate (Goyal et al.), else from --warmup-start x --lr to --lr", OPT_INT, F(warmup_steps), 0, 1e9, NULL},
    {"warmup-start", "F", "the warmup's first rate, as a fraction of the rate it ramps to (LinearLR's start_factor; default: 1/k with --scale-lr, else 0.01 as torchvision's recipe)", OPT_DBL, F(warmup_start), 0, 1, NULL},
    {"scale-lr", NULL, "scale the rate by k = ranks x --accum-steps (the global batch's growth)", OPT_FLAG, F(scale_lr), 0, 0, NULL},
    {"lr-scaling", "RULE", "--scale-lr's rule: lr x k (Goyal et al., for SGD) or lr x sqrt(k) (for Adam)", OPT_STR, F(lr_scaling), 0, 0, "linear|sqrt"},
    {"seed", "N", "seed for initialisation, shuffling and dropout", OPT_I64, F(seed), 0, 9e15, NULL},
    {"no-shuffle", NULL, "take batches in file order (batch i holds images iB .. iB+B-1)", OPT_FLAG, F(no_shuffle), 0, 0, NULL},
    {"dropout", "P", "override every dropout rate (0 disables dropout)", OPT_DBL, F(dropout), 0, 1, NULL},
    {"threads", "N", "CPU threads per rank (default: $RG_NUM_THREADS, else cores / ranks on this host; 0: that default)", OPT_INT, F(threads), 0, 1024, NULL},
    {"init", "FILE", "start from the weights in a safetensors checkpoint", OPT_STR, F(init), 0, 0, NULL},
    {"save", "FILE", "write a checkpoint (weights, optimizer, position) after each epoch and at the end", OPT_STR, F(save), 0, 0, NULL},
    {"save-every", "N", "also write FILE-step<S>.safetensors every N optimizer steps (needs --save)", OPT_I64, F(save_every), 1, 1e15, NULL},
    {"keep", "K", "with --save-every: keep the last K of those files (default 3)", OPT_INT, F(keep), 1, 1e6, NULL},
    {"resume", "FILE", "continue exactly from a checkpoint written by --save", OPT_STR, F(resume), 0, 0, NULL},
    {"timeline", "FILE", "write a Chrome-trace JSON of the run (open in Perfetto or chrome://tracing)", OPT_STR, F(timeline), 0, 0, NULL},
    {"timeline-ops", NULL, "with --timeline: also each op's backward (conv2d, linear, ...) inside backward", OPT_FLAG, F(timeline_ops), 0, 0, NULL},
    {"json", NULL, "print a one-line JSON summary as the last line", OPT_FLAG, F(json), 0, 0, NULL},
    {"strategy", "NAME", "ddp (allreduce the gradients), zero1 (ZeRO-1: optimizer state sharded over the ranks), pipeline (the model cut into stages, one per rank; GPipe), ps-sync or ps-async (parameter servers on the last --servers ranks)", OPT_STR, F(strategy), 0, 0, "ddp|zero1|pipeline|ps-sync|ps-async"},
    {"pipeline-stages", "S", "--strategy pipeline: stages; the ranks form world / S pipelines (data-parallel)", OPT_INT, F(pipeline_stages), 2, 8, NULL},
    {"micro-batches", "M", "--strategy pipeline: micro-batches per batch (GPipe)", OPT_INT, F(micro_batches), 1, 1 << 20, NULL},
    {"servers", "K", "ps-sync/ps-async: the last K ranks are parameter servers, the rest workers", OPT_INT, F(servers), 1, 1e6, NULL},
    {"max-staleness", "S", "ps-async: a worker runs at most S steps ahead of the slowest (SSP; 0 is synchronous)", OPT_INT, F(max_staleness), 0, 1e6, NULL},
    {"straggle", "RANK:MS", "test option: rank RANK sleeps MS ms in every step (an injected straggler)", OPT_STR, F(straggle), 0, 0, NULL},
    {"buffer-checksum", NULL, "test option: every rank prints a checksum of its model's buffers (BatchNorm statistics) before and after each evaluation's broadcast", OPT_FLAG, F(buffer_checksum), 0, 0, NULL},
    {"comm", "NAME", "collective backend (default: $RG_COMM, else nccl on cuda and mpi on cpu; mpi runs allreduces of 1 MiB and more on the ring, and such reduce-scatters across hosts; RG_MPI_RING=0 keeps MPI's)", OPT_STR, F(comm), 0, 0, "mpi|ring|nccl"},
    {"bucket-mb", "X", "gradient bucket size in MiB (ddp, zero1)", OPT_DBL, F(bucket_mb), 1e-6, 1e6, NULL},
    {"no-overlap", NULL, "baseline: one allreduce (zero1: reduce-scatter) of all gradients after backward, no buckets", OPT_FLAG, F(no_overlap), 0, 0, NULL},
    {"no-allreduce", NULL, "baseline: send no gradients, only keep the ranks in step (replicas drift apart)", OPT_FLAG, F(no_allreduce), 0, 0, NULL},
    {"accum-steps", "K", "gradient accumulation: reduce and step every K batches", OPT_INT, F(accum_steps), 1, 1e6, NULL},
    {"compress", "NAME", "gradient compression on the wire (powersgd: the large matrices as rank-R factors, with error feedback)", OPT_STR, F(compress), 0, 0, "none|fp16|powersgd"},
    {"powersgd-rank", "R", "rank of PowerSGD's approximation", OPT_INT, F(powersgd_rank), 1, 1024, NULL},
    {"stall-seconds", "S", "report ranks that have not joined a collective after S seconds (default: $RG_STALL_SECONDS, else 60)", OPT_DBL, F(stall_seconds), 0.1, 1e7, NULL},
    {"version", NULL, "print ringgrad's version and what this build runs, and exit", OPT_FLAG, F(version), 0, 0, NULL},
    {"help", NULL, "show this help", OPT_FLAG, F(help), 0, 0, NULL},
};
#undef F

static void defaults(train_args *a) {
    *a = (train_args){
        .model = "cnn", .data = "fmnist", .device = "cpu", .epochs = 2, .max_steps = -1,
        .batch_size = 128, .optim = "adam", .lr = -1, .momentum = 0, .lr_schedule = "constant",
        .lr_scaling = "linear", .strategy = "ddp",
        .lr_step_size = 1000, .warmup_start = -1, .lr_gamma = 0.1, .seed = 42, .dropout = -1, .bucket_mb = 25,
        .accum_steps = 1, .compress = "none", .powersgd_rank = 4, .stall_seconds = 0, .keep = 3,
        .augment = "none", .normalize = "none", .pipeline_stages = 2, .micro_batches = 4,
        .servers = 1, .straggle_rank = -1,
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

/* The data flags that only some datasets take. */
static int check_data_args(const train_args *a) {
    bool fmnist = strcmp(a->data, "fmnist") == 0, folder = strcmp(a->data, "imagefolder") == 0;
    if (fmnist && a->image_size && a->image_size != 28)
        return usage_error("--image-size %d: Fashion-MNIST images are 28x28 (--image-size is for "
                           "imagefolder and synthetic)", a->image_size);
    if (fmnist && a->channels > 1)
        return usage_error("--channels %d: Fashion-MNIST images are gray (1 channel)", a->channels);
    if (folder && !a->data_dir)
        return usage_error("--data imagefolder needs --data-dir ROOT (ROOT/train/<class>/*, "
                           "ROOT/val/<class>/*)");
    if (folder && a->channels != 0 && a->channels != 1 && a->channels != 3)
        return usage_error("--channels %d: image folders are read as 1 (gray) or 3 (RGB)",
                           a->channels);
    return 0;
}

_Static_assert(sizeof options / sizeof options[0] <= 64, "train_args.given has 64 bits");

static bool given(const train_args *a, const char *name) {
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (strcmp(options[k].name, name) == 0) return a->given >> k & 1;
    return false;
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
        a->given |= UINT64_C(1) << (o - options);
        if (o->kind == OPT_FLAG) {
            if (eq) return usage_error("--%s takes no value", o->name);
            *(bool *)((char *)a + o->offset) = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return usage_error("--%s needs a value", o->name);
        if (set_value(a, o, v)) return 2;
    }
    a->lr_given = a->lr >= 0; /* < 0: the optimizer's default (the registry's) */
    if (strcmp(a->optim, "adamw") == 0 && !given(a, "weight-decay"))
        a->weight_decay = 0.01; /* torch.optim.AdamW's default (the library's adamw keeps 0) */
    if (a->resume && a->init) return usage_error("--resume and --init exclude each other");
    if (a->save_every && !a->save) return usage_error("--save-every needs --save FILE");
    if (a->timeline_ops && !a->timeline) return usage_error("--timeline-ops needs --timeline FILE");
    if (a->nesterov && strcmp(a->optim, "sgd") != 0)
        return usage_error("--nesterov is a form of SGD's momentum: it needs --optim sgd (not %s)",
                           a->optim);
    if (a->nesterov && a->momentum == 0)
        return usage_error("--nesterov needs --momentum X > 0 (e.g. --momentum 0.9)");
    if (a->no_wd_bn_bias && a->weight_decay == 0)
        return usage_error("--no-wd-bn-bias needs --weight-decay X > 0 (without weight decay it "
                           "changes nothing)");
    if (a->straggle) {
        char *end = NULL;
        long r = strtol(a->straggle, &end, 10);
        double ms = *end == ':' ? strtod(end + 1, &end) : -1;
        if (r < 0 || ms < 0 || *end)
            return usage_error("--straggle: '%s' is not RANK:MS (e.g. 1:50)", a->straggle);
        a->straggle_rank = (int)r, a->straggle_ms = ms;
    }
    return check_data_args(a);
}

int train_args_notes(const train_args *a, FILE *out) {
    bool ps = strncmp(a->strategy, "ps-", 3) == 0, pipe = strcmp(a->strategy, "pipeline") == 0;
    bool resnet = strncmp(a->model, "resnet", 6) == 0;
    bool imagenet =
        resnet && (strcmp(a->model, "resnet20") != 0 && strcmp(a->model, "resnet56") != 0);
    bool step = strcmp(a->lr_schedule, "step") == 0;
    const struct {
        const char *name;
        bool acts;
        const char *unless;
    } rules[] = {
        {"keep", a->save_every > 0, "--save-every N (it keeps the periodic checkpoints)"},
        {"servers", ps, "--strategy ps-sync or ps-async"},
        {"max-staleness", strcmp(a->strategy, "ps-async") == 0,
         "--strategy ps-async (ps-sync is staleness 0)"},
        {"pipeline-stages", pipe, "--strategy pipeline"},
        {"micro-batches", pipe, "--strategy pipeline"},
        {"powersgd-rank", strcmp(a->compress, "powersgd") == 0, "--compress powersgd"},
        {"lr-step-size", step, "--lr-schedule step"},
        {"lr-gamma", step, "--lr-schedule step"},
        {"lr-scaling", a->scale_lr, "--scale-lr"},
        {"warmup-start", a->warmup_steps > 0, "--warmup-steps N"},
        {"small-input", imagenet,
         "--model resnet18, resnet34 or resnet50 (resnet20/56 have a 3x3 stem already)"},
        {"zero-init-residual", resnet, "a ResNet (--model resnet*)"},
        {"sync-bn", resnet, "a model with BatchNorm (a ResNet)"},
        {"data-dir", strcmp(a->data, "synthetic") != 0,
         "--data fmnist or imagefolder (synthetic data is made, not read)"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (!rules[i].acts && given(a, rules[i].name)) {
            fprintf(out, "ringgrad-train: note: --%s changes nothing without %s\n", rules[i].name,
                    rules[i].unless);
            n++;
        }
    return n;
}

void train_args_usage(void) {
    printf("Usage: ringgrad-train [options]\n"
           "       mpirun -np N ringgrad-train [options]   (data-parallel over N ranks)\n\n"
           "Trains a model on Fashion-MNIST (or generated data, or your own image folder);\n"
           "with no options, the CNN with Adam (lr 1e-3, batch 128) for 2 epochs.\n\nOptions:\n");
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++) {
        const opt *o = &options[k];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-22s %s", left, o->help);
        if (o->choices) printf(" (%s)", o->choices);
        printf("\n");
    }
    printf("\nEnvironment: RG_NUM_THREADS, RG_COMM, RG_DATA_DIR, RG_STALL_SECONDS, "
           "RG_PROGRESS=lines|bar,\n"
           "RG_ISA=avx512|avx2|generic (the CPU kernels' instruction set; default: the best\n"
           "this CPU runs; --json prints it as cpu_isa), and RG_CPU_MEM_LIMIT=BYTES[K|M|G] (a cap\n"
           "on the memory a rank's tensors hold; default: what the host can still give)\n"
           "(the progress bar redraws in place on a terminal; under mpirun a rank's stdout is a\n"
           "terminal even when mpirun writes to a file, so scripts/rg-mpirun sets lines then).\n");
}

/* The settings every rank must share (issue 10): what is trained, how, and which files are given
 * (a path may differ between hosts, its presence may not). Not here: --data-dir, --device's
 * index, --threads, --timeline, --json, --stall-seconds, which may differ per host. */
static const char *const agreed[] = {
    "model", "data", "epochs", "max-steps", "batch-size", "eval-batch-size", "optim", "lr",
    "momentum",
    "weight-decay", "lr-schedule", "lr-step-size", "lr-gamma", "warmup-steps", "warmup-start",
    "scale-lr", "seed",
    "no-shuffle", "dropout", "accum-steps", "compress", "bucket-mb", "no-overlap", "no-allreduce",
    "save-every", "init", "save", "resume", "strategy", "lr-scaling", "powersgd-rank",
    "image-size", "channels", "num-classes", "augment", "normalize", "pipeline-stages",
    "micro-batches", "servers", "max-staleness", "small-input", "zero-init-residual",
    "label-smoothing", "sync-bn", "nesterov", "no-wd-bn-bias",
};

void train_args_agreed(const train_args *a, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof agreed / sizeof agreed[0] && n < cap; i++) {
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
            if (strcmp(options[k].name, agreed[i]) == 0) o = &options[k];
        if (!o) continue;
        const char *field = (const char *)a + o->offset;
        char v[128];
        switch (o->kind) {
        case OPT_INT: snprintf(v, sizeof v, "%d", *(const int *)field); break;
        case OPT_I64: snprintf(v, sizeof v, "%lld", (long long)*(const int64_t *)field); break;
        case OPT_DBL: /* the shortest form that reads back as the same double */
            for (int p = 1; p <= 17; p++) {
                snprintf(v, sizeof v, "%.*g", p, *(const double *)field);
                if (strtod(v, NULL) == *(const double *)field) break;
            }
            break;
        case OPT_FLAG: snprintf(v, sizeof v, "%s", *(const bool *)field ? "on" : "off"); break;
        default: {
            const char *s = *(const char *const *)field;
            bool path = o->metavar && (strcmp(o->metavar, "FILE") == 0 || strcmp(o->metavar, "DIR") == 0);
            if (!path) snprintf(v, sizeof v, "%s", s ? s : "(default)");
            else snprintf(v, sizeof v, "%s", s ? "set" : "unset"); /* a path: per host */
        }
        }
        n += (size_t)snprintf(buf + n, cap - n, "--%s %s\n", o->name, v);
    }
    const char *dev = a->device; /* cpu or cuda: the index is per host */
    if (n < cap) snprintf(buf + n, cap - n, "--device %.*s\n", (int)strcspn(dev, ":"), dev);
}
