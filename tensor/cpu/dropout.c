/* dropout.c — inverted dropout on the CPU; the mask comes from rg_dropout_keep (kernels.h).
 *
 * One Philox call yields four 32-bit words, the uniforms of four consecutive stream elements, so
 * the kernels draw a block of counters at a time into a small buffer (a loop the compiler
 * vectorises) and then apply the mask element by element. Element i keeps exactly
 * rg_dropout_keep(p, seed, offset + i): the same mask as the per-element formula and as CUDA. */
#include "tensor/cpu/cpu.h"

#define COUNTERS 64 /* Philox counters per block: 4 * COUNTERS stream elements */

static float keep_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* u[4j + w] = word w of Philox(seed, ctr0 + j): stream elements 4*ctr0 ... 4*ctr0 + 4*COUNTERS-1 */
static void draw_words(uint64_t seed, uint64_t ctr0, uint32_t *restrict u) {
    for (int j = 0; j < COUNTERS; j++) {
        rg_philox4 r = rg_philox(seed, ctr0 + (uint64_t)j);
        for (int w = 0; w < 4; w++) u[4 * j + w] = r.v[w];
    }
}

/* As rg_philox_uniform, from an already drawn word. */
static inline float word_uniform(uint32_t w) {
    return (float)(w >> 8) * (1.0f / 16777216.0f);
}

/* The stream elements of block b cover tensor elements [e0, e0 + 4*COUNTERS) (clipped to [0, n)).
 */
#define FOR_BLOCKS(n, offset)                                                                      \
    uint64_t c_first = (offset) >> 2, c_end = ((offset) + (uint64_t)(n) + 3) >> 2;                 \
    int64_t nblocks = (int64_t)((c_end - c_first + COUNTERS - 1) / COUNTERS);                      \
    _Pragma("omp parallel for if (n > RG_CPU_PAR_MIN / 8) schedule(static)") for (int64_t b = 0;   \
                                                                                  b < nblocks;     \
                                                                                  b++)

void rg_cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                            float *y) {
    float scale = keep_scale(p);
    FOR_BLOCKS(n, offset) {
        uint32_t u[4 * COUNTERS];
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        draw_words(seed, ctr0, u);
        int64_t e0 = (int64_t)(4 * ctr0 - offset); /* tensor element of u[0]; may be negative */
        int64_t lo = e0 < 0 ? -e0 : 0, hi = n - e0 < 4 * COUNTERS ? n - e0 : 4 * COUNTERS;
        for (int64_t k = lo; k < hi; k++)
            y[e0 + k] = word_uniform(u[k]) >= p ? x[e0 + k] * scale : 0.0f;
    }
}

void rg_cpu_dropout_backward(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                             float beta, float *dx) {
    float scale = keep_scale(p);
    FOR_BLOCKS(n, offset) {
        uint32_t u[4 * COUNTERS];
        uint64_t ctr0 = c_first + (uint64_t)b * COUNTERS;
        draw_words(seed, ctr0, u);
        int64_t e0 = (int64_t)(4 * ctr0 - offset);
        int64_t lo = e0 < 0 ? -e0 : 0, hi = n - e0 < 4 * COUNTERS ? n - e0 : 4 * COUNTERS;
        if (beta == 0.0f) {
            for (int64_t k = lo; k < hi; k++)
                dx[e0 + k] = word_uniform(u[k]) >= p ? dy[e0 + k] * scale : 0.0f;
        } else {
            for (int64_t k = lo; k < hi; k++)
                dx[e0 + k] =
                    (word_uniform(u[k]) >= p ? dy[e0 + k] * scale : 0.0f) + beta * dx[e0 + k];
        }
    }
}
