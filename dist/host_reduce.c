/* host_reduce.c — the arithmetic of a reduction on host buffers: dst += src, and the 1/N of AVG.
 *
 * The ring backend adds each block it receives with these, and the MPI backend's user-defined
 * float16 sum calls them too, so both backends round float16 the same way: each hop adds in
 * float32 and rounds once (core/kernels.h holds the conversions). On an x86 CPU with F16C (since
 * Ivy Bridge) the float16 sum converts 8 values per instruction with the same rounding (to
 * nearest, ties to even): that one function is compiled for AVX+F16C and used when the CPU
 * kernels' instruction set (rg_cpu_isa, RG_ISA) is not "generic"; the rest of the file stays
 * x86-64 baseline. The scalar loop is the reference, and tests/tensor/test_kernels.c checks that
 * the two agree. */
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define RG_HOST_F16C 1
#endif

#include "dist/comm_impl.h"
#include "core/kernels.h"
#include "ringgrad/device.h"

static void sum_f32(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}

#ifdef RG_HOST_F16C
/* d[i] += s[i] for the first n/8*8 halves, 8 at a time; returns how many it did. */
__attribute__((target("avx,f16c"))) static int64_t
sum_f16_f16c(uint16_t *restrict d, const uint16_t *restrict s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

static bool use_f16c(void) { /* start-up state and one CPUID leaf, per call */
    unsigned a, b, c, d; /* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports lacks f16c) */
    return strcmp(rg_cpu_isa(), "generic") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static void sum_f16(uint16_t *restrict d, const uint16_t *restrict s, int64_t n) {
    int64_t i = 0;
#ifdef RG_HOST_F16C
    if (use_f16c()) i = sum_f16_f16c(d, s, n);
#endif
    for (; i < n; i++) d[i] = rg_f32_to_f16(rg_f16_to_f32(d[i]) + rg_f16_to_f32(s[i]));
}

static void sum_i32(int32_t *restrict d, const int32_t *restrict s, int64_t n) {
    /* Wrap around like MPI_SUM does in practice, without signed-overflow UB. */
    for (int64_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)d[i] + (uint32_t)s[i]);
}

static void sum_i64(int64_t *restrict d, const int64_t *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = (int64_t)((uint64_t)d[i] + (uint64_t)s[i]);
}

static void sum_u8(uint8_t *restrict d, const uint8_t *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = (uint8_t)(d[i] + s[i]);
}

void rg_host_reduce_sum(void *dst, const void *src, int64_t count, rg_comm_dtype dt) {
    switch (dt) {
    case RG_COMM_F32:
        sum_f32(dst, src, count);
        break;
    case RG_COMM_F16:
        sum_f16(dst, src, count);
        break;
    case RG_COMM_I32:
        sum_i32(dst, src, count);
        break;
    case RG_COMM_I64:
        sum_i64(dst, src, count);
        break;
    case RG_COMM_U8:
        sum_u8(dst, src, count);
        break;
    default:
        RG_CHECK(0, "rg_host_reduce_sum: bad dtype %d", (int)dt);
    }
}

void rg_host_scale(void *buf, int64_t count, rg_comm_dtype dt, double factor) {
    if (factor == 1.0) return;
    if (dt == RG_COMM_F32) {
        float *p = buf, f = (float)factor;
        for (int64_t i = 0; i < count; i++) p[i] *= f;
    } else if (dt == RG_COMM_F16) {
        uint16_t *p = buf;
        float f = (float)factor;
        for (int64_t i = 0; i < count; i++) p[i] = rg_f32_to_f16(rg_f16_to_f32(p[i]) * f);
    } else {
        RG_CHECK(0, "rg_host_scale: AVG needs a float dtype, got %d", (int)dt);
    }
}
