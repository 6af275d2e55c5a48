/* pipe.c — ringgrad-train's --strategy pipeline: the model cut into --pipeline-stages stages, one
 * per rank, each batch in --micro-batches micro-batches (GPipe, dist/pipeline.c). Every rank
 * reads the same batches; stage 0 uses the images, the last stage the labels. */
#include <stdio.h>
#include <string.h>

#include "trainer.h"

/* The world as D pipelines of S consecutive ranks: rank = d S + s holds stage s of pipeline d.
 * stage_comm: pipeline d's S ranks (activations); dp_comm: the D ranks holding stage s
 * (their gradients are averaged, as DDP would). Collective. */
RG_NODISCARD static rg_status split_world(trainer *t) {
    int S = t->a.pipeline_stages;
    t->dp_size = t->world / S, t->dp_rank = t->rank / S;
    t->wrank = t->dp_rank, t->workers = t->dp_size; /* the data shards: one per pipeline */
    rg_status st = rg_comm_split(t->comm, t->dp_rank, t->rank % S, &t->stage_comm);
    if (st == RG_OK && t->dp_size > 1)
        st = rg_comm_split(t->comm, t->rank % S, t->dp_rank, &t->dp_comm);
    if (st != RG_OK) trainer_error(t, "pipeline: %s", rg_last_error());
    return st;
}

/* Rank 0's weights and buffers (--init, --resume) to every rank, so that the D pipelines start
 * alike. */
RG_NODISCARD static rg_status broadcast_weights(trainer *t) {
    const rg_param_list *l = rg_model_params(t->net);
    for (int i = 0; i < l->n; i++) {
        rg_tensor *w = l->items[i].tensor;
        RG_TRY(rg_comm_broadcast(t->comm, w->data, (int64_t)rg_tensor_nbytes(w), RG_COMM_U8, 0));
    }
    return RG_OK;
}

/* --resume: rank 0 read the checkpoint into the model and `full` (the whole optimizer); each
 * stage of pipeline 0 takes its part of the state, and stage s of every other pipeline the same
 * part from pipeline 0's stage s. Then the position, as for ddp. Collective. */
RG_NODISCARD static rg_status resume_stages(trainer *t, rg_optim *full, rg_checkpoint_meta *meta) {
    rg_status st = t->dp_rank == 0 ? rg_pipeline_scatter_state(t->pipe, t->opt, full) : RG_OK;
    if (st == RG_OK && t->dp_comm) st = trainer_broadcast_state(t->dp_comm, t->opt);
    if (st != RG_OK) {
        trainer_error(t, "pipeline: sending the checkpoint's optimizer state: %s", rg_last_error());
        return st;
    }
    return trainer_finish_resume(t, meta); /* the learning rate, from rank 0, with the rest */
}

/* This rank's stage (rg_pipeline_new broadcasts stage 0's weights over the pipeline) and its
 * optimizer. */
RG_NODISCARD static rg_status make_stages(trainer *t) {
    const train_args *a = &t->a;
    t->pipe = rg_pipeline_new(rg_model_root(t->net), t->stage_comm,
                              &(rg_pipeline_opts){.micro_batches = a->micro_batches});
    if (!t->pipe) {
        trainer_error(t, "pipeline: %s", rg_last_error());
        return RG_EINVAL; /* fails on every rank alike */
    }
    if (t->rank == 0) {
        char d[1024];
        printf("pipeline: %d pipeline%s of %d stages, %d micro-batches of %d; %s\n", t->dp_size,
               t->dp_size > 1 ? "s" : "", a->pipeline_stages, a->micro_batches,
               a->batch_size / a->micro_batches, rg_pipeline_describe(t->pipe, d, sizeof d));
        fflush(stdout);
    }
    char opts[256];
    trainer_optim_options(t, opts, sizeof opts);
    t->opt = rg_optim_new(a->optim, rg_pipeline_params(t->pipe), opts);
    if (!t->opt) {
        trainer_error(t, "optimizer: %s", rg_last_error());
        return trainer_agree(t, RG_EINVAL);
    }
    trainer_exclude_decay(t, rg_pipeline_params(t->pipe)); /* this stage's, with their shapes */
    return RG_OK;
}

rg_status trainer_setup_pipeline(trainer *t) {
    const train_args *a = &t->a;
    const char *bad = NULL;
    if (t->world % a->pipeline_stages != 0)
        bad = "needs a multiple of --pipeline-stages ranks (D pipelines of S ranks)";
    else if (a->accum_steps > 1)
        bad = "takes no --accum-steps (its micro-batches accumulate)";
    else if (strcmp(a->compress, "none") != 0 || a->no_overlap || a->no_allreduce)
        bad = "takes no --compress, --no-overlap or --no-allreduce (options of --strategy ddp)";
    else if (a->scale_lr)
        bad = "takes no --scale-lr (its global batch is --batch-size x D)";
    else if (a->micro_batches > a->batch_size)
        bad = "needs --micro-batches <= --batch-size";
    else if (a->sync_bn)
        bad = "takes no --sync-bn (each BatchNorm2d lives on one stage and normalises each "
              "micro-batch with its own statistics)";
    if (bad) {
        if (t->world == 1 || t->rank == 0)
            trainer_error(t, "--strategy pipeline with %d ranks, %d stages: %s", t->world,
                          a->pipeline_stages, bad);
        return trainer_agree(t, RG_EINVAL);
    }
    rg_status st = RG_OK;
    rg_optim *full = NULL; /* --resume: the checkpoint's optimizer state, on rank 0 */
    rg_checkpoint_meta meta = {0};
    if (a->init && t->rank == 0) st = rg_checkpoint_load_weights(a->init, t->net);
    if (a->resume && t->rank == 0) {
        full = trainer_full_optimizer(t);
        st = full ? rg_checkpoint_load(a->resume, t->net, full, &meta) : RG_EINVAL;
    }
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    if ((st = trainer_agree(t, st)) != RG_OK) return rg_optim_free(full), st;
    st = split_world(t);
    if (st == RG_OK && t->dp_size > 1) st = broadcast_weights(t);
    if (st == RG_OK) st = make_stages(t);
    if (st == RG_OK && a->resume) st = resume_stages(t, full, &meta);
    rg_optim_free(full);
    return st;
}

rg_status trainer_pipe_step(trainer *t, const rg_batch *b, rg_mode mode, rg_pipeline_result *r) {
    rg_scope_begin();
    rg_trace_begin(mode == RG_TRAIN ? "pipeline_step" : "pipeline_eval", "step");
    rg_status st = rg_pipeline_step(t->pipe, b->x, b->y, mode, r);
    if (st == RG_OK && mode == RG_TRAIN && t->dp_comm) { /* D pipelines: average each gradient */
        int64_t t0 = rg_trace_now();
        const rg_param_list *l = rg_pipeline_params(t->pipe);
        for (int i = 0; st == RG_OK && i < l->n; i++) {
            rg_tensor *g = l->items[i].tensor->grad;
            if (g)
                st = rg_comm_allreduce(t->dp_comm, g->data, g->numel, RG_COMM_F32, RG_REDUCE_AVG);
        }
        rg_trace_complete("dp_allreduce", "comm", t0, rg_trace_now(), 0, NULL);
    }
    rg_trace_end();
    rg_scope_end();
    if (st != RG_OK) trainer_error(t, "pipeline: %s", rg_last_error());
    return st;
}

void trainer_pipe_update(trainer *t) {
    int64_t t0 = rg_trace_now();
    rg_scope_begin();
    rg_optim_step(t->opt);
    rg_optim_zero_grad(t->opt);
    rg_scope_end();
    rg_trace_complete("optimizer", "compute", t0, rg_trace_now(), 0, NULL);
    t->step++;
}
