/* bucket_plan.h — how the gradients are cut into buckets, for DDP (ddp.c) and ZeRO-1 (zero1.c).
 *
 * Walk the gradients in the order backward makes them final (reverse registration order) and
 * ask for each one's bucket. The first bucket closes once it holds at least first_mb MiB, the
 * others once they hold mb MiB (PyTorch DDP's rule: a small first bucket so that communication
 * starts early in backward). A gradient is never pushed into the next bucket for overflowing the
 * cap: in the CNN that would put fc1.weight (4.5 MiB, final early in backward) beside the conv
 * weights (final at its end) and leave nothing to overlap. So a bucket exceeds its cap by at most
 * its last gradient. `one` puts everything in one bucket (--no-overlap). */
#ifndef RG_DIST_BUCKET_PLAN_H
#define RG_DIST_BUCKET_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ringgrad/status.h"

/* The sizes' defaults, for rg_ddp_opts and rg_zero1_opts alike: 25 MiB, and a first bucket of
 * 1 MiB (or mb when smaller); a value <= 0 asks for the default. */
static inline void rg_bucket_plan_defaults(double *mb, double *first_mb) {
    /* a negative or NaN size used to become the default without a word */
    RG_CHECK(*mb >= 0 && *first_mb >= 0 && *mb <= 1e6 && *first_mb <= 1e6,
             "bucket_mb %g, first_bucket_mb %g: sizes in MiB, above 0 (or 0 for the defaults)", *mb,
             *first_mb);
    if (*mb <= 0) *mb = 25;
    if (*first_mb <= 0) *first_mb = *mb < 1 ? *mb : 1;
}

typedef struct {
    double first_mb, mb;
    bool one;
    int n_buckets;     /* so far */
    int64_t used, cap; /* bytes of the open bucket, and its cap */
} rg_bucket_plan;

/* The bucket of the next gradient (numel float32 elements); *offset = its first element within
 * that bucket. */
static inline int rg_bucket_plan_next(rg_bucket_plan *p, int64_t numel, int64_t *offset) {
    if (p->n_buckets == 0 || p->used >= p->cap) {
        p->cap =
            p->one ? INT64_MAX : (int64_t)((p->n_buckets == 0 ? p->first_mb : p->mb) * 1048576.0);
        p->used = 0;
        p->n_buckets++;
    }
    *offset = p->used / (int64_t)sizeof(float);
    p->used += numel * (int64_t)sizeof(float);
    return p->n_buckets - 1;
}

#endif
