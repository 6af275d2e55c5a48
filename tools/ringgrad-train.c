/* ringgrad-train — the main job: train a bundled model on Fashion-MNIST, alone or data-parallel.
 *
 *   ringgrad-train                              the CNN, Adam, batch 128, 2 epochs
 *   mpirun -np 4 ringgrad-train --epochs 8      four ranks; global batch 4 x 128
 *
 * Read main() top to bottom: it is the data path of docs/ARCHITECTURE.md. Set-up lives in ringgrad-train/setup.c;
 * each training step is train_step() below: forward, loss, backward (gradient-ready hooks hand
 * full buckets to the comm thread), wait for the buckets, optimizer step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringgrad-train/trainer.h"

/* ---- one step ---- */

typedef struct {
    double loss_sum;  /* sum over batches of the mean batch loss x batch size */
    int64_t correct, seen;
} metrics;

static int64_t count_correct(rg_tensor *logits, rg_tensor *labels_host) {
    rg_tensor *pred = rg_tensor_to(rg_argmax(logits), RG_CPU);
    const int64_t *p = pred->data, *y = labels_host->data;
    int64_t c = 0;
    for (int64_t i = 0; i < pred->numel; i++) c += p[i] == y[i];
    return c;
}

/* Returns false when the step failed (a peer died): the caller stops training. */
static bool train_step(trainer *t, const rg_batch *b, metrics *m) {
    bool sync = rg_ddp_will_sync(t->ddp);
    rg_scope_begin();
    rg_tensor *x = t->dev.type == RG_DEV_CPU ? b->x : rg_tensor_to(b->x, t->dev);
    rg_tensor *y = t->dev.type == RG_DEV_CPU ? b->y : rg_tensor_to(b->y, t->dev);

    rg_trace_begin("forward", "compute");
    /* BatchNorm buffers: rank 0's everywhere (DDP's broadcast_buffers), unless --sync-bn */
    rg_status st = t->a.sync_bn ? RG_OK : rg_ddp_broadcast_buffers(t->ddp);
    if (st != RG_OK) {
        rg_trace_end();
        rg_scope_end();
        trainer_error(t, "buffer broadcast failed: %s", rg_last_error());
        return false;
    }
    rg_tensor *logits = rg_model_forward(t->net, x, RG_TRAIN);
    rg_tensor *loss = rg_cross_entropy_smooth(logits, y, (float)t->a.label_smoothing);
    rg_trace_end();
    float loss_value = rg_tensor_item(loss);

    rg_trace_begin("backward", "compute");
    /* with accumulation, each micro-batch contributes 1/K of the step's mean gradient */
    rg_backward(t->a.accum_steps > 1 ? rg_scale(loss, 1.0f / (float)t->a.accum_steps) : loss);
    rg_trace_end();

    rg_trace_begin("ddp_wait", "comm");
    st = rg_ddp_wait(t->ddp);
    rg_trace_end();
    if (st == RG_OK && sync) {
        rg_trace_begin("optimizer", "compute");
        rg_optim_step(t->opt);
        rg_optim_zero_grad(t->opt);
        rg_trace_end();
        t->step++;
    }
    m->loss_sum += (double)loss_value * (double)b->size;
    m->correct += count_correct(logits, b->y);
    m->seen += b->size;
    rg_scope_end();
    if (st != RG_OK) trainer_error(t, "gradient allreduce failed: %s", rg_last_error());
    return st == RG_OK;
}

/* Sums the epoch's metrics over the ranks. A failure (a rank died) is reported and returned. */
RG_NODISCARD static rg_status reduce_metrics(trainer *t, metrics *m) {
    float v[3] = {(float)m->loss_sum, (float)m->correct, (float)m->seen};
    if (t->world > 1) {
        rg_status s = rg_comm_allreduce(t->comm, v, 3, RG_COMM_F32, RG_REDUCE_SUM);
        if (s != RG_OK) return trainer_error(t, "metrics allreduce failed: %s", rg_last_error()), s;
    }
    m->loss_sum = v[0], m->correct = (int64_t)v[1], m->seen = (int64_t)v[2];
    return RG_OK;
}

/* Test accuracy, shared out by batch index (see trainer_setup_loaders); -1 when the ranks could
 * not sum it (already reported). */
static double evaluate(trainer *t) {
    metrics m = {0};
    rg_batch b;
    /* every rank scores with rank 0's BatchNorm statistics, the ones rank 0 saves */
    if (!t->a.sync_bn && rg_ddp_broadcast_buffers(t->ddp) != RG_OK) {
        trainer_error(t, "buffer broadcast failed: %s", rg_last_error());
        return -1.0;
    }
    rg_loader_set_epoch(t->test, 0);
    rg_trace_begin("evaluate", "compute");
    rg_no_grad_begin();
    while (rg_loader_next(t->test, &b)) {
        if (b.step % t->world != t->rank) continue;
        rg_scope_begin();
        rg_tensor *x = t->dev.type == RG_DEV_CPU ? b.x : rg_tensor_to(b.x, t->dev);
        m.correct += count_correct(rg_model_forward(t->net, x, RG_EVAL), b.y);
        m.seen += b.size;
        rg_scope_end();
    }
    rg_no_grad_end();
    rg_trace_end();
    if (reduce_metrics(t, &m) != RG_OK) return -1.0;
    return m.seen ? (double)m.correct / (double)m.seen : 0.0;
}

/* One epoch (or what --max-steps leaves of it). Returns false on failure. */
static bool run_epoch(trainer *t, int64_t epoch) {
    int64_t spe = rg_loader_steps_per_epoch(t->train);
    rg_loader_set_epoch(t->train, epoch);
    progress_begin_epoch(&t->prog, (int)epoch, t->a.epochs, spe);
    metrics m = {0};
    rg_batch b;
    int64_t batches = 0;
    double seconds_before = t->train_seconds;
    for (; t->skip_batches > 0 && rg_loader_next(t->train, &b); t->skip_batches--) batches++;
    bool ok = true;
    while (ok && (t->a.max_steps < 0 || t->step < t->a.max_steps) && rg_loader_next(t->train, &b)) {
        double t0 = progress_now();
        ok = train_step(t, &b, &m);
        t->train_seconds += progress_now() - t0;
        t->images += b.size * t->world;
        batches++;
        progress_update(&t->prog, batches, m.loss_sum / (double)m.seen,
                        (double)m.correct / (double)m.seen, (double)t->images / t->train_seconds);
    }
    if (!ok || reduce_metrics(t, &m) != RG_OK) return false;
    bool finished = batches == spe;
    t->trained_any |= m.seen > 0;
    if (m.seen) t->last_loss = m.loss_sum / (double)m.seen, t->last_acc = (double)m.correct / (double)m.seen;
    t->test_acc = evaluate(t);
    if (t->test_acc < 0) return false;
    progress_end_epoch(&t->prog, batches, t->last_loss, t->last_acc,
                       t->train_seconds > 0 ? (double)t->images / t->train_seconds : 0.0,
                       t->train_seconds - seconds_before, t->test_acc);
    return trainer_save(t, finished ? epoch + 1 : epoch) == RG_OK;
}

/* ---- start-up and summary ---- */

static int env_rank(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return r ? atoi(r) : 0;
}

static void print_summary(const trainer *t, double seconds) {
    if (t->rank != 0 || !t->a.json) return;
    char dev[16];
    printf("{\"model\":\"%s\",\"device\":\"%s\",\"world_size\":%d,\"comm\":\"%s\",\"threads\":%d,"
           "\"epochs\":%d,\"steps\":%lld,\"batch_size\":%d,\"global_batch\":%d,",
           t->a.model, rg_device_str(t->dev, dev, sizeof dev), t->world,
           rg_comm_backend_name(rg_comm_kind(t->comm)), t->threads, t->a.epochs,
           (long long)t->step, t->a.batch_size, t->a.batch_size * t->world);
    if (t->trained_any)
        printf("\"train_loss\":%.6f,\"train_accuracy\":%.6f,", t->last_loss, t->last_acc);
    else
        printf("\"train_loss\":null,\"train_accuracy\":null,");
    printf("\"test_accuracy\":%.6f,\"images_per_sec\":%.1f,\"train_seconds\":%.3f,\"seconds\":%.3f}\n",
           t->test_acc, t->train_seconds > 0 ? (double)t->images / t->train_seconds : 0.0,
           t->train_seconds, seconds);
    fflush(stdout);
}

static int pick_threads(const trainer *t) {
    if (t->a.threads > 0) return t->a.threads;
    if (getenv("RG_NUM_THREADS")) return rg_set_num_threads(0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(cores / rg_dist_local_size(t->dist));
    return n > 0 ? n : 1;
}

/* Whether --device names a device this process can use; checked before MPI starts so that the
 * message is about the device, not about the NCCL backend it would have chosen. */
RG_NODISCARD static rg_status check_device(trainer *t) {
    rg_status st = rg_device_parse(t->a.device, &t->dev);
    if (st == RG_OK && t->dev.type == RG_DEV_CUDA && rg_cuda_device_count() == 0)
        st = rg_error(RG_EDEVICE, "--device %s: no CUDA device is available (this build %s); "
                      "use --device cpu", t->a.device,
                      rg_cuda_compiled() ? "has the CUDA backend, but the driver found no GPU"
                                         : "has no CUDA backend");
    return st;
}

/* Device, MPI and threads; returns 0 or an exit code. */
static int start(trainer *t, int *argc, char ***argv) {
    if (check_device(t) != RG_OK) {
        if (env_rank() == 0) fprintf(stderr, "ringgrad-train: error: %s\n", rg_last_error());
        return 1;
    }
    const char *comm = t->a.comm;
    if (!comm && !getenv("RG_COMM") && t->dev.type == RG_DEV_CUDA) comm = "nccl";
    t->dist = rg_dist_init_opts(argc, argv, &(rg_dist_opts){.comm = comm,
                                                            .stall_seconds = t->a.stall_seconds});
    if (!t->dist) {
        fprintf(stderr, "ringgrad-train: error: %s\n", rg_last_error());
        return 1;
    }
    t->comm = rg_dist_comm(t->dist);
    t->rank = rg_dist_rank(t->dist), t->world = rg_dist_size(t->dist);
    t->threads = rg_set_num_threads(pick_threads(t));
    progress_init(&t->prog, stdout, t->rank == 0);
    /* "--device cuda": the GPU of this rank's local rank (one GPU per rank) */
    if (t->dev.type == RG_DEV_CUDA && strcmp(t->a.device, "cuda") == 0 &&
        rg_cuda_set_device(rg_dist_local_rank(t->dist), &t->dev) != RG_OK) {
        trainer_error(t, "%s", rg_last_error());
        return 1;
    }
    return 0;
}

static void teardown(trainer *t) {
    rg_loader_free(t->train);
    rg_loader_free(t->test);
    rg_ddp_free(t->ddp);
    rg_optim_free(t->opt);
    rg_model_free(t->net);
    rg_dataset_free(t->train_ds);
    rg_dataset_free(t->test_ds);
}

int main(int argc, char **argv) {
    double t_start = progress_now();
    trainer t = {0};
    int code = train_args_parse(&t.a, argc, argv);
    if (code || t.a.help) {
        if (t.a.help && env_rank() == 0) train_args_usage();
        return code;
    }
    if ((code = start(&t, &argc, &argv)) != 0) {
        RG_IGNORE(rg_dist_finalize(t.dist)); /* start-up failed and said why; that is the error */
        return code;
    }
    bool ok = trainer_setup_data(&t) == RG_OK && trainer_setup_model(&t) == RG_OK &&
              trainer_setup_loaders(&t) == RG_OK;
    if (ok && t.a.timeline) {
        rg_trace_name_thread("main");
        ok = rg_timeline_start(t.comm) == RG_OK;
    }
    for (int64_t e = t.start_epoch; ok && e < t.a.epochs; e++) {
        if (t.a.max_steps >= 0 && t.step >= t.a.max_steps && e > t.start_epoch) break;
        ok = run_epoch(&t, e);
    }
    if (ok && t.a.timeline) {
        rg_trace_stop();
        if (rg_timeline_write(t.comm, t.a.timeline) != RG_OK) {
            trainer_error(&t, "%s", rg_last_error());
            ok = false;
        }
    }
    if (ok) print_summary(&t, progress_now() - t_start);
    teardown(&t);
    rg_status st = rg_dist_finalize(t.dist);
    return ok && st == RG_OK ? 0 : 1;
}
