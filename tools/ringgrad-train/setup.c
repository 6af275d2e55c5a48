/* setup.c — ringgrad-train's set-up: model, optimizer, checkpoints, DDP and loaders (the datasets
 * are in data.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

static char first_error[4096];

const char *trainer_first_error(void) {
    return first_error;
}

void trainer_error(const trainer *t, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", msg);
    /* One call, one write: mpirun merges the ranks' stderr, and pieces written apart interleave
     * with the other ranks' ("rank 1: error: rank 0: error: ..."). */
    if (t->world > 1)
        fprintf(stderr, "ringgrad-train: rank %d: error: %s\n", t->rank, msg);
    else
        fprintf(stderr, "ringgrad-train: error: %s\n", msg);
}

rg_status trainer_agree(trainer *t, rg_status mine) {
    if (t->world == 1) return mine;
    int64_t me = mine, *all = calloc((size_t)t->world, sizeof *all);
    rg_status st = all ? rg_comm_allgather(t->comm, &me, all, 1, RG_COMM_I64) : RG_ENOMEM;
    for (int r = 0; st == RG_OK && r < t->world; r++)
        if (all[r] != RG_OK) st = (rg_status)all[r];
    free(all);
    return st;
}

/* --scale-lr's factor k: the global batch over one rank's batch (ranks x accumulation steps),
 * linearly (Goyal et al., for SGD) or its square root (--lr-scaling sqrt, for Adam). 1 without
 * --scale-lr. */
static double lr_factor(const trainer *t) {
    double k = (double)t->workers * t->a.accum_steps;
    if (!t->a.scale_lr) return 1.0;
    return strcmp(t->a.lr_scaling, "sqrt") == 0 ? sqrt(k) : k;
}

/* The optimizer's options for the registry: only the flags the user gave (an optimizer without
 * a momentum says so, naming its own options). */
void trainer_optim_options(const trainer *t, char *opts, size_t cap) {
    opts[0] = 0;
    if (t->a.lr > 0) snprintf(opts, cap, "lr=%.9g,", t->a.lr);
    if (t->a.momentum > 0)
        snprintf(opts + strlen(opts), cap - strlen(opts), "momentum=%.9g,", t->a.momentum);
    if (t->a.nesterov) snprintf(opts + strlen(opts), cap - strlen(opts), "nesterov=1,");
    snprintf(opts + strlen(opts), cap - strlen(opts), "weight_decay=%.9g", t->a.weight_decay);
}

void trainer_exclude_decay(trainer *t, const rg_param_list *params) {
    if (!t->a.no_wd_bn_bias || !t->opt) return; /* a parameter server's worker has none */
    /* by name, with the model's shapes: zero1's and the servers' pieces are 1-D views */
    int n = rg_optim_exclude_decay_1d(t->opt, params);
    if (t->rank == 0 && !t->pipe && !t->ps && !t->zero) /* those hold a part of the parameters */
        printf("--no-wd-bn-bias: %d 1-D parameters (biases, BatchNorm) without weight decay\n", n);
}

/* --strategy ddp: the optimizer through the registry (--optim names it), then the DDP reducer
 * over every parameter; zero1: the sharded optimizer, which makes its own (dist/zero1.c). */
RG_NODISCARD static rg_status make_strategy(trainer *t, const rg_param_list *params) {
    char opts[256];
    trainer_optim_options(t, opts, sizeof opts);
    if (strcmp(t->a.strategy, "zero1") == 0) {
        t->zero = rg_zero1_new(params, t->comm, t->a.optim, opts,
                               &(rg_zero1_opts){.accum_steps = t->a.accum_steps,
                                                .bucket_mb = t->a.bucket_mb,
                                                .no_overlap = t->a.no_overlap});
        if (!t->zero) {
            trainer_error(t, "zero1: %s", rg_last_error());
            return RG_EINVAL; /* rg_zero1_new fails on every rank alike */
        }
        t->opt = rg_zero1_optim(t->zero);
        trainer_exclude_decay(t, params);
    } else if (strncmp(t->a.strategy, "ps-", 3) == 0) {
        bool async = strcmp(t->a.strategy, "ps-async") == 0;
        t->ps = rg_ps_new(params, t->comm, t->a.optim, opts,
                          &(rg_ps_opts){.mode = async ? RG_PS_ASYNC : RG_PS_SYNC,
                                        .servers = t->a.servers,
                                        .max_staleness = t->a.max_staleness,
                                        /* sync: the servers send their state at those steps */
                                        .save_every = async ? 0 : t->a.save_every});
        if (!t->ps) {
            trainer_error(t, "%s: %s", t->a.strategy, rg_last_error());
            return RG_EINVAL; /* rg_ps_new fails on every rank alike */
        }
        t->opt = rg_ps_optim(t->ps); /* NULL on a worker */
        t->server = rg_ps_is_server(t->ps);
        t->workers = rg_ps_workers(t->ps);
        t->wrank = t->server ? 0 : rg_ps_index(t->ps);
        if (t->rank == 0 && t->a.save_every && async)
            printf("note: with ps-async the --save-every files hold rank 0's weights only (its "
                   "servers share no step boundary mid-epoch): --init starts from them; the file "
                   "--save writes after each epoch holds the optimizer state and resumes\n");
        if (!t->opt) return RG_OK;
        trainer_exclude_decay(t, params);
    } else {
        t->opt = rg_optim_new(t->a.optim, params, opts);
        if (!t->opt) {
            trainer_error(t, "optimizer: %s", rg_last_error());
            return trainer_agree(t, RG_EINVAL);
        }
        trainer_exclude_decay(t, params);
    }
    if (t->a.scale_lr) rg_optim_set_lr(t->opt, rg_optim_get_lr(t->opt) * (float)lr_factor(t));
    return RG_OK;
}

static void set_schedule(trainer *t, int64_t total_steps) {
    rg_lr_kind kind = strcmp(t->a.lr_schedule, "step") == 0     ? RG_LR_STEP
                      : strcmp(t->a.lr_schedule, "cosine") == 0 ? RG_LR_COSINE
                                                                : RG_LR_CONSTANT;
    if (!t->opt || (kind == RG_LR_CONSTANT && t->a.warmup_steps == 0)) return;
    rg_lr_schedule s = {
        .kind = kind,
        .base_lr = rg_optim_get_lr(t->opt),
        .step_size = t->a.lr_step_size,
        .gamma = t->a.lr_gamma,
        .t_max = total_steps > 0 ? total_steps : 1,
        .warmup_steps = t->a.warmup_steps,
        /* --scale-lr: Goyal et al.'s gradual warmup, from the unscaled rate to k times it (not
         * from 0); else from 1% of the rate, as torchvision's reference recipe (LinearLR) */
        .warmup_start = t->a.warmup_start >= 0 ? t->a.warmup_start
                        : t->a.scale_lr        ? 1.0 / lr_factor(t)
                                               : 0.01,
    };
    rg_optim_set_schedule(t->opt, &s);
}

/* Rank 0's optimizer state, learning rate, position and dropout streams to every rank, after
 * rank 0 alone read the checkpoint (the weights follow in rg_ddp_new's broadcast). */
RG_NODISCARD static rg_status broadcast_resume(trainer *t, rg_checkpoint_meta *m) {
    /* zero1's shards, the pipeline stages' parts and the servers' shards came with their
     * scatter_state (a parameter server's worker has no optimizer) */
    if (!t->zero && !t->pipe && !t->ps) RG_TRY(trainer_broadcast_state(t->comm, t->opt));
    int ns;
    const rg_named_stream *streams = rg_model_streams(t->net, &ns);
    float lr = t->opt ? rg_optim_get_lr(t->opt) : 0.0f;
    int32_t lr_bits;
    memcpy(&lr_bits, &lr, sizeof lr_bits);
    int64_t v[5 + 2 * 64] = {m->step, m->epoch, m->global_batch, m->steps_per_epoch, lr_bits};
    RG_CHECK(ns <= 64, "ringgrad-train: %d dropout streams", ns);
    for (int i = 0; i < ns; i++)
        v[5 + 2 * i] = (int64_t)streams[i].stream->seed,
                  v[6 + 2 * i] = (int64_t)streams[i].stream->offset;
    RG_TRY(rg_comm_broadcast(t->comm, v, 5 + 2 * ns, RG_COMM_I64, 0));
    m->step = v[0], m->epoch = v[1], m->global_batch = v[2], m->steps_per_epoch = v[3];
    lr_bits = (int32_t)v[4];
    memcpy(&lr, &lr_bits, sizeof lr);
    if (!t->ps) rg_optim_set_lr(t->opt, lr); /* the servers' came with their state */
    for (int i = 0; i < ns; i++)
        streams[i].stream->seed = (uint64_t)v[5 + 2 * i],
        streams[i].stream->offset = (uint64_t)v[6 + 2 * i];
    return RG_OK;
}

rg_status trainer_broadcast_state(rg_comm *c, rg_optim *o) {
    const rg_param_list *l = rg_optim_state(o);
    for (int i = 0; i < l->n; i++) {
        rg_tensor *x = l->items[i].tensor;
        RG_TRY(rg_comm_broadcast(c, x->data, (int64_t)rg_tensor_nbytes(x), RG_COMM_U8, 0));
    }
    return RG_OK;
}

rg_status trainer_finish_resume(trainer *t, rg_checkpoint_meta *meta) {
    rg_status st;
    if (t->world > 1 && (st = broadcast_resume(t, meta)) != RG_OK) {
        trainer_error(t, "sending the checkpoint to every rank: %s", rg_last_error());
        return st;
    }
    t->step = meta->step, t->start_epoch = meta->epoch, t->resume_meta = *meta;
    if (!t->opt) return RG_OK; /* a parameter server's worker: the servers hold the rate */
    float saved = rg_optim_get_lr(t->opt);
    float want = (float)(t->a.lr * lr_factor(t)); /* the same scaling as the start of a run */
    if (t->a.lr_given && want != saved) {
        rg_optim_set_lr(t->opt, want);
        if (t->rank == 0 || (t->server && rg_ps_index(t->ps) == 0)) /* ps: server 0 */
            printf("ringgrad-train: --lr %g overrides the learning rate %g saved in %s\n",
                   (double)want, (double)saved, t->a.resume);
    }
    return RG_OK;
}

/* --init or --resume: rank 0 reads the file, so that a checkpoint on one host's disk is enough;
 * every rank fails together when it cannot. The weights reach the other ranks through rg_ddp_new's
 * broadcast, the rest through broadcast_resume. A learning rate given on the command line
 * overrides the checkpoint's, and says so. */
RG_NODISCARD static rg_status load_checkpoint(trainer *t) {
    rg_status st = RG_OK;
    rg_checkpoint_meta meta = {0};
    if (t->a.init && t->rank == 0) st = rg_checkpoint_load_weights(t->a.init, t->net);
    if (t->a.resume && t->rank == 0) st = rg_checkpoint_load(t->a.resume, t->net, t->opt, &meta);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    RG_TRY(trainer_agree(t, st));
    return t->a.resume ? trainer_finish_resume(t, &meta) : RG_OK;
}

rg_optim *trainer_full_optimizer(trainer *t) {
    char opts[256];
    trainer_optim_options(t, opts, sizeof opts);
    rg_optim *o = rg_optim_new(t->a.optim, rg_model_params(t->net), opts);
    if (!o) trainer_error(t, "the checkpoint's optimizer: %s", rg_last_error());
    return o;
}

/* --resume where the optimizer state is sharded (zero1: over every rank; ps-*: over the
 * servers): rank 0 reads the weights and the whole optimizer state (the file is ddp's), the
 * strategy broadcasts the weights as it starts, and each rank takes its shard of the state; then
 * the position, as for ddp. */
RG_NODISCARD static rg_status resume_sharded(trainer *t, const rg_param_list *params) {
    rg_checkpoint_meta meta = {0};
    rg_optim *full = NULL;
    rg_status st = RG_OK;
    if (t->rank == 0) {
        full = trainer_full_optimizer(t);
        st = full ? rg_checkpoint_load(t->a.resume, t->net, full, &meta) : RG_EINVAL;
        if (full && st != RG_OK) trainer_error(t, "%s", rg_last_error());
    }
    st = trainer_agree(t, st);
    if (st == RG_OK) st = make_strategy(t, params);
    if (st == RG_OK && (st = t->zero ? rg_zero1_scatter_state(t->zero, full)
                                     : rg_ps_scatter_state(t->ps, full)) != RG_OK)
        trainer_error(t, "sending the checkpoint's optimizer state: %s", rg_last_error());
    rg_optim_free(full);
    RG_TRY(st);
    RG_TRY(trainer_finish_resume(t, &meta));
    if (t->ps) rg_ps_set_step(t->ps, t->step); /* ps-sync's periodic saves count from here */
    return RG_OK;
}

rg_status trainer_broadcast_buffers(trainer *t) {
    if (t->a.sync_bn) return RG_OK; /* every rank's statistics are already the global batch's */
    if (t->ddp) return rg_ddp_broadcast_buffers(t->ddp);
    if (!t->zero) return RG_OK;
    /* zero1 has no reducer (dist/zero1.c), but the same replicas as DDP: rank 0's buffers too,
     * or each rank would keep the statistics of its own shard of the data */
    const rg_param_list *l = rg_model_params(t->net);
    for (int i = 0; i < l->n; i++) {
        rg_tensor *x = l->items[i].tensor;
        int64_t bytes = (int64_t)rg_tensor_nbytes(x);
        if (l->items[i].is_buffer) RG_TRY(rg_comm_broadcast(t->comm, x->data, bytes, RG_COMM_U8, 0));
    }
    return RG_OK;
}

/* The model for the data's images: a shape it cannot take is an error naming the data. */
RG_NODISCARD static rg_status make_model(trainer *t) {
    const rg_dataset *d = t->train_ds;
    rg_model_spec spec = {.channels = d->c, .height = d->h, .width = d->w,
                          .num_classes = t->a.num_classes ? t->a.num_classes : d->num_classes,
                          .small_input = t->a.small_input,
                          .zero_init_residual = t->a.zero_init_residual};
    const char *src = strcmp(t->a.data, "synthetic") == 0 ? "synthetic data"
                      : t->a.data_dir                     ? t->a.data_dir
                                                          : rg_data_default_dir();
    if (spec.num_classes < d->num_classes) {
        trainer_error(t, "--num-classes %d is fewer than the %d classes of %s", spec.num_classes,
                      d->num_classes, src);
        return RG_EINVAL;
    }
    if (t->test_ds->c != d->c || t->test_ds->h != d->h || t->test_ds->w != d->w) {
        trainer_error(t, "%s: training images are %lldx%lldx%lld but test images %lldx%lldx%lld",
                      src, (long long)d->c, (long long)d->h, (long long)d->w,
                      (long long)t->test_ds->c, (long long)t->test_ds->h, (long long)t->test_ds->w);
        return RG_EINVAL;
    }
    rg_status st = rg_model_new_for(t->a.model, (uint64_t)t->a.seed, &spec, &t->net);
    if (st != RG_OK) trainer_error(t, "%s (images %lldx%lldx%lld): %s", src, (long long)d->c,
                                   (long long)d->h, (long long)d->w, rg_last_error());
    return st;
}

static void set_sync(rg_layer *l, void *ctx) {
    (void)rg_batchnorm2d_set_sync(l, ctx);
}

rg_status trainer_setup_model(trainer *t) {
    rg_status made = make_model(t);
    if (made != RG_OK) return trainer_agree(t, made);
    if (t->a.sync_bn) {
        t->bn_sync = rg_ddp_sync_bn_hook(t->comm);
        rg_layer_visit(rg_model_root(t->net), set_sync, &t->bn_sync);
    }
    if (t->a.dropout >= 0) rg_model_set_dropout(t->net, (float)t->a.dropout);
    rg_status st = rg_model_to_device(t->net, t->dev);
    if (st != RG_OK) {
        trainer_error(t, "%s", rg_last_error());
        return trainer_agree(t, st);
    }
    if (strcmp(t->a.strategy, "pipeline") == 0) return trainer_setup_pipeline(t);
    const rg_param_list *params = rg_model_params(t->net);
    if (strcmp(t->a.strategy, "zero1") == 0 &&
        (strcmp(t->a.compress, "none") != 0 || t->a.no_allreduce)) {
        trainer_error(t, "--strategy zero1 takes no --compress or --no-allreduce (options of "
                         "--strategy ddp)");
        return trainer_agree(t, RG_EINVAL);
    }
    bool ps = strncmp(t->a.strategy, "ps-", 3) == 0;
    if (ps && t->a.sync_bn) {
        if (t->rank == 0)
            trainer_error(t,
                          "--strategy %s takes no --sync-bn: the servers run no forward pass to "
                          "share BatchNorm statistics with; each worker normalises with its own "
                          "batch's",
                          t->a.strategy);
        return trainer_agree(t, RG_EINVAL);
    }
    if (ps && (strcmp(t->a.compress, "none") != 0 || t->a.no_overlap || t->a.no_allreduce ||
               t->a.accum_steps > 1)) {
        trainer_error(t,
                      "--strategy %s takes no --compress, --no-overlap, --no-allreduce or "
                      "--accum-steps (options of --strategy ddp)",
                      t->a.strategy);
        return trainer_agree(t, RG_EINVAL);
    }
    if ((strcmp(t->a.strategy, "zero1") == 0 || ps) && t->a.resume)
        return resume_sharded(t, params);
    if (strcmp(t->a.strategy, "zero1") == 0 || ps) { /* rank 0's --init weights, then broadcast */
        RG_TRY(load_checkpoint(t));
        return make_strategy(t, params);
    }
    RG_TRY(make_strategy(t, params));
    RG_TRY(load_checkpoint(t));
    t->ddp = rg_ddp_new(params, t->comm, &(rg_ddp_opts){
        .bucket_mb = t->a.bucket_mb, .accum_steps = t->a.accum_steps,
        .compress_fp16 = strcmp(t->a.compress, "fp16") == 0, .no_overlap = t->a.no_overlap,
        .compress_powersgd = strcmp(t->a.compress, "powersgd") == 0,
        .powersgd_rank = t->a.powersgd_rank,
        .no_allreduce = t->a.no_allreduce, .defer_average = true});
    if (!t->ddp) {
        trainer_error(t, "%s", rg_last_error());
        return RG_EMISMATCH; /* rg_ddp_new fails on every rank alike */
    }
    /* the buckets hold sums: the optimizer's kernels apply the 1/N as they read them */
    rg_optim_set_grad_scale(t->opt, rg_ddp_grad_scale(t->ddp));
    return RG_OK;
}

/* Whether the checkpoint's position fits this run. Kept across a resume are the global batch
 * (images per optimizer step) and the sample order, so N ranks may resume on M when M x
 * --batch-size x --accum-steps is the saved global batch: step s then starts at global sample
 * s x global batch, as it would have. */
RG_NODISCARD static rg_status check_resume(trainer *t, int64_t spe) {
    const rg_checkpoint_meta *m = &t->resume_meta;
    const char *f = t->a.resume;
    /* the data's shards: one per rank, or per pipeline of --pipeline-stages ranks */
    int64_t k = t->a.accum_steps, per = (int64_t)t->workers * k;
    const char *who = t->pipe ? "pipelines" : "ranks";
    int64_t global = (int64_t)t->a.batch_size * per;
    rg_status st = RG_OK;
    if (m->global_batch && m->global_batch != global) {
        if (m->global_batch % per == 0)
            st = rg_error(RG_EMISMATCH,
                          "%s was saved with a global batch of %lld images per step; "
                          "this run has %lld (--batch-size %d x %d %s x --accum-steps %lld): "
                          "resume with --batch-size %lld",
                          f, (long long)m->global_batch, (long long)global, t->a.batch_size,
                          t->workers, who, (long long)k, (long long)(m->global_batch / per));
        else
            st = rg_error(RG_EMISMATCH,
                          "%s was saved with a global batch of %lld images per step, "
                          "which %d %s x --accum-steps %lld cannot share evenly: resume on a "
                          "number of %s that divides it",
                          f, (long long)m->global_batch, t->workers, who, (long long)k, who);
    } else if (m->steps_per_epoch && m->steps_per_epoch != spe / k) {
        st = rg_error(RG_EMISMATCH, "%s was saved with %lld steps per epoch; this run has %lld "
                      "(another data set?)", f, (long long)m->steps_per_epoch,
                      (long long)(spe / k));
    } else if (t->step > INT64_MAX / k || t->start_epoch > INT64_MAX / (spe ? spe : 1) ||
               t->step * k - t->start_epoch * spe < 0 || t->step * k - t->start_epoch * spe >= spe) {
        st = rg_error(RG_ECORRUPT, "%s: its metadata step %lld and epoch %lld cannot both be "
                      "right with %lld steps per epoch: the checkpoint is damaged or from another "
                      "run", f, (long long)t->step, (long long)t->start_epoch,
                      (long long)(spe / k));
    }
    if (st != RG_OK && t->rank == 0) trainer_error(t, "%s", rg_last_error());
    if (st == RG_OK && t->rank == 0 && m->seed != (uint64_t)t->a.seed)
        printf("ringgrad-train: note: %s was saved by a run with --seed %llu; this run's --seed "
               "%lld shuffles the rest of the data in another order (resume with --seed %llu to "
               "continue exactly)\n",
               f, (unsigned long long)m->seed, (long long)t->a.seed, (unsigned long long)m->seed);
    return st;
}

/* The fewest images one BatchNorm2d forward takes from a batch of `batch`: a pipeline's
 * smallest micro-batch (dist/pipeline.c cuts B into min(M, B) near-equal parts). */
static int64_t fewest_images(const trainer *t, int64_t batch) {
    if (!t->pipe) return batch;
    int64_t m = t->a.micro_batches < batch ? t->a.micro_batches : batch;
    return batch / m;
}

/* BatchNorm2d in training needs more than one value per channel (batch x H x W > 1; PyTorch
 * raises "Expected more than 1 value per channel when training", and our op stops the process),
 * which only a model with 1x1 planes (rg_model_bn_plane: ResNet-18 on 28-32 px images) and a
 * batch of one image can break. A --batch-size (or micro-batch) of one image is an error before
 * training starts; an epoch's last batch of one image is dropped, as DataLoader(drop_last=True)
 * would, with a note. --sync-bn over two or more ranks counts every rank's images. */
RG_NODISCARD static rg_status check_bn_batches(trainer *t, bool *drop_last) {
    if (rg_model_bn_plane(t->net) != 1 || (t->a.sync_bn && t->workers > 1) || t->a.max_steps == 0)
        return RG_OK;
    rg_sampler sampler; /* the training loader's: this rank's share of the images */
    rg_sampler_init(&sampler, t->train_ds->n, false, 0, 0, t->workers);
    int64_t batch = t->a.batch_size, len = rg_sampler_len(&sampler), tail = len % batch;
    const char *what = t->pipe ? " micro-batch" : " batch";
    char why[320];
    snprintf(why, sizeof why,
             "%s on %lldx%lld images ends in 1x1 planes, so a%s of one image "
             "leaves its BatchNorm2d one value per channel, and training needs more than one",
             t->a.model, (long long)t->train_ds->h, (long long)t->train_ds->w, what);
    if (fewest_images(t, batch) <= 1 || (tail && len < batch && fewest_images(t, tail) <= 1)) {
        if (t->rank == 0)
            trainer_error(t,
                          "--batch-size %d%s%.0d (%lld training image%s a rank): %s; use "
                          "more images a%s%s, --small-input, larger images (--image-size) or "
                          "--sync-bn over several ranks",
                          t->a.batch_size, t->pipe ? " in --micro-batches " : "",
                          t->pipe ? t->a.micro_batches : 0, (long long)len, len == 1 ? "" : "s",
                          why, what, t->pipe ? " (fewer --micro-batches)" : "");
        return RG_EINVAL;
    }
    if (tail && fewest_images(t, tail) <= 1) {
        *drop_last = true;
        if (t->rank == 0)
            printf("note: each epoch's last batch would hold %lld image%s a rank (%lld images a "
                   "rank, --batch-size %d): %s; it is dropped, as DataLoader(drop_last=True) "
                   "would\n",
                   (long long)tail, tail == 1 ? "" : "s", (long long)len, t->a.batch_size, why);
    }
    return RG_OK;
}

/* The evaluation's batch: --eval-batch-size, else 1000 images (few, large GEMMs), at most 4 Mi
 * input values (26 images of 3x224x224: a forward keeps every activation of its batch until the
 * batch ends, about 24 MB an image in ResNet-18 at 224 px, so 1000 such images would need 24 GB),
 * and never fewer than --batch-size, which training already fits with its backward. The same
 * on every rank, which score every world-th batch. */
static int eval_batch(const trainer *t) {
    if (t->a.eval_batch_size) return t->a.eval_batch_size;
    int64_t b = (INT64_C(1) << 22) / rg_dataset_image_size(t->test_ds);
    if (b > 1000) b = 1000;
    return b > t->a.batch_size ? (int)b : t->a.batch_size;
}

rg_status trainer_setup_loaders(trainer *t) {
    rg_loader_opts o = trainer_loader_opts(t, true); /* data.c: augmentation, workers */
    o.batch = t->a.batch_size, o.shuffle = !t->a.no_shuffle;
    RG_TRY(trainer_agree(t, check_bn_batches(t, &o.drop_last)));
    o.rank = t->wrank, o.world = t->workers; /* a pipeline's stages read one batch; servers none */
    t->train = rg_loader_new(t->train_ds, &o);
    /* Evaluation: every rank reads the whole test set in order and scores the batches with
     * index % world == rank, so no image is counted twice (a padded shard would). */
    o = trainer_loader_opts(t, false);
    o.batch = t->eval_batch = eval_batch(t);
    if (!t->pipe && !t->ps) o.fill_rank = t->rank, o.fill_world = t->world; /* only what we score */
    t->test = rg_loader_new(t->test_ds, &o);
    rg_status st = t->train && t->test ? RG_OK : RG_ENOMEM;
    if (st != RG_OK) {
        trainer_error(t, "%s", rg_last_error()); /* "loader: ..." */
        return trainer_agree(t, st);
    }
    int64_t spe = rg_loader_steps_per_epoch(t->train), k = t->a.accum_steps;
    rg_status fits = RG_OK; /* accumulation steps run within an epoch */
    if (k > 1 && k > spe) {
        trainer_error(t,
                      "--accum-steps %lld is more than the %lld batch%s of an epoch (a rank's "
                      "share of the training images at --batch-size %d): no optimizer step would "
                      "be taken; lower --accum-steps or --batch-size",
                      (long long)k, (long long)spe, spe == 1 ? "" : "es", t->a.batch_size);
        fits = RG_EINVAL;
    }
    RG_TRY(trainer_agree(t, fits));
    set_schedule(t, t->a.max_steps >= 0 ? t->a.max_steps : spe / k * t->a.epochs);
    if (t->a.resume) RG_TRY(trainer_agree(t, check_resume(t, spe)));
    /* Resuming mid-epoch: the batches of start_epoch trained before the checkpoint. */
    t->skip_batches = t->step * k - t->start_epoch * spe;
    return trainer_agree(t, RG_OK);
}

rg_status trainer_save(trainer *t, int64_t epoch) {
    if (!t->a.save) return RG_OK;
    /* zero1, pipeline, ps: the whole optimizer state, gathered from the ranks that hold its parts
     * into `full` on rank 0, so that the file is a 1-process run's (ddp's) and resumes under any
     * strategy. ps: between epochs every rank takes part; at a --save-every step rank 0 alone
     * gathers what the ps-sync servers send (rg_ps_opts.save_every), and ps-async's file holds
     * the weights only, its servers sharing no step boundary */
    rg_optim *full = NULL;
    bool ps_alone = t->ps && t->saving_periodic;
    bool ps_state = t->ps && (!ps_alone || strcmp(t->a.strategy, "ps-sync") == 0);
    if (t->zero || t->pipe || ps_state) {
        full = t->rank == 0 ? trainer_full_optimizer(t) : NULL;
        if (ps_alone && !full) return RG_EINVAL; /* its message printed */
        if (!ps_alone) RG_TRY(trainer_agree(t, t->rank == 0 && !full ? RG_EINVAL : RG_OK));
    }
    rg_status st = RG_OK;
    if (t->zero && (st = rg_zero1_gather_state(t->zero, full)) != RG_OK)
        trainer_error(t, "zero1: gathering the optimizer state: %s", rg_last_error());
    /* pipeline: every stage's weights, buffers, dropout positions and optimizer state to its
     * stage 0; the D pipelines are replicas, so pipeline 0's go to the file */
    if (t->pipe && t->dp_rank == 0 &&
        ((st = rg_pipeline_gather(t->pipe)) != RG_OK ||
         (st = rg_pipeline_gather_state(t->pipe, t->opt, full)) != RG_OK))
        trainer_error(t, "pipeline: gathering the stages: %s", rg_last_error());
    /* ps: the servers' shards of the weights and the state, between epochs */
    if (ps_state && (st = rg_ps_gather_state(t->ps, full)) != RG_OK)
        trainer_error(t, "%s: gathering the servers' state: %s", t->a.strategy, rg_last_error());
    if (st != RG_OK) return rg_optim_free(full), st;
    if (t->rank != 0) return RG_OK;
    int64_t k = t->a.accum_steps;
    rg_checkpoint_meta meta = {.step = t->step, .epoch = epoch, .seed = (uint64_t)t->a.seed,
                               .global_batch = (int64_t)t->a.batch_size *
                                               t->workers * k,
                               .steps_per_epoch = rg_loader_steps_per_epoch(t->train) / k};
    snprintf(meta.model, sizeof meta.model, "%s", t->a.model);
    /* ps-async, periodic (--save-every): rank 0's weights only */
    st = rg_checkpoint_save(t->a.save, t->net, full ? full : t->ps ? NULL : t->opt, &meta);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    rg_optim_free(full);
    return st;
}
