/* pipe.c — ringgrad-train's --strategy pipeline: the model cut into --pipeline-stages stages, one
 * per rank, each batch in --micro-batches micro-batches (GPipe, dist/pipeline.c). Every rank
 * reads the same batches; stage 0 uses the images, the last stage the labels. */
#include <stdio.h>
#include <string.h>

#include "trainer.h"

rg_status trainer_setup_pipeline(trainer *t) {
    const train_args *a = &t->a;
    const char *bad = NULL;
    if (t->world != a->pipeline_stages)
        bad = "needs as many ranks as --pipeline-stages (data parallelism across pipelines, "
              "world = stages x D, is not implemented yet)";
    else if (a->accum_steps > 1)
        bad = "takes no --accum-steps (its micro-batches accumulate)";
    else if (strcmp(a->compress, "none") != 0 || a->no_overlap || a->no_allreduce)
        bad = "takes no --compress, --no-overlap or --no-allreduce (options of --strategy ddp)";
    else if (a->resume)
        bad = "cannot --resume yet (each stage holds its own optimizer state)";
    else if (a->scale_lr)
        bad = "takes no --scale-lr (its global batch is --batch-size)";
    else if (a->micro_batches > a->batch_size)
        bad = "needs --micro-batches <= --batch-size";
    if (bad) {
        if (t->world == 1 || t->rank == 0)
            trainer_error(t, "--strategy pipeline with %d ranks, %d stages: %s", t->world,
                          a->pipeline_stages, bad);
        return trainer_agree(t, RG_EINVAL);
    }
    rg_status st = RG_OK;
    if (a->init && t->rank == 0) st = rg_checkpoint_load_weights(a->init, t->net);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    RG_TRY(trainer_agree(t, st));
    /* rank 0's weights (--init) to every stage */
    t->pipe = rg_pipeline_new(rg_model_root(t->net), t->comm,
                              &(rg_pipeline_opts){.micro_batches = a->micro_batches});
    if (!t->pipe) {
        trainer_error(t, "pipeline: %s", rg_last_error());
        return RG_EINVAL; /* fails on every rank alike */
    }
    if (t->rank == 0) {
        char d[1024];
        printf("pipeline: %d micro-batches of %d; %s\n", a->micro_batches,
               a->batch_size / a->micro_batches, rg_pipeline_describe(t->pipe, d, sizeof d));
        fflush(stdout);
    }
    char opts[256];
    snprintf(opts, sizeof opts, "weight_decay=%.9g", a->weight_decay);
    if (a->lr > 0) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",lr=%.9g", a->lr);
    if (a->momentum > 0)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ",momentum=%.9g", a->momentum);
    t->opt = rg_optim_new(a->optim, rg_pipeline_params(t->pipe), opts);
    if (!t->opt) {
        trainer_error(t, "optimizer: %s", rg_last_error());
        return trainer_agree(t, RG_EINVAL);
    }
    return RG_OK;
}

rg_status trainer_pipe_step(trainer *t, const rg_batch *b, rg_mode mode, rg_pipeline_result *r) {
    rg_scope_begin();
    rg_trace_begin(mode == RG_TRAIN ? "pipeline_step" : "pipeline_eval", "step");
    rg_status st = rg_pipeline_step(t->pipe, b->x, b->y, mode, r);
    if (st == RG_OK && mode == RG_TRAIN) {
        int64_t t0 = rg_trace_now();
        rg_optim_step(t->opt);
        rg_optim_zero_grad(t->opt);
        rg_trace_complete("optimizer", "compute", t0, rg_trace_now(), 0, NULL);
        t->step++;
    }
    rg_trace_end();
    rg_scope_end();
    if (st != RG_OK) trainer_error(t, "pipeline: %s", rg_last_error());
    return st;
}
