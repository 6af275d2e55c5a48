/* progress.h — Keras-style progress on rank 0's terminal:
 *
 *   Epoch 1/2
 *   469/469 [==============================] - 24s 51ms/step - loss: 0.4712 - accuracy: 0.8301 - 2490 img/s - test_accuracy: 0.8702
 *
 * On a terminal the bar redraws in place (at most ten times a second); into a file or pipe only
 * the finished line of each epoch is written. */
#ifndef RG_TRAIN_PROGRESS_H
#define RG_TRAIN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *out;
    bool tty, enabled;
    int epoch, epochs;
    int64_t steps;      /* in this epoch */
    double t_epoch, t_last_draw;
} progress;

/* enabled false (ranks other than 0) makes every call a no-op. */
void progress_init(progress *p, FILE *out, bool enabled);
void progress_begin_epoch(progress *p, int epoch, int epochs, int64_t steps);
/* step counts from 1; loss and accuracy are running means over the epoch so far. */
void progress_update(progress *p, int64_t step, double loss, double accuracy, double img_per_s);
/* train_seconds: the epoch's time in training steps (evaluation excluded);
 * test_accuracy < 0: no evaluation this epoch. */
void progress_end_epoch(progress *p, int64_t step, double loss, double accuracy, double img_per_s,
                        double train_seconds, double test_accuracy);

/* Monotonic wall clock in seconds. */
double progress_now(void);

#endif
