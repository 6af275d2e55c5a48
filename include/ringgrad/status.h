/* status.h — the two tiers of errors.
 *
 * Tier 1, rg_status: things a correct program can still meet at run time (a missing or corrupt
 * file, out of memory, a dead peer). Functions return a status; rg_last_error() gives the message
 * that names what failed and where. The caller decides what to do.
 *
 * Tier 2, RG_CHECK: API misuse (shape or device mismatch, a NULL where a tensor is required). The
 * program is wrong, so it stops with a message naming the op, the shapes and file:line. Under MPI
 * the dist module installs a fatal handler that calls MPI_Abort, so no rank is left hanging.
 *
 * Running out of host memory, one policy, decided by what the size depends on:
 *  - Sizes that come from the user or the data (tensor storage, datasets, loader slots,
 *    checkpoints, DDP buckets, optimizer state, comm scratch) are tier 1: the function returns
 *    RG_ENOMEM, or NULL with rg_last_error(), and the message names the bytes and their purpose.
 *  - Bookkeeping (names, small structs, list and tape growth) and the per-call scratch of ops and
 *    kernels, which return no status, go through core/alloc.h (rg_xmalloc and friends) and stop
 *    the process as tier 2, with the same kind of message; under MPI every rank stops. With
 *    Linux's overcommit these fail only when the process is already lost; PyTorch raises and ggml
 *    aborts in the same places. So do an op's output tensor and a layer's weights, which the CPU
 *    allocator refuses when the host cannot give them (tensor/cpu/alloc.c). All of these stop
 *    through rg_fatal_oom, so that a fatal handler can tell them from a failed check.
 *  No other malloc in the library goes unchecked.
 *
 * Library code never calls exit(). Status codes come from one X-macro, as in libuv. */
#ifndef RG_STATUS_H
#define RG_STATUS_H

#include "ringgrad/export.h"

#include <stdbool.h>

#ifdef __cplusplus
#define RG_NORETURN [[noreturn]]
extern "C" {
#else
#define RG_NORETURN _Noreturn
#endif

#define RG_STATUS_MAP(X)                                                                           \
    X(OK, "ok")                                                                                    \
    X(EINVAL, "invalid argument")                                                                  \
    X(ENOENT, "no such file or directory")                                                         \
    X(EIO, "input/output error")                                                                   \
    X(ECORRUPT, "corrupt or truncated data")                                                       \
    X(EMISMATCH, "does not match the model")                                                       \
    X(ENOMEM, "out of memory")                                                                     \
    X(EPEER, "a peer rank failed")                                                                 \
    X(ETIMEDOUT, "timed out")                                                                      \
    X(EDEVICE, "device error")                                                                     \
    X(ENOTSUP, "not supported in this build")

typedef enum {
#define RG_STATUS_ENUM(name, msg) RG_##name,
    RG_STATUS_MAP(RG_STATUS_ENUM)
#undef RG_STATUS_ENUM
        RG_STATUS_COUNT
} rg_status;

/* Name of a status ("RG_ECORRUPT") and its one-line meaning. Static strings. */
RG_API const char *rg_status_name(rg_status s);
RG_API const char *rg_status_str(rg_status s);

/* The message of the last failure on this thread: "<what>: <detail>". Never NULL; "" if none.
 * Owned by the library, valid until the next failure on this thread. */
RG_API const char *rg_last_error(void);

/* The status of that failure (RG_OK if none): what a constructor that returns NULL failed with,
 * e.g. rg_ddp_new's RG_EMISMATCH, RG_ENOMEM or RG_EPEER, like errno for a NULL from fopen. */
RG_API rg_status rg_last_status(void);

/* Records a message for rg_last_error() and returns s, so that library code can write
 *   return rg_error(RG_ECORRUPT, "%s: header length %llu exceeds file size", path, n); */
RG_API rg_status rg_error(rg_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Tier 2. Prints "ringgrad: <op>: <message> (file:line)" to stderr, then calls the fatal handler
 * (abort() unless one was installed). Does not return. */
RG_API RG_NORETURN void rg_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for running out of memory where no error can be returned (an op's output tensor):
 * a handler sees rg_fatal_status() == RG_ENOMEM, so that a program may exit with a status of its
 * own (ringgrad-train exits 1, as for any error it reports) instead of a signal. */
RG_API RG_NORETURN void rg_fatal_oom(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for a wait that cannot be given up on (a blocking MPI collective that a stopped rank
 * never finishes: dist's watchdog): a handler sees rg_fatal_status() == RG_ETIMEDOUT. */
RG_API RG_NORETURN void rg_fatal_timeout(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The function rg_fatal calls after printing; NULL restores abort(). If it returns, abort()
 * follows. */
typedef void (*rg_fatal_handler)(void);
RG_API void rg_set_fatal_handler(rg_fatal_handler h);
/* The handler installed now (NULL: abort), so that a program's own can run and then call it
 * (rg_dist_init installs one that ends every rank of an MPI job). */
RG_API rg_fatal_handler rg_get_fatal_handler(void);
/* Inside a fatal handler: RG_ENOMEM when rg_fatal_oom called it, RG_ETIMEDOUT when
 * rg_fatal_timeout did, RG_EINVAL for a failed check
 * (rg_fatal, RG_CHECK); RG_OK when no fatal error is in progress. rg_last_error() on the failing
 * thread (the handler's) is the message printed. */
RG_API rg_status rg_fatal_status(void);

#define RG_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (__builtin_expect(!(cond), 0)) rg_fatal(__FILE__, __LINE__, __VA_ARGS__);               \
    } while (0)

/* RG_CHECK for memory a constructor could not get (a layer's weights): stops through
 * rg_fatal_oom, so that the handler sees RG_ENOMEM. */
#define RG_CHECK_ALLOC(ptr, ...)                                                                   \
    do {                                                                                           \
        if (__builtin_expect(!(ptr), 0)) rg_fatal_oom(__FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)

/* Propagates a failing status to the caller. */
#define RG_TRY(expr)                                                                               \
    do {                                                                                           \
        rg_status rg_try_s_ = (expr);                                                              \
        if (rg_try_s_ != RG_OK) return rg_try_s_;                                                  \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
