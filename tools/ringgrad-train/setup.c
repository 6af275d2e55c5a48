/* setup.c — ringgrad-train's set-up: data, model, optimizer, checkpoints, DDP and loaders. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

void trainer_error(const trainer *t, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
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

rg_status trainer_setup_data(trainer *t) {
    rg_status st;
    if (strcmp(t->a.data, "synthetic") == 0) {
        st = rg_dataset_synthetic(&(rg_synthetic_opts){.n = 60000, .seed = 1}, &t->train_ds);
        if (st == RG_OK)
            st = rg_dataset_synthetic(&(rg_synthetic_opts){.n = 10000, .seed = 2}, &t->test_ds);
    } else {
        const char *dir = t->a.data_dir ? t->a.data_dir : rg_data_default_dir();
        st = rg_dataset_fmnist(dir, RG_SPLIT_TRAIN, &t->train_ds);
        if (st == RG_OK) st = rg_dataset_fmnist(dir, RG_SPLIT_TEST, &t->test_ds);
    }
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    return trainer_agree(t, st);
}

static rg_optim *make_optimizer(trainer *t, const rg_param_list *params) {
    float lr = (float)(t->a.lr * (t->a.scale_lr ? t->world : 1));
    float wd = (float)t->a.weight_decay;
    if (strcmp(t->a.optim, "sgd") == 0)
        return rg_sgd_new(params, &(rg_sgd_opts){.lr = lr, .momentum = (float)t->a.momentum,
                                                  .weight_decay = wd});
    if (strcmp(t->a.optim, "adamw") == 0)
        return rg_adamw_new(params, &(rg_adam_opts){.lr = lr, .weight_decay = wd});
    return rg_adam_new(params, &(rg_adam_opts){.lr = lr, .weight_decay = wd});
}

static void set_schedule(trainer *t, int64_t total_steps) {
    rg_lr_kind kind = strcmp(t->a.lr_schedule, "step") == 0     ? RG_LR_STEP
                      : strcmp(t->a.lr_schedule, "cosine") == 0 ? RG_LR_COSINE
                                                                : RG_LR_CONSTANT;
    if (kind == RG_LR_CONSTANT && t->a.warmup_steps == 0) return;
    rg_lr_schedule s = {
        .kind = kind, .base_lr = rg_optim_get_lr(t->opt), .step_size = t->a.lr_step_size,
        .gamma = t->a.lr_gamma, .t_max = total_steps > 0 ? total_steps : 1,
        .warmup_steps = t->a.warmup_steps,
    };
    rg_optim_set_schedule(t->opt, &s);
}

/* --init (rank 0 reads, DDP broadcasts) or --resume (every rank reads: the optimizer state is
 * per rank). */
RG_NODISCARD static rg_status load_checkpoint(trainer *t) {
    rg_status st = RG_OK;
    if (t->a.init && t->rank == 0) st = rg_checkpoint_load_weights(t->a.init, t->net);
    if (t->a.resume) {
        rg_checkpoint_meta meta = {0};
        st = rg_checkpoint_load(t->a.resume, t->net, t->opt, &meta);
        if (st == RG_OK) t->step = meta.step, t->start_epoch = meta.epoch;
    }
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    return trainer_agree(t, st);
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
    const rg_param_list *params = rg_model_params(t->net);
    t->opt = make_optimizer(t, params);
    if (!t->opt) {
        trainer_error(t, "optimizer: %s", rg_last_error());
        return trainer_agree(t, RG_ENOMEM);
    }
    RG_TRY(load_checkpoint(t));
    t->ddp = rg_ddp_new(params, t->comm, &(rg_ddp_opts){
        .bucket_mb = t->a.bucket_mb, .accum_steps = t->a.accum_steps,
        .compress_fp16 = strcmp(t->a.compress, "fp16") == 0, .no_overlap = t->a.no_overlap,
        .no_allreduce = t->a.no_allreduce});
    if (!t->ddp) {
        trainer_error(t, "%s", rg_last_error());
        return RG_EMISMATCH; /* rg_ddp_new fails on every rank alike */
    }
    return RG_OK;
}

rg_status trainer_setup_loaders(trainer *t) {
    t->train = rg_loader_new(t->train_ds, &(rg_loader_opts){
        .batch = t->a.batch_size, .shuffle = !t->a.no_shuffle, .seed = (uint64_t)t->a.seed,
        .rank = t->rank, .world = t->world});
    /* Evaluation: every rank reads the whole test set in order and scores the batches with
     * index % world == rank, so no image is counted twice (a padded shard would). */
    t->test = rg_loader_new(t->test_ds, &(rg_loader_opts){.batch = 1000});
    rg_status st = t->train && t->test ? RG_OK : RG_ENOMEM;
    if (st != RG_OK) {
        trainer_error(t, "loader: %s", rg_last_error());
        return trainer_agree(t, st);
    }
    int64_t spe = rg_loader_steps_per_epoch(t->train), k = t->a.accum_steps;
    set_schedule(t, t->a.max_steps >= 0 ? t->a.max_steps : spe / k * t->a.epochs);
    /* Resuming mid-epoch: the batches of start_epoch trained before the checkpoint. */
    t->skip_batches = t->step * k - t->start_epoch * spe;
    if (t->a.resume && (t->skip_batches < 0 || t->skip_batches >= spe)) {
        trainer_error(t, "%s: step %lld and epoch %lld do not fit %lld batches per epoch; resume "
                      "with the same --batch-size, --accum-steps and number of ranks",
                      t->a.resume, (long long)t->step, (long long)t->start_epoch, (long long)spe);
        return trainer_agree(t, RG_EMISMATCH);
    }
    return trainer_agree(t, RG_OK);
}

rg_status trainer_save(trainer *t, int64_t epoch) {
    if (!t->a.save || t->rank != 0) return RG_OK;
    rg_checkpoint_meta meta = {.step = t->step, .epoch = epoch, .seed = (uint64_t)t->a.seed};
    snprintf(meta.model, sizeof meta.model, "%s", t->a.model);
    rg_status st = rg_checkpoint_save(t->a.save, t->net, t->opt, &meta);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    return st;
}
