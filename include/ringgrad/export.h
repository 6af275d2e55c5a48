/* export.h — the annotations that every public declaration carries.
 *
 *   RG_API        the function is part of the public API. The shared library is built with
 *                 -fvisibility=hidden, so it exports exactly the RG_API functions and nothing of
 *                 the internals (libuv's UV_EXTERN, ggml's GGML_API).
 *   RG_NODISCARD  on every function that returns rg_status: a status dropped on the floor is a
 *                 warning, an error under -Werror. To drop one on purpose, say so in the code:
 *                 RG_IGNORE(rg_comm_barrier(c)); (GCC does not let a (void) cast silence it.)
 *                 The one exception is the error recorders (rg_error and the printf-like helpers
 *                 built on it): they return the status they were given, so that a failure reads
 *                 `return rg_error(RG_EIO, "...")`, and calling one only to record a message is
 *                 their other use. */
#ifndef RG_EXPORT_H
#define RG_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define RG_API __attribute__((visibility("default")))
#define RG_NODISCARD __attribute__((warn_unused_result))
#else
#define RG_API
#define RG_NODISCARD
#endif

/* Evaluates a status-returning expression and drops the status, visibly. */
#define RG_IGNORE(expr)                                                                            \
    do {                                                                                           \
        int rg_ignored_ = (int)(expr);                                                             \
        (void)rg_ignored_;                                                                         \
    } while (0)

#endif
