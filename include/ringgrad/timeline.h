/* timeline.h — the distributed timeline: every rank's trace (ringgrad/trace.h) in one file.
 *
 *   rg_timeline_start(comm);            every rank, at the same moment: time 0
 *   ... training; rg_trace_begin("forward", "compute") / rg_trace_end() mark what you want ...
 *   rg_trace_stop();
 *   rg_timeline_write(comm, "trace.json");   rank 0 writes the file; open it in Perfetto */
#ifndef RG_TIMELINE_H
#define RG_TIMELINE_H

#include "ringgrad/export.h"

#include "ringgrad/comm.h"
#include "ringgrad/status.h"
#include "ringgrad/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts recording on every thread, with time 0 = now. With a communicator it is collective: a
 * barrier first, so that every rank's time 0 is the same moment and the rows line up. c may be
 * NULL (one process, or clocks aligned some other way). Returns the barrier's status. */
RG_API RG_NODISCARD rg_status rg_timeline_start(rg_comm *c);

/* Collective over c: rank 0 writes every rank's events to path as one JSON file; every rank
 * returns rank 0's status (RG_EIO naming the path if it cannot write). Recording goes on; call
 * rg_trace_stop first for a trace that ends here. */
RG_API RG_NODISCARD rg_status rg_timeline_write(rg_comm *c, const char *path);
#ifdef __cplusplus
}
#endif

#endif
