/* timeline.h — a trace of what every thread of every rank did, for Perfetto or chrome://tracing.
 *
 * Events are recorded into per-thread buffers (no lock, and no allocation per event once a
 * thread's first block exists), from any module: the training loop marks forward, backward and
 * the optimizer step; the comm thread marks each collective by itself, with the time it sat in the
 * queue, the time it waited for the other ranks, and the time it ran. At the end
 * rg_timeline_write gathers every rank's events to rank 0, which writes one Chrome-trace JSON
 * file: one row per rank ("rank N") and per thread ("main", "comm").
 *
 * The recorder is process-wide on purpose: events come from every module, and threading a handle
 * through all of them would cost more clarity than the one global it saves. When recording is
 * off, each call is one relaxed atomic load. */
#ifndef RG_TIMELINE_H
#define RG_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "dist/comm.h"
#include "tensor/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_TIMELINE_MAX_ARGS 2

/* A named integer shown in the event's details ("bytes": 4194304). name is a static string. */
typedef struct {
    const char *name;
    int64_t value;
} rg_timeline_arg;

/* Starts recording on every thread, with time 0 = now. With a communicator it is collective: a
 * barrier first, so that every rank's time 0 is the same moment and the rows line up. c may be
 * NULL (one process, or clocks aligned some other way). Returns the barrier's status. */
rg_status rg_timeline_start(rg_comm *c);
/* Stops recording; what was recorded stays until rg_timeline_write or rg_timeline_reset. */
void rg_timeline_stop(void);
bool rg_timeline_enabled(void);

/* Nanoseconds on a monotonic clock, for rg_timeline_complete/async. */
int64_t rg_timeline_now(void);

/* Names the calling thread's row ("main", "loader"). Copied; up to 31 characters. */
void rg_timeline_name_thread(const char *name);

/* An event on this thread from begin to the matching end; pairs nest. name is copied (up to 47
 * characters); cat must be a static string ("compute", "comm"). */
void rg_timeline_begin(const char *name, const char *cat);
void rg_timeline_end(void);

/* An event on this thread with explicit times (rg_timeline_now) and up to RG_TIMELINE_MAX_ARGS
 * args (args may be NULL when nargs is 0). Events on one thread must nest, as begin/end do. */
void rg_timeline_complete(const char *name, const char *cat, int64_t t0, int64_t t1, int nargs,
                          const rg_timeline_arg *args);
/* An interval that may overlap others on the same thread (a request waiting in a queue): shown
 * on its own track, matched by id. */
void rg_timeline_async(const char *name, const char *cat, uint64_t id, int64_t t0, int64_t t1,
                       int nargs, const rg_timeline_arg *args);

/* Collective over c: rank 0 writes every rank's events to path as one JSON file; every rank
 * returns rank 0's status (RG_EIO naming the path if it cannot write). Recording goes on; call
 * rg_timeline_stop first for a trace that ends here. */
rg_status rg_timeline_write(rg_comm *c, const char *path);
/* Drops every recorded event and frees the buffers of threads that have ended. Not while other
 * threads record. */
void rg_timeline_reset(void);

#ifdef __cplusplus
}
#endif

#endif
