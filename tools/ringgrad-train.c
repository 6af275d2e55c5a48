/* ringgrad-train — the main job: train a bundled model on Fashion-MNIST, alone or data-parallel.
 *
 *   ringgrad-train                              the CNN, Adam, batch 128, 2 epochs
 *   mpirun -np 4 ringgrad-train --epochs 8      four ranks; global batch 4 x 128
 *
 * Read main() top to bottom: it is the data path of docs/ARCHITECTURE.md. Set-up lives in ringgrad-train/setup.c;
 * each training step is train_step() below: forward, loss, backward (gradient-ready hooks hand
 * full buckets to the comm thread), wait for the buckets, optimizer step. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
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

/* One micro-batch; the verdict of guard_step (guard.c) says whether to go on. A failed collective
 * (a peer died) is reported here. */
static guard_verdict train_step(trainer *t, const rg_batch *b, metrics *m) {
    if (t->rank == t->a.straggle_rank) { /* --straggle RANK:MS, a test option */
        rg_trace_begin("straggle", "compute");
        usleep((useconds_t)(t->a.straggle_ms * 1000.0));
        rg_trace_end();
    }
    if (t->pipe) { /* every stage learns the last stage's loss and count */
        rg_pipeline_result r = {0};
        bool ok = trainer_pipe_step(t, b, RG_TRAIN, &r) == RG_OK;
        m->loss_sum += (double)r.loss * (double)b->size, m->correct += r.correct,
            m->seen += b->size;
        /* the guard as under zero1: each stage sees its own gradients, so a bad one (or a
         * signal) reaches the other ranks through the flags, one step later */
        guard_verdict v = ok ? guard_step(t, r.loss, true) : GUARD_FAILED;
        if (v == GUARD_GO || v == GUARD_STOP_AFTER_STEP) trainer_pipe_update(t);
        return v;
    }
    bool sync = t->zero ? rg_zero1_will_sync(t->zero) : t->ps ? true : rg_ddp_will_sync(t->ddp);
    rg_scope_begin();
    rg_tensor *x = t->dev.type == RG_DEV_CPU ? b->x : rg_tensor_to(b->x, t->dev);
    rg_tensor *y = t->dev.type == RG_DEV_CPU ? b->y : rg_tensor_to(b->y, t->dev);

    rg_trace_begin("forward", "compute");
    /* BatchNorm buffers: rank 0's everywhere (DDP's broadcast_buffers), unless --sync-bn */
    rg_status st = trainer_broadcast_buffers(t);
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

    guard_verdict v;
    if (t->zero) {
        /* zero1: the guard sees this rank's own gradients (the reduce-scatter is inside
         * rg_zero1_step), so a bad one stops every rank one step later, through the flags */
        v = guard_step(t, loss_value, sync);
        if (v == GUARD_GO || v == GUARD_STOP_AFTER_STEP) {
            rg_trace_begin(sync ? "zero1_step" : "accumulate", "comm");
            st = rg_zero1_step(t->zero); /* reduce-scatter, the shard's update, allgather */
            rg_trace_end();
            if (st == RG_OK && sync) t->step++;
            if (st != RG_OK) v = GUARD_FAILED;
        }
    } else if (t->ps) {
        /* parameter servers: push the gradient shards, pull the new weights. The guard's flags
         * travel in-band (guard_ps_flags): when any come back, this worker ends its epoch here,
         * and guard_ps_finish decides with every rank */
        int seen = 0;
        rg_trace_begin("ps_push_pull", "comm");
        st = rg_ps_push_pull(t->ps, guard_ps_flags(t, loss_value), &seen);
        rg_trace_end();
        if (st == RG_OK) t->step++;
        v = st != RG_OK ? GUARD_FAILED : seen ? GUARD_STOP_AFTER_STEP : GUARD_GO;
    } else {
        rg_trace_begin("ddp_wait", "comm");
        st = rg_ddp_wait(t->ddp);
        rg_trace_end();
        /* non-finite loss or gradients, or a signal, on any rank: every rank decides alike here */
        v = st == RG_OK ? guard_step(t, loss_value, sync) : GUARD_FAILED;
    }
    if ((v == GUARD_GO || v == GUARD_STOP_AFTER_STEP) && sync && !t->zero && !t->ps) {
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
    /* the comm may have failed in another collective (the guard's flags, the metrics): its
     * message says which */
    if (st != RG_OK)
        trainer_error(t, "communication failed, waiting for the gradients: %s", rg_last_error());
    return v;
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

/* --buffer-checksum (a test option): "rank R: buffers HASH (WHEN)", the FNV-1a hash of the bytes
 * of every buffer of the model (running_mean, running_var, num_batches_tracked), so that a test
 * can compare the ranks' BatchNorm statistics. One write per line: the ranks share a stdout. */
static void print_buffer_checksum(const trainer *t, const char *when) {
    if (!t->a.buffer_checksum) return;
    const rg_param_list *l = rg_model_params(t->net);
    uint64_t h = RG_FNV1A_BASIS;
    int n = 0;
    rg_scope_begin();
    for (int i = 0; i < l->n; i++) {
        if (!l->items[i].is_buffer) continue;
        const rg_tensor *x = l->items[i].tensor;
        if (x->device.type != RG_DEV_CPU) x = rg_tensor_to(x, RG_CPU);
        h = rg_fnv1a(h, x->data, rg_tensor_nbytes(x));
        n++;
    }
    rg_scope_end();
    printf("rank %d: buffers %016llx (%d tensors, %s)\n", t->rank, (unsigned long long)h, n, when);
    fflush(stdout);
}

/* Test accuracy, shared out by batch index (see trainer_setup_loaders); -1 when the ranks could
 * not sum it (already reported). */
static double evaluate(trainer *t) {
    metrics m = {0};
    rg_batch b;
    print_buffer_checksum(t, "before evaluation");
    /* every rank scores with rank 0's BatchNorm statistics, the ones rank 0 saves */
    if (trainer_broadcast_buffers(t) != RG_OK) {
        trainer_error(t, "buffer broadcast failed: %s", rg_last_error());
        return -1.0;
    }
    print_buffer_checksum(t, "evaluated");
    rg_loader_set_epoch(t->test, 0);
    rg_trace_begin("evaluate", "compute");
    rg_no_grad_begin();
    while (rg_loader_next(t->test, &b)) {
        if (t->pipe) { /* all of a pipeline's stages score its batches */
            if (b.step % t->dp_size != t->dp_rank) continue;
            rg_pipeline_result r = {0};
            if (trainer_pipe_step(t, &b, RG_EVAL, &r) != RG_OK) break;
            m.correct += r.correct, m.seen += b.size;
            continue;
        }
        if (t->server || b.step % t->workers != t->wrank) continue;
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
    t->epoch = epoch;
    progress_begin_epoch(&t->prog, (int)epoch, t->a.epochs, spe);
    metrics m = {0};
    rg_batch b;
    int64_t batches = 0;
    double seconds_before = t->train_seconds, wall0 = progress_now();
    for (; t->skip_batches > 0 && rg_loader_next(t->train, &b); t->skip_batches--) batches++;
    guard_verdict v = GUARD_GO;
    if (t->server) { /* a parameter server serves the workers' steps of this epoch */
        int64_t n = 0;
        rg_trace_begin("ps_serve", "comm");
        rg_status st = rg_ps_serve(t->ps, NULL, &n); /* until every worker ends the epoch */
        rg_trace_end();
        if (st != RG_OK) trainer_error(t, "parameter server failed: %s", rg_last_error());
        if (st != RG_OK) v = GUARD_FAILED;
        t->step += n, batches += n;
    }
    while (v == GUARD_GO && !t->server && (t->a.max_steps < 0 || t->step < t->a.max_steps) &&
           rg_loader_next(t->train, &b)) {
        double t0 = progress_now();
        int64_t step_before = t->step;
        v = train_step(t, &b, &m);
        t->train_seconds += progress_now() - t0;
        t->images += b.size * t->workers; /* pipeline: its stages share a batch */
        batches++;
        if (v != GUARD_DIVERGED && v != GUARD_FAILED && t->step != step_before &&
            guard_save_periodic(t, batches == spe ? epoch + 1 : epoch) != RG_OK)
            t->local_error = true; /* reported; every rank stops at the next check */
        progress_update(&t->prog, batches, m.loss_sum / (double)m.seen,
                        (double)m.correct / (double)m.seen, (double)t->images / t->train_seconds);
        guard_check_stdout(t);
    }
    if (t->ps)
        v = guard_ps_finish(t, v); /* every rank's flags of the epoch */
    else if (v == GUARD_GO)
        v = guard_finish(t); /* the last step's flags */
    if (v != GUARD_GO && t->prog.enabled && t->prog.tty) fputc('\n', t->prog.out); /* end the bar */
    if (v == GUARD_DIVERGED || v == GUARD_FAILED) return false; /* nothing saved: keep the last */
    if (reduce_metrics(t, &m) != RG_OK) return false;
    t->wall_train += progress_now() - wall0;
    bool finished = batches == spe;
    if (v == GUARD_STOP_AFTER_STEP) { /* a signal: save now, skip the evaluation, stop */
        /* agreed, so that no rank exits (and mpirun kills the job) before rank 0 has saved */
        if (trainer_agree(t, trainer_save(t, finished ? epoch + 1 : epoch)) != RG_OK)
            t->stop_signal = 0;
        return false;
    }
    t->trained_any |= m.seen > 0;
    if (m.seen) t->last_loss = m.loss_sum / (double)m.seen, t->last_acc = (double)m.correct / (double)m.seen;
    t->test_acc = evaluate(t);
    if (t->test_acc < 0 || trainer_check_loaders(t) != RG_OK) return false;
    if (t->n_log < RG_TRAIN_EPOCH_LOG)
        t->log_acc[t->n_log] = t->test_acc, t->log_secs[t->n_log++] = t->wall_train;
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

/* rg_dist_init_opts's failure, said by every rank before MPI is finalised (the on_init_error
 * callback): mpirun ends the job when the first rank exits, and a rank that reported only after
 * the finalisation could be killed before its line was out (train/agree_* saw one missing). */
static void report_init_error(const char *msg, void *ctx) {
    (void)ctx;
    const char *world = getenv("OMPI_COMM_WORLD_SIZE");
    if (world && atoi(world) > 1)
        fprintf(stderr, "ringgrad-train: rank %d: error: %s\n", env_rank(), msg);
    else
        fprintf(stderr, "ringgrad-train: error: %s\n", msg);
    fflush(stderr);
}

/* --version: the library's version, the CPU kernels this CPU gets, and the CUDA backend. */
static void print_version(void) {
    const char *isa = rg_cpu_isa_init() == RG_OK ? rg_cpu_isa() : rg_last_error();
    int gpus = rg_cuda_compiled() ? rg_cuda_device_count() : 0;
    printf("ringgrad-train %s (built against %s)\nCPU kernels: %s\nCUDA backend: %s", rg_version(),
           RG_VERSION_STRING, isa, rg_cuda_compiled() ? "compiled" : "not compiled");
    if (rg_cuda_compiled()) printf(", %d GPU%s visible", gpus, gpus == 1 ? "" : "s");
    printf("\n");
}

/* n (a count, >= 0) with its thousands separated by commas, into buf */
static const char *with_commas(int64_t n, char *buf, size_t cap) {
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)n), at = 0;
    for (int i = 0; i < len && (size_t)at + 2 < cap; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = '\0';
    return buf;
}

/* Rank 0, before the first epoch: what is about to train, on what, and how (two lines), so that
 * the settings nobody typed (threads per rank, the kernels, the comm, the global batch, the
 * steps per epoch) are on the record of every run. */
static void print_header(const trainer *t) {
    if (t->rank != 0) return;
    char params[32], ntrain[32], ntest[32], dev[16];
    const rg_dataset *d = t->train_ds;
    printf("ringgrad-train: %s, %s parameters", t->a.model,
           with_commas(rg_param_list_numel(rg_model_params(t->net)), params, sizeof params));
    if (d)
        printf("; %s: %s training and %s test images of %lldx%lldx%lld, %d classes",
               strcmp(t->a.data, "fmnist") == 0 ? "Fashion-MNIST" : t->a.data,
               with_commas(d->n, ntrain, sizeof ntrain),
               with_commas(t->test_ds ? t->test_ds->n : 0, ntest, sizeof ntest), (long long)d->c,
               (long long)d->h, (long long)d->w, d->num_classes);
    if (d && d->gen) printf(" (each made as the loader reads it)");
    printf("\nringgrad-train: %d rank%s x %d thread%s, %s", t->world, t->world == 1 ? "" : "s",
           t->threads, t->threads == 1 ? "" : "s", rg_device_str(t->dev, dev, sizeof dev));
    if (t->dev.type == RG_DEV_CPU) printf(" (%s kernels)", rg_cpu_isa());
    if (t->world > 1) { /* parameter servers and pipelines always have several */
        printf(", %s", t->a.strategy);
        if (t->ps)
            printf(" (%d worker%s, %d server%s)", t->workers, t->workers == 1 ? "" : "s",
                   t->world - t->workers, t->world - t->workers == 1 ? "" : "s");
        if (t->pipe) printf(" (%d stages x %d pipelines)", t->a.pipeline_stages, t->dp_size);
        if (t->comm) printf(" over %s", rg_comm_backend_name(rg_comm_kind(t->comm)));
    }
    int64_t k = t->a.accum_steps > 1 ? t->a.accum_steps : 1;
    int64_t spe = t->train ? rg_loader_steps_per_epoch(t->train) : 0;
    char batches[32], steps[32];
    printf("; batch %d a %s, %lld a step", t->a.batch_size, t->ps ? "worker" : "rank",
           (long long)t->a.batch_size * t->workers * k);
    if (k > 1)
        printf(" (%lld batches accumulated); %s batches an epoch, %s steps", (long long)k,
               with_commas(spe, batches, sizeof batches),
               with_commas(spe / k, steps, sizeof steps));
    else if (t->train)
        printf("; %s steps an epoch", with_commas(spe, steps, sizeof steps));
    printf("\n");
    fflush(stdout);
}

/* The one-line JSON summary (rank 0, --json): always valid JSON, also after a failure, with
 * non-finite numbers as null and "error" null or the reason. */
static void print_summary(const trainer *t, double seconds, const char *error) {
    if (t->rank != 0 || !t->a.json) return;
    char dev[16];
    printf("{\"version\":\"%s\",\"model\":\"%s\",\"device\":\"%s\",\"world_size\":%d,"
           "\"comm\":\"%s\",\"threads\":%d,"
           "\"cpu_isa\":\"%s\",\"epochs\":%d,\"steps\":%lld,\"batch_size\":%d,\"global_batch\":%d,"
           "\"eval_batch_size\":%d,",
           rg_version(), t->a.model, rg_device_str(t->dev, dev, sizeof dev), t->world,
           t->comm ? rg_comm_backend_name(rg_comm_kind(t->comm)) : "none", t->threads, rg_cpu_isa(),
           t->a.epochs, (long long)t->step, t->a.batch_size,
           t->a.batch_size * t->workers * (t->a.accum_steps > 1 ? t->a.accum_steps : 1),
           t->eval_batch);
    guard_json_number(stdout, "train_loss", t->trained_any ? t->last_loss : NAN, "%.6f");
    guard_json_number(stdout, "train_accuracy", t->trained_any ? t->last_acc : NAN, "%.6f");
    guard_json_number(stdout, "test_accuracy", t->test_acc >= 0 ? t->test_acc : NAN, "%.6f");
    guard_json_number(stdout, "images_per_sec",
                      t->train_seconds > 0 ? (double)t->images / t->train_seconds : 0.0, "%.1f");
    guard_json_number(stdout, "train_seconds", t->train_seconds, "%.3f");
    guard_json_number(stdout, "seconds", seconds, "%.3f");
    printf("\"error\":");
    if (error)
        guard_json_string(stdout, error);
    else
        printf("null");
    printf(",\"strategy\":\"%s\",\"optimizer_state_bytes\":%zu,", t->a.strategy,
           t->opt ? rg_optim_state_bytes(t->opt) : (size_t)0);
    /* the payload each rank gives the collectives per step, in allreduce terms */
    int64_t sent = t->zero  ? rg_zero1_bytes_per_step(t->zero)
                   : t->ps  ? rg_ps_bytes_per_step(t->ps) /* a worker's push and pull */
                   : t->ddp ? rg_ddp_bytes_per_step(t->ddp)
                            : 0; /* pipeline: no collectives of gradients across stages */
    printf("\"compress\":\"%s\",\"bytes_per_step\":%lld", t->ddp ? t->a.compress : "none",
           (long long)sent);
    if (t->ps && t->staleness_hist) {
        printf(",\"servers_optimizer_state_bytes\":%lld", (long long)t->ps_state_bytes);
        printf(",\"servers\":%d,\"workers\":%d,\"max_staleness\":%d,\"staleness_hist\":[",
               t->a.servers, t->workers, t->a.max_staleness);
        int bins = strcmp(t->a.strategy, "ps-async") == 0 ? t->a.max_staleness + 1 : 1;
        for (int i = 0; i < bins; i++)
            printf("%s%lld", i ? "," : "", (long long)t->staleness_hist[i]);
        printf("]");
    }
    printf(",\"epoch_log\":[");
    for (int i = 0; i < t->n_log; i++)
        printf("%s{\"test_accuracy\":%.6f,\"seconds\":%.3f}", i ? "," : "", t->log_acc[i],
               t->log_secs[i]);
    printf("]}\n");
    fflush(stdout);
}

static int pick_threads(const trainer *t, int env_threads) {
    if (t->a.threads > 0) return t->a.threads;
    if (env_threads > 0) return env_threads;
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
    int env_threads = 0;
    size_t mem_limit;
    if (rg_env_num_threads(&env_threads) != RG_OK || /* a usage error, as a bad --threads is */
        rg_env_cpu_mem_limit(&mem_limit) != RG_OK) {
        if (env_rank() == 0) fprintf(stderr, "ringgrad-train: %s\n", rg_last_error());
        return 2;
    }
    if (check_device(t) != RG_OK || rg_cpu_isa_init() != RG_OK) { /* RG_ISA checked here too */
        if (env_rank() == 0) fprintf(stderr, "ringgrad-train: error: %s\n", rg_last_error());
        return 1;
    }
    const char *comm = t->a.comm;
    if (!comm && !getenv("RG_COMM") && t->dev.type == RG_DEV_CUDA) comm = "nccl";
    char agreed[4096];
    train_args_agreed(&t->a, agreed, sizeof agreed);
    t->dist = rg_dist_init_opts(argc, argv, &(rg_dist_opts){.comm = comm,
                                                            .stall_seconds = t->a.stall_seconds,
                                                            .agree = agreed,
                                                            .on_init_error = report_init_error});
    if (!t->dist) return 1; /* report_init_error said why */
    t->comm = rg_dist_comm(t->dist);
    t->rank = rg_dist_rank(t->dist), t->world = rg_dist_size(t->dist);
    t->wrank = t->rank, t->workers = t->world; /* parameter servers and pipelines change both */
    t->threads = rg_set_num_threads(pick_threads(t, env_threads));
    progress_init(&t->prog, stdout, t->rank == 0);
    if (t->rank == 0) train_args_notes(&t->a, stdout);
    guard_ignore_sigpipe();
    /* "--device cuda": the GPU of this rank's local rank (one GPU per rank) */
    if (t->dev.type == RG_DEV_CUDA && strcmp(t->a.device, "cuda") == 0 &&
        rg_cuda_set_device(rg_dist_local_rank(t->dist), &t->dev) != RG_OK) {
        trainer_error(t, "%s", rg_last_error());
        return 1;
    }
    return 0;
}

static void teardown(trainer *t) {
    guard_free(t);
    rg_loader_free(t->train);
    rg_loader_free(t->test);
    rg_ddp_free(t->ddp);
    if (t->zero) t->opt = NULL; /* the sharded optimizer's own */
    rg_zero1_free(t->zero);
    rg_pipeline_free(t->pipe);
    rg_comm_free(t->stage_comm);
    rg_comm_free(t->dp_comm);
    if (t->ps) t->opt = NULL; /* the server's own */
    rg_ps_free(t->ps);
    free(t->staleness_hist);
    rg_optim_free(t->opt);
    rg_model_free(t->net);
    rg_dataset_free(t->train_ds);
    rg_dataset_free(t->test_ds);
    free(t->mean), free(t->std);
}

/* Out of memory inside an op (a batch too large for the host): the library has printed what it
 * could not allocate; end with exit status 1, as for every error this program reports, rather
 * than SIGABRT and a core file, and once the run has started print --json's line first (rank 0),
 * its "error" the message: the README promises a valid line for every failed run. Any fatal error
 * goes on to the handler that was there before (rg_dist_init's ends every rank of an MPI job);
 * a failed check (a bug) then aborts. */
static const trainer *fatal_trainer; /* set once the run has started */
static double fatal_t_start;
static rg_fatal_handler fatal_next;

static void on_fatal(void) {
    const trainer *t = fatal_trainer;
    fatal_trainer = NULL; /* once, should the summary itself run out of memory */
    /* out of memory, or a collective that never finished: errors of the run, not bugs */
    const bool run_error = rg_fatal_status() == RG_ENOMEM || rg_fatal_status() == RG_ETIMEDOUT;
    if (run_error && t) print_summary(t, progress_now() - fatal_t_start, rg_last_error());
    fflush(stdout);
    if (fatal_next) fatal_next();
    if (run_error) _exit(1);
}

int main(int argc, char **argv) {
    double t_start = progress_now();
    rg_set_fatal_handler(on_fatal);
    trainer t = {0};
    int code = train_args_parse(&t.a, argc, argv);
    if (code || t.a.help) {
        if (t.a.help && env_rank() == 0) train_args_usage();
        return code;
    }
    if (t.a.version) {
        if (env_rank() == 0) print_version();
        return 0;
    }
    t.test_acc = -1; /* not evaluated yet */
    if ((code = start(&t, &argc, &argv)) != 0) {
        if (!t.dist) t.rank = env_rank(), t.world = 1;
        char why[1024]; /* --json: a valid line with the reason, also when start-up failed */
        snprintf(why, sizeof why, "%s", *trainer_first_error() ? trainer_first_error() : rg_last_error());
        print_summary(&t, progress_now() - t_start, why);
        RG_IGNORE(rg_dist_finalize(t.dist)); /* start-up failed and said why; that is the error */
        return code;
    }
    /* rg_dist_init replaced on_fatal with its own under mpirun: chain to it */
    rg_fatal_handler dist_handler = rg_get_fatal_handler();
    fatal_next = dist_handler == on_fatal ? NULL : dist_handler;
    fatal_trainer = &t, fatal_t_start = t_start;
    rg_set_fatal_handler(on_fatal);
    bool ok = guard_check_outputs(&t) == RG_OK && trainer_setup_data(&t) == RG_OK && trainer_setup_model(&t) == RG_OK &&
              trainer_setup_loaders(&t) == RG_OK;
    if (ok) print_header(&t);
    if (ok && t.a.straggle && t.a.straggle_rank >= t.world && t.rank == 0)
        printf("ringgrad-train: note: --straggle %s changes nothing: this job's ranks are 0-%d\n",
               t.a.straggle, t.world - 1);
    if (ok) guard_install_signals(); /* from here a signal stops after a step, saved */
    if (ok && t.a.timeline) {
        rg_trace_name_thread("main");
        rg_trace_set_ops(t.a.timeline_ops);
        ok = rg_timeline_start(t.comm) == RG_OK;
    }
    for (int64_t e = t.start_epoch; ok && e < t.a.epochs; e++) {
        if (t.a.max_steps >= 0 && t.step >= t.a.max_steps && e > t.start_epoch) break;
        ok = run_epoch(&t, e);
    }
    if (ok && t.test_acc < 0 && !t.stop_signal) { /* nothing left to train (a finished run resumed) */
        t.test_acc = evaluate(&t);
        ok = t.test_acc >= 0;
        if (ok && t.rank == 0)
            printf("Nothing left to train (step %lld, epoch %lld of %d); test_accuracy: %.4f\n",
                   (long long)t.step, (long long)t.start_epoch, t.a.epochs, t.test_acc);
    }
    if (ok && t.a.timeline) {
        rg_trace_stop();
        if (rg_timeline_write(t.comm, t.a.timeline) != RG_OK) {
            trainer_error(&t, "%s", rg_last_error());
            ok = false;
        }
    }
    if (ok && t.ps) { /* collective: the servers' staleness histograms summed */
        int bins = strcmp(t.a.strategy, "ps-async") == 0 ? t.a.max_staleness + 1 : 1;
        t.staleness_hist = calloc((size_t)t.a.max_staleness + 1, sizeof *t.staleness_hist);
        ok = t.staleness_hist && rg_ps_staleness_hist(t.ps, t.staleness_hist, bins) == RG_OK;
        t.ps_state_bytes = (int64_t)rg_ps_state_bytes(t.ps); /* summed over the servers */
        ok = ok && rg_comm_allreduce(t.comm, &t.ps_state_bytes, 1, RG_COMM_I64, RG_REDUCE_SUM) ==
                       RG_OK;
        if (!ok) trainer_error(&t, "staleness histogram: %s", rg_last_error());
    }
    /* A signal stops after a step (saved when --save is given) with 128 + its number; one that
     * came outside the steps (evaluation, saving) lets the run finish, then says so the same way. */
    int sig = t.stop_signal ? t.stop_signal : guard_signal();
    const char *err = NULL;
    char why[256];
    if (!ok && !t.stop_signal) {
        err = *trainer_first_error() ? trainer_first_error() : "failed on another rank";
    } else if (sig) {
        snprintf(why, sizeof why, "stopped by %s after step %lld", strsignal(sig), (long long)t.step);
        err = why;
    }
    print_summary(&t, progress_now() - t_start, err);
    fatal_trainer = NULL; /* printed; and t is torn down next */
    teardown(&t);
    rg_status st = rg_dist_finalize(t.dist);
    if (sig && (ok || t.stop_signal)) return 128 + sig;
    return ok && st == RG_OK ? 0 : 1;
}
