/* isa.c — which copy of the hot CPU kernels runs: chosen once, at the first use of the CPU table.
 *
 * The default build is portable (the x86-64 baseline) and carries the hot kernels three times
 * (isa_impl.h): the best set this CPU supports wins, as in OpenBLAS's DYNAMIC_ARCH. RG_ISA=avx512,
 * avx2 or generic forces one, for tests and benchmarks; a value this CPU (or this build) cannot
 * run is an error, never a silent fallback, so a test that asked for a path runs that path. */
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad/device.h"
#include "tensor/cpu/cpu.h"

#define DECLARE_TABLE(isa) extern const rg_backend rg_cpu_table_##isa;
#ifdef RG_ISA_HAVE_GENERIC
DECLARE_TABLE(generic)
#endif
#ifdef RG_ISA_HAVE_AVX2
DECLARE_TABLE(avx2)
#endif
#ifdef RG_ISA_HAVE_AVX512
DECLARE_TABLE(avx512)
#endif
#ifdef RG_ISA_HAVE_NATIVE
DECLARE_TABLE(native)
#endif

static const char *const isa_names[RG_ISA_COUNT] = {"generic", "avx2", "avx512", "native"};
_Static_assert(sizeof isa_names / sizeof *isa_names == RG_ISA_COUNT, "one name per ISA");

/* The table of isa in this build, or NULL. */
static const rg_backend *isa_table(rg_isa isa) {
    switch (isa) {
#ifdef RG_ISA_HAVE_GENERIC
    case RG_ISA_GENERIC:
        return &rg_cpu_table_generic;
#endif
#ifdef RG_ISA_HAVE_AVX2
    case RG_ISA_AVX2:
        return &rg_cpu_table_avx2;
#endif
#ifdef RG_ISA_HAVE_AVX512
    case RG_ISA_AVX512:
        return &rg_cpu_table_avx512;
#endif
#ifdef RG_ISA_HAVE_NATIVE
    case RG_ISA_NATIVE:
        return &rg_cpu_table_native;
#endif
    default:
        return NULL;
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c". */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

/* Whether this CPU (and its OS, which must save the wider registers) runs isa's copy: the
 * features checked are exactly the -m flags of cmake/isa.cmake. */
static bool cpu_runs(rg_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    switch (isa) {
    case RG_ISA_AVX2:
        return avx2;
    case RG_ISA_AVX512:
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    default:
        return true; /* generic; native: the machine that built it */
    }
#else
    return isa == RG_ISA_GENERIC || isa == RG_ISA_NATIVE;
#endif
}

static bool usable(rg_isa isa) {
    return isa_table(isa) != NULL && cpu_runs(isa);
}

static struct {
    pthread_once_t once;
    rg_isa isa;
    const rg_backend *table; /* NULL when RG_ISA was bad */
    char error[256];
} chosen = {.once = PTHREAD_ONCE_INIT};

static void choose(void) {
    const char *want = getenv("RG_ISA");
    if (!want || !*want) {
        for (int i = RG_ISA_COUNT - 1; i >= 0; i--)
            if (usable((rg_isa)i)) {
                chosen.isa = (rg_isa)i, chosen.table = isa_table((rg_isa)i);
                return;
            }
    }
    char avail[64] = "";
    for (int i = 0; i < RG_ISA_COUNT; i++)
        if (usable((rg_isa)i))
            snprintf(avail + strlen(avail), sizeof avail - strlen(avail), "%s%s",
                     avail[0] ? ", " : "", isa_names[i]);
    for (int i = 0; want && i < RG_ISA_COUNT; i++) {
        if (strcmp(want, isa_names[i])) continue;
        if (usable((rg_isa)i)) {
            chosen.isa = (rg_isa)i, chosen.table = isa_table((rg_isa)i);
            return;
        }
        snprintf(chosen.error, sizeof chosen.error, "RG_ISA=%s: %s (this one runs: %s)", want,
                 isa_table((rg_isa)i) ? "this CPU lacks that instruction set"
                                      : "this build has no kernels for it",
                 avail);
        return;
    }
    snprintf(chosen.error, sizeof chosen.error,
             "RG_ISA=%s: unknown instruction set (expected one of: %s)", want ? want : "", avail);
}

const rg_backend *rg_cpu_backend_get(void) {
    pthread_once(&chosen.once, choose);
    if (__builtin_expect(!chosen.table, 0)) rg_fatal(__FILE__, __LINE__, "%s", chosen.error);
    return chosen.table;
}

const rg_backend *rg_cpu_backend_isa(const char *name) {
    for (int i = 0; name && i < RG_ISA_COUNT; i++)
        if (!strcmp(name, isa_names[i])) return usable((rg_isa)i) ? isa_table((rg_isa)i) : NULL;
    return NULL;
}

rg_status rg_cpu_isa_init(void) {
    pthread_once(&chosen.once, choose);
    return chosen.table ? RG_OK : rg_error(RG_EINVAL, "%s", chosen.error);
}

const char *rg_cpu_isa(void) {
    rg_cpu_backend_get();
    return isa_names[chosen.isa];
}

bool rg_cpu_isa_supported(const char *name) {
    return rg_cpu_backend_isa(name) != NULL;
}
