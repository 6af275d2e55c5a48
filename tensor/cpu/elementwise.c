/* elementwise.c — fills, axpby, broadcast binary ops and their reductions, relu, sum, argmax,
 * random fills and float16 packing on the CPU. The formulas are in core/kernels.h. */
#include <float.h>
#include <stdlib.h>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

#include "tensor/cpu/cpu.h"
#include "core/alloc.h"
#include "core/sanitize.h"

void rg_cpu_fill(int64_t n, float v, float *x) {
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] = v;
}

void rg_cpu_axpby(int64_t n, float a, const float *x, float b, float *y) {
    if (b == 0.0f) { /* y is not read: it may hold garbage */
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
    } else {
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b * y[i];
    }
}

/* Offset into b of the row (all dimensions but the last) with flat index r. */
static int64_t bcast_row_offset(const rg_bcast *bc, int64_t r) {
    int64_t off = 0;
    for (int d = bc->ndim - 2; d >= 0; d--) {
        off += (r % bc->shape[d]) * bc->bstride[d];
        r /= bc->shape[d];
    }
    return off;
}

/* Rows are cut into blocks, so that threads share the work even when the plan collapsed to one
 * long row (operands of the same shape, a scalar). */
#define BINARY_BLOCK 4096

void rg_cpu_binary(rg_binary_op op, const rg_bcast *bc, const float *a, const float *b, float *out) {
    int64_t len = bc->shape[bc->ndim - 1], rows = len ? bc->n / len : 0;
    int64_t bstep = bc->bstride[bc->ndim - 1];
    int64_t nblk = (len + BINARY_BLOCK - 1) / BINARY_BLOCK;
#pragma omp parallel for if (bc->n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t t = 0; t < rows * nblk; t++) {
        int64_t r = t / nblk, j0 = t % nblk * BINARY_BLOCK;
        int64_t j1 = j0 + BINARY_BLOCK < len ? j0 + BINARY_BLOCK : len;
        const float *ar = a + r * len, *br = b + bcast_row_offset(bc, r);
        float *o = out + r * len;
        if (op == RG_BINARY_ADD) {
            if (bstep) for (int64_t j = j0; j < j1; j++) o[j] = ar[j] + br[j];
            else for (int64_t j = j0; j < j1; j++) o[j] = ar[j] + br[0];
        } else {
            if (bstep) for (int64_t j = j0; j < j1; j++) o[j] = ar[j] * br[j];
            else for (int64_t j = j0; j < j1; j++) o[j] = ar[j] * br[0];
        }
    }
}

void rg_cpu_reduce_bcast(const rg_bcast *bc, const float *dy, const float *x, float beta, float *db) {
    int64_t len = bc->shape[bc->ndim - 1], rows = len ? bc->n / len : 0;
    if (beta == 0.0f) rg_cpu_fill(bc->nb, 0.0f, db);
    else if (beta != 1.0f) rg_cpu_axpby(bc->nb, 0.0f, db, beta, db);
    if (rows == 0) return;
    if (bc->bstride[bc->ndim - 1] == 0) {
        /* each row sums to one element of b: row sums in parallel, then a serial scatter */
        double *sums = rg_xmalloc((size_t)rows * sizeof *sums, "reduce_bcast: row sums");
#pragma omp parallel for if (bc->n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *d = dy + r * len, *xr = x ? x + r * len : NULL;
            double s = 0.0;
            if (xr) for (int64_t j = 0; j < len; j++) s += (double)d[j] * xr[j];
            else for (int64_t j = 0; j < len; j++) s += d[j];
            sums[r] = s;
        }
        for (int64_t r = 0; r < rows; r++) db[bcast_row_offset(bc, r)] += (float)sums[r];
        free(sums);
        return;
    }
    /* rows add element-wise into a stretch of b: split the columns between threads */
#pragma omp parallel for if (bc->n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t j0 = 0; j0 < len; j0 += 256) {
        int64_t j1 = j0 + 256 < len ? j0 + 256 : len;
        for (int64_t r = 0; r < rows; r++) {
            float *o = db + bcast_row_offset(bc, r);
            const float *d = dy + r * len, *xr = x ? x + r * len : NULL;
            if (xr) for (int64_t j = j0; j < j1; j++) o[j] += d[j] * xr[j];
            else for (int64_t j = j0; j < j1; j++) o[j] += d[j];
        }
    }
}

void rg_cpu_relu_forward(int64_t n, const float *x, float *y) {
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = rg_k_relu(x[i]);
}

void rg_cpu_relu_backward(int64_t n, const float *x, const float *dy, float beta, float *dx) {
    if (beta == 0.0f) {
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) dx[i] = rg_k_relu_grad(x[i], dy[i]);
    } else {
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) dx[i] = rg_k_relu_grad(x[i], dy[i]) + beta * dx[i];
    }
}

/* The sum of x[0, n) in SUM_LANES double lanes over a block (vectorised: four registers of
 * lanes, where one double chain ran at one element per two cycles), the blocks added in order:
 * the same result at any thread count (an OpenMP reduction's was not). Float lanes were faster
 * still but drifted: 20 million times 0.1 came out 2.5e-6 too large. */
#define SUM_LANES 32
#define SUM_BLOCK 4096

static double block_sum(const float *x, int64_t n) {
    double lanes[SUM_LANES] = {0};
    int64_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int l = 0; l < SUM_LANES; l++) lanes[l] += (double)x[i + l];
    double s = 0.0;
    for (int l = 0; l < SUM_LANES; l++) s += lanes[l];
    for (; i < n; i++) s += x[i];
    return s;
}

void rg_cpu_sum(int64_t n, const float *x, float *out) {
    int64_t blocks = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double part[64], s = 0.0; /* part: the blocks of one stretch, summed in order after it */
    for (int64_t b0 = 0; b0 < blocks; b0 += 64) {
        int64_t nb = blocks - b0 < 64 ? blocks - b0 : 64;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
        for (int64_t b = 0; b < nb; b++) {
            int64_t i = (b0 + b) * SUM_BLOCK;
            part[b] = block_sum(x + i, n - i < SUM_BLOCK ? n - i : SUM_BLOCK);
        }
        for (int64_t b = 0; b < nb; b++) s += part[b];
    }
    *out = (float)s;
}

void rg_cpu_argmax(int64_t rows, int64_t cols, const float *x, int64_t *out) {
#pragma omp parallel for if (rows * cols > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        int64_t best = 0;
        for (int64_t j = 1; j < cols; j++)
            if (xr[j] > xr[best]) best = j;
        out[r] = best;
    }
}

/* The random fills, a block of elements at a time. Each Philox counter gives four words: four
 * uniforms, or two normals (Box-Muller takes two words each), so the loops draw one counter per
 * four or two elements, where drawing one per element computed each counter four or two times
 * over. The numbers are those of rg_philox_uniform and rg_philox_normal element by element
 * (tests/tensor/test_kernels.c compares them at unaligned offsets), on the block's ragged ends
 * too.
 * The blocks run without sanitizer checks (core/sanitize.h), x checked once a call: under ASan +
 * UBSan, Philox's rounds made initialising a ResNet-50 take seconds. They are functions of their
 * own because GCC 12 fails on an OpenMP region in a function without sanitizer checks. */
#define RNG_BLOCK 4096

RG_UNCHECKED static void uniform_block(int64_t i0, int64_t i1, float lo, float hi, uint64_t seed,
                                       uint64_t offset, float *x) {
    int64_t i = i0;
    for (; i < i1 && ((offset + (uint64_t)i) & 3); i++)
        x[i] = lo + (hi - lo) * rg_philox_uniform(seed, offset + (uint64_t)i);
    for (; i + 4 <= i1; i += 4) {
        rg_philox4 r = rg_philox(seed, (offset + (uint64_t)i) >> RG_UNIFORM_SHIFT);
        for (int w = 0; w < 4; w++) x[i + w] = lo + (hi - lo) * rg_uniform_of_word(r.v[w]);
    }
    for (; i < i1; i++) x[i] = lo + (hi - lo) * rg_philox_uniform(seed, offset + (uint64_t)i);
}

RG_UNCHECKED static void normal_block(int64_t i0, int64_t i1, float mean, float std, uint64_t seed,
                                      uint64_t offset, float *x) {
    const uint64_t base = offset / 2; /* element i is the stream's normal number base + i */
    int64_t i = i0;
    if (i < i1 && ((base + (uint64_t)i) & 1)) {
        x[i] = mean + std * rg_philox_normal(seed, base + (uint64_t)i);
        i++;
    }
    for (; i + 2 <= i1; i += 2) {
        rg_philox4 r = rg_philox(seed, (base + (uint64_t)i) >> 1);
        x[i] = mean + std * rg_box_muller(rg_uniform_of_word(r.v[0]), rg_uniform_of_word(r.v[1]));
        x[i + 1] =
            mean + std * rg_box_muller(rg_uniform_of_word(r.v[2]), rg_uniform_of_word(r.v[3]));
    }
    if (i < i1) x[i] = mean + std * rg_philox_normal(seed, base + (uint64_t)i);
}

void rg_cpu_uniform(int64_t n, float lo, float hi, uint64_t seed, uint64_t offset, float *x) {
    rg_check_region(x, (size_t)n * sizeof *x);
    const int64_t blocks = (n + RNG_BLOCK - 1) / RNG_BLOCK;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)
    for (int64_t b = 0; b < blocks; b++)
        uniform_block(b * RNG_BLOCK, n - b * RNG_BLOCK < RNG_BLOCK ? n : (b + 1) * RNG_BLOCK, lo,
                      hi, seed, offset, x);
}

void rg_cpu_normal(int64_t n, float mean, float std, uint64_t seed, uint64_t offset, float *x) {
    rg_check_region(x, (size_t)n * sizeof *x);
    const int64_t blocks = (n + RNG_BLOCK - 1) / RNG_BLOCK;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)
    for (int64_t b = 0; b < blocks; b++)
        normal_block(b * RNG_BLOCK, n - b * RNG_BLOCK < RNG_BLOCK ? n : (b + 1) * RNG_BLOCK, mean,
                     std, seed, offset, x);
}

/* float32 <-> float16. With F16C (x86 since Ivy Bridge) 8 values per instruction, rounding to
 * nearest, ties to even, exactly as rg_f32_to_f16 (core/kernels.h) does; the scalar formulas
 * finish the tail and serve everywhere else. tests/tensor/test_kernels.c compares the two. */
void rg_cpu_f32_to_f16(int64_t n, const float *x, uint16_t *y) {
    int64_t head = 0;
#if defined(__F16C__) && defined(__AVX__)
    head = n / 8 * 8;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < head; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (int64_t i = head; i < n; i++) y[i] = rg_f32_to_f16(x[i]);
}

void rg_cpu_f16_to_f32(int64_t n, const uint16_t *x, float *y) {
    int64_t head = 0;
#if defined(__F16C__) && defined(__AVX__)
    head = n / 8 * 8;
#pragma omp parallel for if (n > RG_CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < head; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
#endif
    for (int64_t i = head; i < n; i++) y[i] = rg_f16_to_f32(x[i]);
}
