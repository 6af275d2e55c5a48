/* cuda_bench_train.c — the training parts of `ringgrad-bench --device cuda`: the CNN's training
 * step in images/s, and allreduce bus bandwidth through nccl against the DDP reducer.
 *
 * Bus bandwidth is NCCL's measure (nccl-tests): an allreduce of B bytes moves 2(n-1)/n * B
 * through each rank's link, so busbw = B / time * 2(n-1)/n is comparable across world sizes and
 * with the link's speed. The reducer is timed on a gradient set of the same bytes: every
 * gradient-ready hook fires in backward's order (no compute in between, so nothing hides the
 * communication) and rg_ddp_wait ends the round; its busbw is over the float32 gradient bytes,
 * so float16 compression shows as the speed-up it buys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/autograd.h"
#include "cuda_bench.h"

/* ---- the CNN's training step ---- */

typedef struct {
    rg_model *net;
    rg_optim *opt;
    rg_ddp *ddp;
    rg_tensor *x, *y; /* (batch,C,H,W) and (batch): one resident batch */
    int batch;
} train_job;

static void train_step(void *p) {
    train_job *j = p;
    rg_scope_begin();
    rg_backward(rg_cross_entropy(rg_model_forward(j->net, j->x, RG_TRAIN), j->y));
    if (j->ddp && rg_ddp_wait(j->ddp) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: %s\n", rg_last_error());
        exit(1);
    }
    rg_optim_step(j->opt);
    rg_optim_zero_grad(j->opt);
    rg_scope_end();
}

/* Median images/s of this rank over b->iters measurements of 20 steps. */
static double images_per_s(rgbc_ctx *b, train_job *j) {
    for (int i = 0; i < 3; i++) train_step(j); /* cuDNN plans, allocator cache */
    double *ms = malloc(sizeof(double) * (size_t)b->iters);
    if (!ms) abort();
    for (int i = 0; i < b->iters; i++) ms[i] = rgbc_time_ms(b, train_step, j, 20) / 20;
    double step_ms = rgb_median(ms, b->iters);
    free(ms);
    return j->batch / (step_ms * 1e-3);
}

/* A resident batch of random images in [lo, hi) and labels (i * 7) % 10 on b->dev. */
static void resident_batch(rgbc_ctx *b, train_job *j, int64_t c, int64_t hw, float lo, float hi) {
    j->x = rg_tensor_new(RG_F32, RG_SHAPE(j->batch, c, hw, hw), b->dev);
    j->y = rg_tensor_new(RG_I64, RG_SHAPE(j->batch), b->dev);
    int64_t *labels = malloc((size_t)j->batch * sizeof *labels);
    if (!j->x || !j->y || !labels) {
        fprintf(stderr, "ringgrad-bench: out of memory for a batch of %d\n", j->batch);
        exit(1);
    }
    uint64_t off = 0;
    rg_tensor_uniform_(j->x, lo, hi, 7, &off);
    for (int i = 0; i < j->batch; i++) labels[i] = (i * 7) % 10;
    rg_tensor_copy_from_host(j->y, labels);
    free(labels);
}

void rgbc_run_cnn(rgbc_ctx *b) {
    train_job j = {.net = rg_model_cnn(1), .batch = b->batch};
    if (!j.net || rg_model_to_device(j.net, b->dev) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: cnn: %s\n", rg_last_error());
        exit(1);
    }
    const rg_param_list *params = rg_model_params(j.net);
    j.opt = rg_adam_new(params, NULL);
    if (!j.opt) abort();
    resident_batch(b, &j, 1, 28, 0.0f, 1.0f);
    double alone = images_per_s(b, &j);
    rg_comm *nccl = NULL;
    if (rg_comm_new(b->dist, RG_COMM_NCCL, &nccl) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: cnn: %s\n", rg_last_error());
        exit(1);
    }
    j.ddp = rg_ddp_new(params, nccl, NULL);
    double ddp = j.ddp ? images_per_s(b, &j) : 0;
    if (b->print)
        printf("\ncnn training step (Fashion-MNIST CNN, Adam, batch %d per rank, data on the GPU, "
               "median of %d x 20 steps)\n  one GPU alone:        %10.0f images/s\n"
               "  DDP over nccl, %d GPU%s: %9.0f images/s per GPU, %.0f in all\n",
               b->batch, b->iters, alone, b->size, b->size == 1 ? " " : "s", ddp, ddp * b->size);
    rg_ddp_free(j.ddp);
    rg_comm_free(nccl);
    rg_tensor_free(j.x), rg_tensor_free(j.y);
    rg_optim_free(j.opt);
    rg_model_free(j.net);
}

/* ---- a ResNet's training step: the peer is bench/torch_resnet_step.py --device cuda ---- */

/* Medians over b->iters steps of the forward (with the loss), the backward and the optimizer's
 * step, each between its own events and waited for: where the step's time goes on the GPU (the
 * host's launch time shows too where it exceeds the GPU's). torch_resnet_step.py --phases
 * prints the same split. */
static void resnet_phases(rgbc_ctx *b, train_job *j, double out[3]) {
    double *ms = malloc(sizeof(double) * 3 * (size_t)b->iters);
    if (!ms) abort();
    for (int it = 0; it < b->iters; it++) {
        rg_scope_begin();
        rg_cuda_timer_start(b->timer);
        rg_tensor *loss = rg_cross_entropy(rg_model_forward(j->net, j->x, RG_TRAIN), j->y);
        rg_cuda_timer_stop(b->timer);
        ms[it] = rg_cuda_timer_elapsed_ms(b->timer);
        rg_cuda_timer_start(b->timer);
        rg_backward(loss);
        rg_cuda_timer_stop(b->timer);
        ms[b->iters + it] = rg_cuda_timer_elapsed_ms(b->timer);
        rg_cuda_timer_start(b->timer);
        rg_optim_step(j->opt);
        rg_optim_zero_grad(j->opt);
        rg_cuda_timer_stop(b->timer);
        ms[2 * b->iters + it] = rg_cuda_timer_elapsed_ms(b->timer);
        rg_scope_end();
    }
    for (int p = 0; p < 3; p++) out[p] = rgb_median(ms + p * b->iters, b->iters);
    free(ms);
}

void rgbc_run_resnet(rgbc_ctx *b) {
    rg_model_spec spec = {
        .channels = 3, .height = b->image_size, .width = b->image_size, .num_classes = 10};
    train_job j = {.batch = b->resnet_batch};
    if (rg_model_new_for(b->model, 42, &spec, &j.net) != RG_OK ||
        rg_model_to_device(j.net, b->dev) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: resnet: %s\n", rg_last_error());
        exit(1);
    }
    j.opt = rg_sgd_new(rg_model_params(j.net), &(rg_sgd_opts){.lr = 0.01f, .momentum = 0.9f});
    if (!j.opt) abort();
    resident_batch(b, &j, 3, b->image_size, -1.0f, 1.0f);
    double alone = images_per_s(b, &j);
    double phase[3];
    resnet_phases(b, &j, phase);
    rgbc_profiler(true); /* two steps for `ncu --profile-from-start off` (scripts/gpu-check.sh) */
    for (int i = 0; i < 2; i++) train_step(&j);
    rgbc_profiler(false);
    if (b->print) {
        printf("\n%s training step (3x%dx%d, batch %d, SGD momentum, data on the GPU, median of %d "
               "x 20 steps)\n  one GPU alone:        %10.0f images/s  (%.2f ms a step)\n",
               b->model, b->image_size, b->image_size, j.batch, b->iters, alone,
               j.batch / alone * 1e3);
        printf("  phases, each timed alone (host waits between them): forward %.2f ms, backward "
               "%.2f ms, optimizer %.2f ms\n",
               phase[0], phase[1], phase[2]);
        printf("raw ringgrad-cuda model=%s size=%d batch=%d step_ms=%.4f img_s=%.0f fwd_ms=%.3f "
               "bwd_ms=%.3f opt_ms=%.3f\n",
               b->model, b->image_size, j.batch, j.batch / alone * 1e3, alone, phase[0], phase[1],
               phase[2]);
    }
    rg_tensor_free(j.x), rg_tensor_free(j.y);
    rg_optim_free(j.opt);
    rg_model_free(j.net);
}

/* ---- bus bandwidth: one flat allreduce, the bucketed reducer ---- */

typedef struct {
    rg_comm *comm;
    float *buf;
    int64_t count;
    rg_ddp *ddp;
    rg_param_list *grads;
} comm_job;

static void flat_allreduce(void *p) {
    comm_job *j = p;
    if (rg_comm_allreduce(j->comm, j->buf, j->count, RG_COMM_F32, RG_REDUCE_AVG) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: allreduce: %s\n", rg_last_error());
        exit(1);
    }
}

/* One round of the reducer: the hooks in backward's order (reverse registration), then wait. */
static void reducer_round(void *p) {
    comm_job *j = p;
    for (int i = j->grads->n - 1; i >= 0; i--) rg_grad_hooks_fire(j->grads->items[i].tensor);
    if (rg_ddp_wait(j->ddp) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: ddp: %s\n", rg_last_error());
        exit(1);
    }
}

static double median_ms(rgbc_ctx *b, void (*fn)(void *), void *arg, int reps) {
    fn(arg); /* warm-up: NCCL connections, staging blocks */
    double *ms = malloc(sizeof(double) * (size_t)b->iters);
    if (!ms) abort();
    for (int i = 0; i < b->iters; i++) ms[i] = rgbc_time_ms(b, fn, arg, reps) / reps;
    double m = rgb_median(ms, b->iters);
    free(ms);
    return m;
}

static void print_bw(rgbc_ctx *b, const char *what, double bytes, double ms) {
    double alg = bytes / (ms * 1e-3) * 1e-9, bus = alg * 2.0 * (b->size - 1) / b->size;
    if (b->print) printf("%-40s %10.3f %10.2f %10.2f\n", what, ms, alg, bus);
}

/* A gradient set of about `bytes`: tensors of 2^10 .. 2^20 floats in turn, as a network's mix of
 * biases and weights. The list and its tensors are the caller's to free (free_grads). */
static rg_param_list *make_grads(double bytes, rg_device dev) {
    rg_param_list *l = calloc(1, sizeof *l);
    int cap = 4096;
    l->items = calloc((size_t)cap, sizeof *l->items);
    if (!l || !l->items) abort();
    for (double got = 0; got < bytes && l->n < cap; l->n++) {
        int64_t n = (int64_t)1 << (10 + l->n % 11);
        rg_tensor *t = rg_tensor_new(RG_F32, 1, &n, dev);
        char *name = malloc(24);
        if (!t || !name) abort();
        snprintf(name, 24, "g%d.weight", l->n);
        rg_tensor_set_requires_grad(t, true);
        l->items[l->n] = (rg_named_tensor){name, t, false};
        got += (double)n * 4;
    }
    return l;
}

static void free_grads(rg_param_list *l) {
    for (int i = 0; i < l->n; i++) {
        rg_tensor_free(l->items[i].tensor);
        free((char *)l->items[i].name);
    }
    free(l->items);
    free(l);
}

static void reducer_vs_flat(rgbc_ctx *b, rg_comm *nccl, double mb) {
    comm_job j = {.comm = nccl, .grads = make_grads(mb * 1048576.0, b->dev)};
    j.count = (int64_t)(rg_param_list_numel(j.grads));
    j.buf = b->gpu->alloc((size_t)j.count * 4);
    if (!j.buf) abort();
    b->gpu->fill(j.count, 1.0f, j.buf);
    double bytes = (double)j.count * 4, ms;
    char what[80];
    snprintf(what, sizeof what, "flat allreduce, %.0f MiB", bytes / 1048576);
    print_bw(b, what, bytes, median_ms(b, flat_allreduce, &j, 3));
    for (int fp16 = 0; fp16 < 2; fp16++) {
        j.ddp = rg_ddp_new(j.grads, nccl, &(rg_ddp_opts){.compress_fp16 = fp16});
        if (!j.ddp) abort();
        ms = median_ms(b, reducer_round, &j, 3);
        snprintf(what, sizeof what, "ddp reducer%s, %d tensors, %d buckets", fp16 ? " fp16" : "",
                 j.grads->n, rg_ddp_num_buckets(j.ddp));
        print_bw(b, what, bytes, ms);
        rg_ddp_free(j.ddp);
    }
    b->gpu->free(j.buf, (size_t)j.count * 4);
    free_grads(j.grads);
}

void rgbc_run_comm(rgbc_ctx *b) {
    rg_comm *nccl = NULL;
    if (rg_comm_new(b->dist, RG_COMM_NCCL, &nccl) != RG_OK) {
        fprintf(stderr, "ringgrad-bench: comm: %s\n", rg_last_error());
        exit(1);
    }
    if (b->print)
        printf("\nallreduce, float32 avg, %d GPU%s; ms per call (median of %d), GB/s%s\n"
               "%-40s %10s %10s %10s\n",
               b->size, b->size == 1 ? "" : "s", b->iters,
               b->size == 1 ? " (busbw is 0 with one rank: run under mpirun)" : "", "", "ms",
               "algbw", "busbw");
    comm_job j = {.comm = nccl};
    for (int64_t bytes = 1 << 20; bytes <= (int64_t)b->max_mb << 20; bytes *= 4) {
        j.count = bytes / 4;
        j.buf = b->gpu->alloc((size_t)bytes);
        if (!j.buf) abort();
        b->gpu->fill(j.count, 1.0f, j.buf);
        char what[64];
        snprintf(what, sizeof what, "nccl allreduce, %lld MiB", (long long)(bytes >> 20));
        print_bw(b, what, (double)bytes,
                 median_ms(b, flat_allreduce, &j, bytes < (64 << 20) ? 10 : 3));
        b->gpu->free(j.buf, (size_t)bytes);
    }
    reducer_vs_flat(b, nccl, b->max_mb < 100 ? b->max_mb : 100);
    rg_comm_free(nccl);
}
