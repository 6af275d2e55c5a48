/* bench.h — what the parts of ringgrad-bench share: options, a clock, medians and random buffers.
 *
 * Every comparison in the bench is measured in one run, with the compared calls interleaved
 * (A, B, A, B, ...) and summarised by medians, because the machine is shared and noisy: a
 * ratio taken this way survives load that would ruin an absolute number. */
#ifndef RGB_BENCH_H
#define RGB_BENCH_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define RGB_MAX_THREAD_COUNTS 2

typedef struct {
    int threads[RGB_MAX_THREAD_COUNTS]; /* thread counts to measure, in order */
    int nthreads;                       /* how many of them */
    int iters;                          /* timed repetitions per measurement (median) */
    int batch;                          /* batch of the ResNet-18 conv shapes */
    bool raw;                           /* also print one machine-readable line per result */
    const char *layer;                  /* conv: only this layer and those under it (or NULL) */
    int pass;                           /* conv: only this pass (rgb_parse_pass), or -1 for all */
    bool step_only;                     /* cnn: time the step alone (no floor, no peak): for perf */
    bool ops;                           /* cnn, resnet: the step's wall time per op (optable.c) */
    const char *model;                  /* resnet: the model (default resnet18) */
    int image_size;                     /* resnet: SxS images (default 64) */
    bool batch_given;                   /* --batch was given (resnet's default is 32) */
} rgb_opts;

/* Seconds on the clock the bench times with: wall time, or, with --clock cpu, the CPU time of
 * the calling thread, which a shared machine's time slicing does not inflate (nor idle library
 * threads spinning elsewhere). Meaningful at one thread only: other threads' work is not seen. */
extern bool rgb_cpu_clock;
double rgb_now(void);
/* Wall-clock seconds, whatever --clock says (for timings over several threads). */
double rgb_wall(void);
/* Median of v[0..n) (sorts v). */
double rgb_median(double *v, int n);
/* n floats uniform in [-1, 1) from stream `seed`, 64-byte aligned; free with rgb_free. */
float *rgb_random(int64_t n, uint64_t seed);
void rgb_free(void *p);
/* "OpenBLAS <core> kernels", and a note where it leaves AVX-512 unused (util.c) */
void rgb_print_blas_core(void);

/* The three modes (gemm.c, conv.c, cnn.c). */
void rgb_run_gemm(const rgb_opts *o);
void rgb_run_conv(const rgb_opts *o);
void rgb_run_cnn(const rgb_opts *o);
/* peak.c: the FMA peak per instruction set and thread count; membw.c: memory-bound kernels
 * against a copy of the same bytes. */
void rgb_run_peak(const rgb_opts *o);
void rgb_run_membw(const rgb_opts *o);
/* GFLOP/s of one run of the FMA loop of `isa` ("generic", "avx2", "avx512"; "native": the best
 * this CPU runs) on nt threads, iters iterations per thread. */
double rgb_peak_gflops(const char *isa, int nt, int64_t iters);
void rgb_run_resnet(const rgb_opts *o); /* resnet.c: only with --only resnet */

/* optable.c: a step's wall time per op at each thread count, from the trace recorder. The step
 * is marked as an event of category "step" named "step", its parts (forward, backward, the
 * optimizer) as "step part", and the library records each op's backward ("backward op") and each
 * layer's forward ("forward op"; a bench may mark its own forward ops so). */
#define RGB_MAX_OP_ROWS 48
typedef struct {
    char label[64];
    int depth;                        /* 0 the step, 1 its parts and forward ops, 2 backward's */
    double ms[RGB_MAX_THREAD_COUNTS]; /* summed over the traced steps, per thread count */
    int calls[RGB_MAX_THREAD_COUNTS]; /* events summed into it */
} rgb_op_row;
typedef struct {
    rgb_op_row rows[RGB_MAX_OP_ROWS];
    int n, steps[RGB_MAX_THREAD_COUNTS]; /* rows, and steps traced per thread count */
    bool by_name; /* one row per op name (a ResNet's 20 conv2d), not per occurrence in a step */
} rgb_op_table;
/* Starts recording (op-level events included); run the steps to trace, then rgb_ops_end, which
 * adds them to column col of t (rgb_ops_print divides by the steps). */
void rgb_ops_begin(void);
void rgb_ops_end(rgb_op_table *t, int col);
void rgb_ops_print(const rgb_op_table *t, const int *threads, int ncols);

/* conv.c: whether --layer SEL selects any conv layer; names gets every layer's name. */
bool rgb_conv_layer_known(const char *sel, char *names, size_t cap);
/* conv.c: "shape <name> N C H K R stride pad" for every conv layer (for bench/torch_conv.py);
 * the index of a pass name ("forward", "bwd-data", "bwd-filter"), or -2 if unknown. */
void rgb_print_conv_shapes(int batch);
int rgb_parse_pass(const char *name);

/* C = A B through the library's OpenBLAS path (rg_cpu_gemm_blas: cblas_sgemm, one slice of C per
 * thread), op(A) (m,k), op(B) (k,n), row-major; timed by the caller. */
void rgb_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
               float *c);

#endif
