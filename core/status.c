/* status.c — error messages per thread, and the fatal path for API misuse. */
#include "ringgrad/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const status_names[] = {
#define RG_STATUS_NAME(name, msg) "RG_" #name,
    RG_STATUS_MAP(RG_STATUS_NAME)
#undef RG_STATUS_NAME
};
static const char *const status_msgs[] = {
#define RG_STATUS_MSG(name, msg) msg,
    RG_STATUS_MAP(RG_STATUS_MSG)
#undef RG_STATUS_MSG
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == RG_STATUS_COUNT, "status names");
_Static_assert(sizeof(status_msgs) / sizeof(status_msgs[0]) == RG_STATUS_COUNT, "status messages");

static _Thread_local char last_error[1024];
static _Thread_local rg_status last_status;
/* Installed once at start-up by the dist module, before any thread starts; read-only after. */
static rg_fatal_handler fatal_handler;

const char *rg_status_name(rg_status s) {
    return (unsigned)s < RG_STATUS_COUNT ? status_names[s] : "RG_<unknown>";
}

const char *rg_status_str(rg_status s) {
    return (unsigned)s < RG_STATUS_COUNT ? status_msgs[s] : "unknown status";
}

const char *rg_last_error(void) { return last_error; }

rg_status rg_last_status(void) { return last_status; }
/* Formats into out (cap bytes). A message longer than that keeps its beginning and its end (where
 * the reason usually is: "...: No such file or directory") and says how much of the middle went,
 * instead of being cut at cap with no sign (a 5,000-character path used to hide the reason). */
static void format_fitted(char *out, size_t cap, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(out, cap, fmt, ap);
    if (n >= 0 && (size_t)n >= cap) {
        char *full = malloc((size_t)n + 1);
        if (full) {
            vsnprintf(full, (size_t)n + 1, fmt, again);
            size_t tail = cap / 3, head = cap - tail - 48;
            snprintf(out, cap, "%.*s [... %zu characters cut ...] %s", (int)head, full,
                     (size_t)n - head - tail, full + (size_t)n - tail);
            free(full);
        }
    }
    va_end(again);
}

rg_status rg_error(rg_status s, const char *fmt, ...) {
    last_status = s;
    va_list ap;
    va_start(ap, fmt);
    format_fitted(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void rg_set_fatal_handler(rg_fatal_handler h) { fatal_handler = h; }

rg_fatal_handler rg_get_fatal_handler(void) {
    return fatal_handler;
}

/* Written once, by the thread that fails, just before the handler runs. */
static _Atomic rg_status fatal_status;

rg_status rg_fatal_status(void) {
    return fatal_status;
}

RG_NORETURN static void fatal_v(rg_status s, const char *file, int line, const char *fmt,
                                va_list ap) {
    char msg[1024];
    format_fitted(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "ringgrad: %s (%s:%d)\n", msg, file, line);
    fflush(stderr);
    last_status = s; /* for the handler, on this thread: rg_last_error() is the message */
    snprintf(last_error, sizeof last_error, "%s", msg);
    fatal_status = s;
    if (fatal_handler) fatal_handler();
    abort();
}

RG_NORETURN void rg_fatal(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_v(RG_EINVAL, file, line, fmt, ap);
}

RG_NORETURN void rg_fatal_oom(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_v(RG_ENOMEM, file, line, fmt, ap);
}

RG_NORETURN void rg_fatal_timeout(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_v(RG_ETIMEDOUT, file, line, fmt, ap);
}
