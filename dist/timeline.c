/* timeline.c — the distributed side of the timeline: a start that lines up every rank's clock, and
 * a writer that gathers every rank's events (core/trace.c formats them) to rank 0, which writes
 * one Chrome-trace JSON file.
 *
 * The file is the Trace Event Format (the JSON that chrome://tracing and Perfetto open): an array
 * of events; pid = rank and tid = thread, so each rank is a group of rows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/timeline.h"

#define TAG_TIMELINE (RG_COMM_TAG_MAX - 1)

rg_status rg_timeline_start(rg_comm *c) {
    if (c) RG_TRY(rg_comm_barrier(c));
    rg_trace_start();
    return RG_OK;
}

/* ---- gathering to rank 0 and writing ---- */

/* Writes one rank's events, with a separator unless it is the first non-empty one. */
static void emit(FILE *f, bool *first, const char *p, int64_t len) {
    if (!f || len == 0) return;
    if (!*first) fputs(",\n", f);
    fwrite(p, 1, (size_t)len, f);
    *first = false;
}

/* Rank 0: receives each rank's text in rank order and writes it (or drops it if f is NULL). */
RG_NODISCARD
static rg_status gather_to(FILE *f, rg_comm *c, const char *mine, const int64_t *lens) {
    bool first = true;
    emit(f, &first, mine, lens[0]);
    for (int r = 1; r < rg_comm_size(c); r++) {
        char *buf = malloc(lens[r] ? (size_t)lens[r] : 1);
        if (!buf) return rg_error(RG_ENOMEM, "rg_timeline_write: out of memory");
        rg_status s = rg_comm_recv(c, buf, lens[r], RG_COMM_U8, r, TAG_TIMELINE);
        if (s == RG_OK) emit(f, &first, buf, lens[r]);
        free(buf);
        RG_TRY(s);
    }
    return RG_OK;
}

RG_NODISCARD
static rg_status write_root(rg_comm *c, const char *path, const char *mine, const int64_t *lens) {
    FILE *f = fopen(path, "w");
    int open_errno = errno;
    if (f) fputs("{\"traceEvents\":[\n", f);
    rg_status s = gather_to(f, c, mine, lens); /* even without a file, so no rank waits */
    if (!f)
        return s != RG_OK ? s
                          : rg_error(RG_EIO, "rg_timeline_write: cannot open %s: %s", path,
                                     strerror(open_errno));
    fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"ranks\":%d}}\n", rg_comm_size(c));
    if (fclose(f) != 0 && s == RG_OK) s = rg_error(RG_EIO, "rg_timeline_write: writing %s", path);
    return s;
}

rg_status rg_timeline_write(rg_comm *c, const char *path) {
    RG_CHECK(c && path, "rg_timeline_write: NULL argument");
    int rank = rg_comm_rank(c);
    size_t mine_len;
    char *mine = rg_trace_format(rank, &mine_len);
    int64_t len = (int64_t)mine_len, *lens = calloc(rg_comm_size(c), sizeof *lens);
    rg_status s = lens ? rg_comm_allgather(c, &len, lens, 1, RG_COMM_I64)
                       : rg_error(RG_ENOMEM, "rg_timeline_write: out of memory");
    if (s == RG_OK && rank != 0) s = rg_comm_send(c, mine, len, RG_COMM_U8, 0, TAG_TIMELINE);
    if (s == RG_OK && rank == 0) s = write_root(c, path, mine, lens);
    if (s == RG_OK && !mine) s = rg_error(RG_ENOMEM, "rg_timeline_write: out of memory");
    free(mine);
    free(lens);
    /* Every rank returns rank 0's verdict. */
    int32_t verdict = (int32_t)s;
    RG_TRY(rg_comm_broadcast(c, &verdict, 1, RG_COMM_I32, 0));
    if (s == RG_OK && verdict != RG_OK)
        s = rg_error((rg_status)verdict, "rg_timeline_write: rank 0 could not write %s", path);
    return s;
}
