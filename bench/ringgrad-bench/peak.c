/* peak.c — the machine's floating-point peak, per instruction set and thread count: a loop of
 * fused multiply-adds on enough independent accumulators to fill every FMA pipe (Zen 4 and
 * Intel cores: 2 pipes with a 4-cycle latency, so at least 8 chains in flight), nothing loaded or
 * stored. The CNN step (cnn.c) is reported as a fraction of it. Each thread times itself on its
 * own CPU clock, so the figure is the cores' capability even while other work shares them.
 *
 * Each loop is compiled for its set with a target attribute, so the bench itself stays x86-64
 * baseline like the library; a set runs only where rg_cpu_isa_supported says this CPU has it.
 * The generic loop (SSE2) has no fused multiply-add: a multiply and an add, counted as 2 FLOP. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "ringgrad.h"

/* Read at run time, so that the compiler cannot fold any chain of the loop. */
static volatile float peak_seed[3] = {0.9999999f, 1e-7f, 1.0f};

/* acc[i] = acc[i] * a + b on nacc vectors of vl floats, iters times; returns a sum so that the
 * work cannot be dropped. 2 * nacc * vl FLOP per iteration. */
#define PEAK_LOOP(name, attr, VL, NACC)                                                            \
    attr __attribute__((noinline)) static float name(int64_t iters) {                              \
        typedef float vec __attribute__((vector_size(VL * sizeof(float))));                        \
        vec acc[NACC], a, b;                                                                       \
        for (int v = 0; v < VL; v++) a[v] = peak_seed[0], b[v] = peak_seed[1];                     \
        for (int i = 0; i < NACC; i++)                                                             \
            for (int v = 0; v < VL; v++) acc[i][v] = peak_seed[2] + (float)(i * VL + v);           \
        for (int64_t it = 0; it < iters; it++) {                                                   \
            _Pragma("GCC unroll 32") for (int i = 0; i < NACC; i++) acc[i] = acc[i] * a + b;       \
        }                                                                                          \
        vec s = acc[0];                                                                            \
        for (int i = 1; i < NACC; i++) s += acc[i];                                                \
        float r = 0;                                                                               \
        for (int v = 0; v < VL; v++) r += s[v];                                                    \
        return r;                                                                                  \
    }

#if defined(__x86_64__) && defined(__GNUC__)
PEAK_LOOP(peak_generic, , 4, 12)
PEAK_LOOP(peak_avx2, __attribute__((target("avx2,fma"))), 8, 12)
PEAK_LOOP(peak_avx512, __attribute__((target("avx512f,fma"))), 16, 24)
#else
PEAK_LOOP(peak_generic, , 4, 12)
#endif

typedef struct {
    const char *isa;
    float (*loop)(int64_t);
    int flop_per_iter;
} peak_kind;

static const peak_kind kinds[] = {
    {"generic", peak_generic, 2 * 4 * 12},
#if defined(__x86_64__) && defined(__GNUC__)
    {"avx2", peak_avx2, 2 * 8 * 12},
    {"avx512", peak_avx512, 2 * 16 * 24},
#endif
};

static volatile float sink;

static double thread_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run on nt threads: GFLOP/s, the sum of each thread's rate over its own CPU time. What the
 * cores can do, then, even on a machine whose other users take part of their time. */
static double peak_once(const peak_kind *k, int nt, int64_t iters) {
    double rate = 0;
#pragma omp parallel num_threads(nt) reduction(+ : rate)
    {
        double t0 = thread_cpu_seconds();
        float r = k->loop(iters);
        if (r == 12345.0f) sink = r;
        rate += (double)iters * k->flop_per_iter / (thread_cpu_seconds() - t0) * 1e-9;
    }
    return rate;
}

double rgb_peak_gflops(const char *isa, int nt, int64_t iters) {
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(kinds[i].isa, isa)) return peak_once(&kinds[i], nt, iters);
    /* "native": the best loop this CPU runs */
    for (size_t i = sizeof kinds / sizeof *kinds; i-- > 0;)
        if (rg_cpu_isa_supported(kinds[i].isa) || !strcmp(kinds[i].isa, "generic"))
            return peak_once(&kinds[i], nt, iters);
    return 0;
}

void rgb_run_peak(const rgb_opts *o) {
    printf("\nFMA peak (register-only loop), GFLOP/s, median of %d; kernels in use: %s\n", o->iters,
           rg_cpu_isa());
    printf("%-8s %-8s %12s\n", "isa", "threads", "GFLOP/s");
    double *g = calloc((size_t)o->iters, sizeof *g);
    RG_CHECK(g, "peak: out of memory");
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        if (strcmp(kinds[i].isa, "generic") && !rg_cpu_isa_supported(kinds[i].isa)) continue;
        for (int ti = 0; ti < o->nthreads; ti++) {
            int nt = o->threads[ti];
            peak_once(&kinds[i], nt, 1000000); /* wake the threads and the clocks */
            for (int it = 0; it < o->iters; it++) g[it] = peak_once(&kinds[i], nt, 20000000);
            double m = rgb_median(g, o->iters);
            printf("%-8s %-8d %12.1f%s\n", kinds[i].isa, nt, m,
                   nt > omp_get_num_procs() ? "  (more threads than CPUs: each thread's rate "
                                              "over its own CPU time, summed, overstates the "
                                              "machine)"
                                            : "");
            if (o->raw) printf("raw peak isa=%s threads=%d gflops=%.2f\n", kinds[i].isa, nt, m);
        }
    }
    free(g);
}
