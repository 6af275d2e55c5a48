/* guard.c — what keeps a run honest and recoverable: the per-step check for non-finite losses and
 * gradients, SIGINT/SIGTERM (finish the step, save, exit 128+signal), SIGPIPE, output paths
 * probed at start-up, and a --json summary that stays valid JSON whatever happened.
 *
 * How the ranks agree to stop: at every optimizer step each rank contributes one word of flags
 * (its loss was not finite, its gradients are not, it caught a signal) to a small allreduce after
 * the gradients are reduced (a float per rank, each rank's own slot set, the others 0: the sum
 * hands everyone all of them). Every rank then sees every rank's flags and takes the same decision
 * at the same step, so a signal or a NaN on one rank never leaves the others waiting. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/path.h"
#include "trainer.h"

enum { FLAG_LOSS = 1, FLAG_GRAD = 2, FLAG_SIGNAL = 4, FLAG_ERROR = 8 };

/* ---- signals ---- */

static volatile sig_atomic_t caught_signal;

static void on_signal(int sig) {
    if (caught_signal) _exit(128 + sig); /* the second signal: leave at once */
    caught_signal = sig;
}

void guard_ignore_sigpipe(void) {
    /* A closed pipe (ringgrad-train | head) must not kill the run before it saves: writes to it
     * fail with EPIPE instead, and guard_check_stdout reports that once. */
    signal(SIGPIPE, SIG_IGN);
}

void guard_install_signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int guard_signal(void) {
    return caught_signal;
}

void guard_check_stdout(trainer *t) {
    static bool warned;
    if (warned || !ferror(stdout)) return;
    warned = true;
    clearerr(stdout);
    char who[32] = "";
    if (t->world > 1) snprintf(who, sizeof who, "rank %d: ", t->rank);
    fprintf(stderr, "ringgrad-train: %swarning: standard output is closed; training goes on "
                    "without printing progress\n", who);
}

/* ---- non-finite values ---- */

/* Whether every element of a float32 tensor is finite. On the host, one read of the memory: an
 * element is NaN or Inf when its exponent bits are all ones, and an OR of integer tests
 * vectorises (a float sum would be one long dependency chain). On a GPU, sum(x * 0) is 0 for
 * finite x and NaN otherwise. */
static bool all_finite(rg_tensor *x) {
    if (x->device.type == RG_DEV_CPU) {
        const float *p = x->data;
        uint32_t bad = 0;
        for (int64_t i = 0; i < x->numel; i++) {
            uint32_t b;
            memcpy(&b, &p[i], sizeof b);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
        return !bad;
    }
    rg_no_grad_begin();
    float v = rg_tensor_item(rg_sum(rg_scale(x, 0.0f)));
    rg_no_grad_end();
    return v == 0.0f;
}

/* The first parameter, in the model's order, whose (reduced) gradient is not finite; NULL if none. */
static const char *first_bad_grad(trainer *t) {
    const rg_param_list *p = rg_model_params(t->net);
    for (int i = 0; i < p->n; i++) {
        rg_tensor *g = p->items[i].tensor->grad;
        if (g && g->dtype == RG_F32 && !all_finite(g)) return p->items[i].name;
    }
    return NULL;
}

/* "1, 3" from the ranks whose flags have `bit` set */
static void ranks_with(const float *flags, int world, int bit, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int r = 0; r < world && n < cap; r++)
        if ((int)flags[r] & bit) n += (size_t)snprintf(out + n, cap - n, "%s%d", n ? ", " : "", r);
}

static const char *who(const trainer *t, char *buf, size_t cap) {
    buf[0] = '\0';
    if (t->world > 1) snprintf(buf, cap, "rank %d: ", t->rank);
    return buf;
}

/* The verdict from every rank's flags (flags[r] for rank r; one entry alone). `bad` is this
 * rank's first non-finite gradient; `step` the step the flags belong to. */
static guard_verdict decide(trainer *t, const float *flags, const char *bad, int64_t step) {
    int any = 0, first = -1;
    for (int r = 0; r < t->world; r++) {
        any |= (int)flags[r];
        if (first < 0 && ((int)flags[r] & (FLAG_LOSS | FLAG_GRAD))) first = r;
    }
    if (any & FLAG_ERROR) {
        if (!t->local_error)
            trainer_error(t, "step %lld: another rank failed (see its message)", (long long)step);
        return GUARD_FAILED;
    }
    if (any & (FLAG_LOSS | FLAG_GRAD)) {
        if (t->rank == first) {
            char loss_ranks[256], grad_ranks[256], what[512];
            ranks_with(flags, t->world, FLAG_LOSS, loss_ranks, sizeof loss_ranks);
            ranks_with(flags, t->world, FLAG_GRAD, grad_ranks, sizeof grad_ranks);
            if (*loss_ranks && t->bad_loss)
                snprintf(what, sizeof what, "the loss is %s on rank%s %s",
                         isnan(t->bad_loss_value) ? "nan" : t->bad_loss_value > 0 ? "inf" : "-inf",
                         strchr(loss_ranks, ',') ? "s" : "", loss_ranks);
            else if (*loss_ranks)
                snprintf(what, sizeof what, "the loss is not finite on rank%s %s",
                         strchr(loss_ranks, ',') ? "s" : "", loss_ranks);
            else
                snprintf(what, sizeof what, "the gradients are not finite on rank%s %s",
                         strchr(grad_ranks, ',') ? "s" : "", grad_ranks);
            trainer_error(t,
                          "step %lld (epoch %lld): training diverged: %s; first non-finite "
                          "gradient: %s; stopping without an optimizer step%s%s%s (try a lower "
                          "--lr or --warmup-steps)",
                          (long long)step, (long long)t->epoch, what,
                          bad ? bad : "none on this rank", t->a.save ? "; the last checkpoint, " : "",
                          t->a.save ? t->a.save : "", t->a.save ? ", is kept as it was" : "");
        }
        t->diverged = true;
        return GUARD_DIVERGED;
    }
    if (any & FLAG_SIGNAL) {
        if (!t->stop_signal) {
            int sig = caught_signal ? caught_signal : SIGTERM;
            t->stop_signal = sig;
            char w[32];
            if (t->rank == 0 || caught_signal)
                fprintf(stderr, "ringgrad-train: %s%s: finishing step %lld%s, then exiting with "
                                "128+signal (a second signal exits at once)\n", who(t, w, sizeof w),
                        caught_signal ? strsignal(sig) : "another rank caught a signal",
                        (long long)t->step, t->a.save ? " and saving" : "");
        }
        return GUARD_STOP_AFTER_STEP;
    }
    return GUARD_GO;
}

/* Waits for the flags exchange started at the previous step (if any); its verdict. */
static guard_verdict collect(trainer *t) {
    if (!t->guard_req) return GUARD_GO;
    rg_status st = rg_comm_wait(t->guard_req);
    t->guard_req = NULL;
    if (st != RG_OK) {
        trainer_error(t, "step %lld: the per-step check with the other ranks failed: %s",
                      (long long)t->step, rg_last_error());
        return GUARD_FAILED;
    }
    return decide(t, t->guard_flags, NULL, t->step - 1);
}

/* With several ranks the flags travel in an allreduce started here and waited for at the next
 * step (or guard_finish), so the check adds no wait to the step: each rank's slot of a
 * world-long vector holds its flags and the sum hands every rank all of them. A non-finite
 * gradient needs no exchange at all: after the allreduce every rank holds the same gradients
 * and sees it at the same step (only --no-allreduce keeps them apart; then the flags tell). */
/* A micro-step's loss, noted until the flags go out. */
static void note_loss(trainer *t, float loss) {
    if (!isfinite(loss) && !t->bad_loss) t->bad_loss = true, t->bad_loss_value = loss;
}

/* This rank's flags besides its gradients': the noted loss, a signal, a failure. */
static int other_flags(const trainer *t) {
    return (t->bad_loss ? FLAG_LOSS : 0) | (caught_signal ? FLAG_SIGNAL : 0) |
           (t->local_error ? FLAG_ERROR : 0);
}

guard_verdict guard_step(trainer *t, float loss, bool sync) {
    note_loss(t, loss);
    if (!sync) return GUARD_GO;
    const char *bad = first_bad_grad(t);
    int mine = other_flags(t) | (bad ? FLAG_GRAD : 0);
    if (t->world == 1) {
        float f = (float)mine;
        guard_verdict v = decide(t, &f, bad, t->step);
        t->bad_loss = false;
        return v;
    }
    guard_verdict v = collect(t); /* the previous step's flags */
    /* the same gradients on every rank, except under zero1 (each rank reads its own before the
     * reduce-scatter) and the pipeline (each stage has its own parameters); one pipeline's loss
     * comes from its last stage to every stage, the same on every rank */
    bool same_grads = bad && !t->a.no_allreduce && !t->zero && !t->pipe;
    bool same_loss = t->bad_loss && t->pipe && t->dp_size == 1;
    if (v == GUARD_GO && (same_grads || same_loss)) {
        float *f = calloc((size_t)t->world, sizeof *f);
        if (!f) return trainer_error(t, "out of memory"), GUARD_FAILED;
        for (int r = 0; r < t->world; r++) /* what every rank has */
            f[r] = (float)((same_grads ? FLAG_GRAD : 0) | (same_loss ? FLAG_LOSS : 0));
        f[t->rank] =
            (float)((bad ? FLAG_GRAD : 0) | (t->bad_loss ? FLAG_LOSS : 0)); /* known here */
        v = decide(t, f, bad, t->step);
        free(f);
    }
    if (v != GUARD_GO) return v;
    if (!t->guard_flags && !(t->guard_flags = calloc((size_t)t->world, sizeof(float)))) {
        trainer_error(t, "out of memory");
        return GUARD_FAILED;
    }
    memset(t->guard_flags, 0, (size_t)t->world * sizeof(float));
    t->guard_flags[t->rank] = (float)mine;
    t->bad_loss = false;
    if (rg_comm_allreduce_async(t->comm, t->guard_flags, t->world, RG_COMM_F32, RG_REDUCE_SUM,
                                &t->guard_req) != RG_OK) {
        trainer_error(t, "step %lld: starting the per-step check failed: %s", (long long)t->step,
                      rg_last_error());
        return GUARD_FAILED;
    }
    return v;
}

guard_verdict guard_finish(trainer *t) {
    return collect(t);
}

int guard_ps_flags(trainer *t, float loss) {
    note_loss(t, loss);
    const char *bad = first_bad_grad(t);
    if (bad && !t->ps_bad) t->ps_bad = bad;
    int mine = other_flags(t) | (bad ? FLAG_GRAD : 0);
    t->ps_flags |= mine;
    return mine;
}

guard_verdict guard_ps_finish(trainer *t, guard_verdict v) {
    if (v == GUARD_FAILED) return v; /* a peer died: reported, and no collective can work */
    int mine = t->ps_flags | other_flags(t);
    if (!t->server && rg_ps_end(t->ps, mine) != RG_OK) {
        trainer_error(t, "ending the epoch with the parameter servers failed: %s", rg_last_error());
        return GUARD_FAILED;
    }
    float *f = calloc((size_t)t->world, sizeof *f);
    if (!f) return trainer_error(t, "out of memory"), GUARD_FAILED;
    f[t->rank] = (float)mine;
    if (rg_comm_allreduce(t->comm, f, t->world, RG_COMM_F32, RG_REDUCE_SUM) != RG_OK) {
        trainer_error(t, "step %lld: the check with the other ranks failed: %s", (long long)t->step,
                      rg_last_error());
        free(f);
        return GUARD_FAILED;
    }
    v = decide(t, f, t->ps_bad, t->step);
    free(f);
    t->ps_flags = 0, t->ps_bad = NULL, t->bad_loss = false;
    return v;
}

void guard_free(trainer *t) {
    if (t->guard_req) RG_IGNORE(rg_comm_wait(t->guard_req)); /* ending anyway; it was reported */
    t->guard_req = NULL;
    free(t->guard_flags);
    t->guard_flags = NULL;
}

/* ---- output paths ---- */

/* Creates and removes a probe file next to `path`, so that a missing or read-only folder fails
 * now and not after an epoch of training. */
rg_status guard_probe_output(const char *flag, const char *path) {
    size_t len = strlen(path);
    if (len >= 4096)
        return rg_error(RG_EINVAL, "--%s: the path is %zu characters long; the limit is 4095 "
                        "(PATH_MAX)", flag, len);
    struct stat sb;
    bool ends_in_slash = len && path[len - 1] == '/';
    if (ends_in_slash || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return rg_error(RG_EINVAL, "--%s %s: is a folder; give a file name in it (%s%s%s)", flag,
                        path, path, ends_in_slash ? "" : "/",
                        strcmp(flag, "timeline") == 0 ? "timeline.json" : "model.safetensors");
    /* The file is written next to the path and renamed over it: a symbolic link would be
     * replaced rather than written through, and a device or a FIFO replaced by a file (as root,
     * --save /dev/null made /dev/null a regular file) or, for the timeline, block on open. */
    char target[4096];
    const char *what = rg_path_not_regular(path, target, sizeof target);
    if (what)
        return rg_error(RG_EINVAL,
                        "--%s %s: is %s%s%s; it would be replaced by a regular file: "
                        "give the path of a regular file (or a new one)",
                        flag, path, what, target[0] ? " to " : "", target);
    const char *slash = strrchr(path, '/');
    char probe[4200];
    if (slash)
        snprintf(probe, sizeof probe, "%.*s/.rg-probe-%d", (int)(slash - path), path, (int)getpid());
    else
        snprintf(probe, sizeof probe, ".rg-probe-%d", (int)getpid());
    if (slash == path) snprintf(probe, sizeof probe, "/.rg-probe-%d", (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        int e = errno;
        return rg_error(e == ENOENT ? RG_ENOENT : RG_EIO, "--%s %s: cannot write there: %s (%s)",
                        flag, path, strerror(e),
                        e == ENOENT ? "the folder does not exist" : "checked at start-up");
    }
    close(fd);
    unlink(probe);
    return RG_OK;
}

rg_status guard_check_outputs(trainer *t) {
    rg_status st = RG_OK;
    if (t->rank == 0 && t->a.save) st = guard_probe_output("save", t->a.save);
    if (st == RG_OK && t->rank == 0 && t->a.timeline)
        st = guard_probe_output("timeline", t->a.timeline);
    if (st != RG_OK) trainer_error(t, "%s", rg_last_error());
    return trainer_agree(t, st);
}

/* ---- values the ranks must share, known only after start-up ---- */

rg_status guard_agree_i64(trainer *t, const char *what, int64_t mine) {
    if (t->world == 1) return RG_OK;
    int64_t *all = malloc((size_t)t->world * sizeof *all);
    rg_status st = all ? rg_comm_allgather(t->comm, &mine, all, 1, RG_COMM_I64) : RG_ENOMEM;
    if (st != RG_OK) {
        trainer_error(t, "comparing %s across the ranks: %s", what,
                      all ? rg_last_error() : "out of memory");
        free(all);
        return st;
    }
    char msg[1024];
    size_t n = (size_t)snprintf(msg, sizeof msg, "%s differs between the ranks: %lld on rank 0",
                                what, (long long)all[0]);
    for (int r = 1, named = 0; r < t->world && named < 8; r++)
        if (all[r] != all[0] && n < sizeof msg) {
            n += (size_t)snprintf(msg + n, sizeof msg - n, ", %lld on rank %d", (long long)all[r], r);
            named++, st = RG_EMISMATCH;
        }
    if (st != RG_OK) trainer_error(t, "%s", msg);
    free(all);
    return st;
}

/* ---- periodic checkpoints ---- */

/* "run.safetensors", step 120 -> "run-step120.safetensors" (the extension kept when there is one) */
static void periodic_name(const char *save, int64_t step, char *out, size_t cap) {
    const char *dot = strrchr(save, '.'), *slash = strrchr(save, '/');
    if (!dot || (slash && dot < slash)) dot = save + strlen(save);
    snprintf(out, cap, "%.*s-step%lld%s", (int)(dot - save), save, (long long)step, dot);
}

rg_status guard_save_periodic(trainer *t, int64_t epoch) {
    if (!t->a.save_every || t->step % t->a.save_every != 0) return RG_OK;
    /* zero1, pipeline: every rank sends its shard or stage */
    if (t->rank != 0 && !t->zero && !t->pipe) return RG_OK;
    char path[4200], old[4200];
    periodic_name(t->a.save, t->step, path, sizeof path);
    const char *keep = t->a.save;
    t->a.save = path; /* trainer_save writes t->a.save */
    t->saving_periodic = true;
    rg_status st = trainer_save(t, epoch);
    t->saving_periodic = false, t->a.save = keep;
    int64_t gone = t->step - (int64_t)t->a.keep * t->a.save_every;
    if (st == RG_OK && gone > 0 && t->rank == 0) {
        periodic_name(t->a.save, gone, old, sizeof old);
        if (unlink(old) != 0 && errno != ENOENT)
            fprintf(stderr, "ringgrad-train: warning: cannot remove %s: %s\n", old, strerror(errno));
    }
    return st;
}

/* ---- JSON ---- */

void guard_json_number(FILE *out, const char *key, double x, const char *fmt) {
    fprintf(out, "\"%s\":", key);
    if (isfinite(x))
        fprintf(out, fmt, x);
    else
        fputs("null", out);
    fputc(',', out);
}

void guard_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}
