/* progress.c — the Keras-style progress bar (see progress.h). */
#include "progress.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The bar redraws in place on a terminal; elsewhere only each epoch's finished line is written.
 * Under mpirun a rank's stdout is a pseudo-terminal even when mpirun's own output goes to a
 * file, so $RG_PROGRESS overrides the guess: "lines" (finished lines only) or "bar" (redraw).
 * scripts/rg-mpirun sets RG_PROGRESS=lines for the ranks when its stdout is not a terminal. */
void progress_init(progress *p, FILE *out, bool enabled) {
    static const char *const modes[] = {"lines", "bar"}; /* another value: a warning (env.h) */
    int mode = enabled ? rg_env_choice("RG_PROGRESS", modes, 2, -1) : -1;
    bool tty = mode >= 0 ? mode == 1 : isatty(fileno(out));
    *p = (progress){.out = out, .enabled = enabled, .tty = enabled && tty};
}

void progress_begin_epoch(progress *p, int epoch, int epochs, int64_t steps) {
    if (!p->enabled) return;
    p->epoch = epoch, p->epochs = epochs, p->steps = steps;
    p->t_epoch = progress_now();
    p->t_last_draw = 0;
    fprintf(p->out, "Epoch %d/%d\n", epoch + 1, epochs);
    fflush(p->out);
}

static void draw(progress *p, int64_t step, double loss, double acc, double ips, double elapsed,
                 double test_acc, bool done) {
    const int width = 30;
    int filled = p->steps > 0 ? (int)((double)width * (double)step / (double)p->steps) : width;
    if (filled > width) filled = width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled - 1 || (done && i < filled) ? '=' : (i == filled - 1 ? '>' : '.');
    bar[width] = '\0';
    int digits = snprintf(NULL, 0, "%lld", (long long)p->steps);
    fprintf(p->out, "%s%*lld/%lld [%s] - ", p->tty ? "\r" : "", digits, (long long)step,
            (long long)p->steps, bar);
    if (done)
        fprintf(p->out, "%.0fs %.0fms/step", elapsed, step ? 1e3 * elapsed / (double)step : 0.0);
    else
        fprintf(p->out, "ETA: %.0fs",
                step ? elapsed * (double)(p->steps - step) / (double)step : 0.0);
    if (step > 0 || !done)
        fprintf(p->out, " - loss: %.4f - accuracy: %.4f - %.0f img/s", loss, acc, ips);
    else /* --max-steps 0, say: no loss to show, rather than a loss of 0.0000 */
        fprintf(p->out, " - no training steps");
    if (test_acc >= 0) fprintf(p->out, " - test_accuracy: %.4f", test_acc);
    if (done)
        fprintf(p->out, "\n");
    else if (p->tty)
        fprintf(p->out, "\033[K"); /* clear what a longer previous line left */
    fflush(p->out);
}

void progress_update(progress *p, int64_t step, double loss, double accuracy, double img_per_s) {
    if (!p->enabled || !p->tty) return;
    double now = progress_now();
    if (now - p->t_last_draw < 0.1 && step < p->steps) return;
    p->t_last_draw = now;
    draw(p, step, loss, accuracy, img_per_s, now - p->t_epoch, -1, false);
}

void progress_end_epoch(progress *p, int64_t step, double loss, double accuracy, double img_per_s,
                        double train_seconds, double test_accuracy) {
    if (!p->enabled) return;
    draw(p, step, loss, accuracy, img_per_s, train_seconds, test_accuracy, true);
}
