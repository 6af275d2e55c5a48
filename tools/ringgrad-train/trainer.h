/* trainer.h — the state of one ringgrad-train run, shared by its files:
 *   ringgrad-train.c      main: set-up in order, the epochs, the summary, tear-down
 *   ringgrad-train/setup.c   data, model, optimizer, checkpoints, DDP, loaders
 *   ringgrad-train/args.c    flags;  ringgrad-train/progress.c  the Keras-style bar */
#ifndef RG_TRAINER_H
#define RG_TRAINER_H

#include "args.h"
#include "progress.h"
#include "ringgrad.h"

typedef struct {
    train_args a;
    rg_dist *dist;
    rg_comm *comm;
    int rank, world, threads;
    rg_device dev;
    rg_dataset *train_ds, *test_ds;
    rg_model *net;
    rg_optim *opt;
    rg_ddp *ddp;
    rg_loader *train, *test;
    progress prog;
    rg_bn_sync bn_sync; /* --sync-bn: the BatchNorm layers' hook into comm */

    int64_t step;         /* optimizer steps taken (across epochs, restored by --resume) */
    int64_t start_epoch;  /* first epoch to run (from --resume) */
    int64_t skip_batches; /* batches of start_epoch already trained before --resume */
    double train_seconds; /* time spent in training steps only */
    int64_t images;       /* images trained, all ranks */
    double last_loss, last_acc, test_acc;
    bool trained_any;
} trainer;

/* "ringgrad-train: error: <msg>" on stderr, naming the rank in a multi-rank job. */
void trainer_error(const trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Collective: the worst status over all ranks, so that every rank stops together when one cannot
 * go on (a missing file on one host). Each failing rank has already printed its message. */
RG_NODISCARD rg_status trainer_agree(trainer *t, rg_status mine);

/* Set-up steps (setup.c); each returns RG_OK or prints its error and returns the status. */
RG_NODISCARD rg_status trainer_setup_data(trainer *t);
RG_NODISCARD rg_status trainer_setup_model(trainer *t);
RG_NODISCARD rg_status trainer_setup_loaders(trainer *t);
/* Rank 0 writes a checkpoint of the current state (others return RG_OK). */
RG_NODISCARD rg_status trainer_save(trainer *t, int64_t epoch);

#endif
