/* trace.h — the trace recorder: what every thread did and when, for Perfetto or chrome://tracing.
 *
 * Events are recorded into per-thread buffers (no lock, and no allocation per event once a
 * thread's first block exists), from any module: the training loop marks forward, backward and
 * the optimizer step; the thread that runs a collective (the comm thread, or a thread waiting for
 * it) marks it, with the time it sat in the queue, the time it waited for the other ranks, and the
 * time it ran. rg_timeline_write
 * (ringgrad/timeline.h) gathers every rank's events into one Chrome-trace JSON file: one row per
 * rank ("rank N") and per thread ("main", "comm").
 *
 * The recorder is process-wide on purpose: events come from every module, and threading a handle
 * through all of them would cost more clarity than the one global it saves. When recording is
 * off, each call is one relaxed atomic load. It sits in core/ so that any layer may mark events. */
#ifndef RG_TRACE_H
#define RG_TRACE_H

#include "ringgrad/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringgrad/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RG_TRACE_MAX_ARGS 2

/* A named integer shown in the event's details ("bytes": 4194304). name is a static string. */
typedef struct {
    /* public */
    const char *name;
    int64_t value;
} rg_trace_arg;

/* Starts recording on every thread, with time 0 = now (rg_timeline_start in ringgrad/timeline.h
 * does it on every rank at the same moment). */
RG_API void rg_trace_start(void);
/* Stops recording; what was recorded stays until rg_timeline_write or rg_trace_reset. */
RG_API void rg_trace_stop(void);
RG_API bool rg_trace_enabled(void);

/* Op-level events, off by default: while recording, each autograd op's backward becomes an event
 * of category "backward op" named by its op ("conv2d", "linear", "relu", ...), and each layer's
 * forward one of category "forward op" named by its kind ("Conv2d", "BatchNorm2d"; a fused group
 * by its members, "Conv2d+ReLU", "BatchNorm2d+add+ReLU"), nested in the caller's own spans
 * (ringgrad-train's "forward" and "backward"): where a step's time goes, and when each gradient
 * became ready for the comm. A long run records one event per op per step, so a
 * thread's buffer (about a million events) fills after some thousand steps of a deep model; later
 * events are counted as dropped. On a GPU an event spans the host's launches of the op's kernels,
 * not the kernels themselves (they run later, on the device's stream). ringgrad-train's
 * --timeline-ops. */
RG_API void rg_trace_set_ops(bool on);
/* Whether op-level events are being recorded: recording is on and rg_trace_set_ops(true). */
RG_API bool rg_trace_ops_enabled(void);

/* Nanoseconds on a monotonic clock, for rg_trace_complete/async. */
RG_API int64_t rg_trace_now(void);

/* Names the calling thread's row ("main", "loader"). Copied; up to 31 characters. */
RG_API void rg_trace_name_thread(const char *name);

/* An event on this thread from begin to the matching end; pairs nest. name is copied (up to 47
 * characters); cat must be a static string ("compute", "comm"). */
RG_API void rg_trace_begin(const char *name, const char *cat);
RG_API void rg_trace_end(void);

/* An event on this thread with explicit times (rg_trace_now) and up to RG_TRACE_MAX_ARGS
 * args (args may be NULL when nargs is 0). Events on one thread must nest, as begin/end do. */
RG_API void rg_trace_complete(const char *name, const char *cat, int64_t t0, int64_t t1, int nargs,
                       const rg_trace_arg *args);
/* An interval that may overlap others on the same thread (a request waiting in a queue): shown
 * on its own track, matched by id. */
RG_API void rg_trace_async(const char *name, const char *cat, uint64_t id, int64_t t0, int64_t t1,
                    int nargs, const rg_trace_arg *args);

/* Drops every recorded event and frees the buffers of threads that have ended. Not while other
 * threads record. */
RG_API void rg_trace_reset(void);

/* This process's events as Chrome-trace JSON objects separated by ",\n" (no brackets), with pid
 * `pid`: a malloc'ed string of *len bytes (NUL-terminated) that the caller frees, or NULL when out
 * of memory. */
RG_API char *rg_trace_format(int pid, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
