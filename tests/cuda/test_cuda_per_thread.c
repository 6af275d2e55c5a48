/* What one CUDA thread computes (tensor/cuda/per_thread.h), run on the CPU for every index and
 * compared with the CPU backend or a brute-force answer. These run in every build, GPU or not:
 * they are the part of the CUDA kernels that this machine can check. */
#include <math.h>

#include "cudatest.h"
#include "tensor/cuda/per_thread.h"
#include "ops/op_impl.h"

/* ---- broadcast index maps ---- */

static rg_tensor shaped(int ndim, const int64_t *shape) {
    rg_tensor t = {.dtype = RG_F32, .ndim = ndim};
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.numel = rg_shape_numel(ndim, shape);
    return t;
}

/* b's flat index for big's flat index i, by NumPy's rules, the slow way. */
static int64_t naive_b_index(const rg_tensor *big, const rg_tensor *b, int64_t i) {
    int64_t idx = 0, bstride = 1;
    for (int d = big->ndim - 1; d >= 0; d--) {
        int64_t coord = i % big->shape[d];
        i /= big->shape[d];
        int bd = d - (big->ndim - b->ndim);
        if (bd < 0) continue;
        if (b->shape[bd] != 1) idx += coord * bstride;
        bstride *= b->shape[bd];
    }
    return idx;
}

Test(cuda_per_thread, broadcast_maps_agree_with_numpy_rules) {
    int64_t shapes[][2][4] = {
        {{7, 5}, {5}},
        {{7, 5}, {7, 1}},
        {{2, 3, 4, 5}, {3, 1, 1}},
        {{4, 6}, {4, 6}},
        {{3, 1, 5, 2}, {1, 5, 1}},
        {{2, 3, 4, 5}, {2, 1, 4, 1}},
        {{6, 7}, {1}},
        {{5}, {1}},
    };
    int nd[][2] = {{2, 1}, {2, 2}, {4, 3}, {2, 2}, {4, 3}, {4, 4}, {2, 1}, {1, 1}};
    for (size_t t = 0; t < sizeof nd / sizeof nd[0]; t++) {
        rg_tensor big = shaped(nd[t][0], shapes[t][0]), b = shaped(nd[t][1], shapes[t][1]);
        rg_bcast bc;
        cr_assert(rg_bcast_plan(&big, &b, &bc));
        rg_cuda_dims bd = rg_bcast_b_dims(&bc), kept, red;
        for (int64_t i = 0; i < bc.n; i++) {
            int64_t want = naive_b_index(&big, &b, i);
            cr_assert_eq(rg_dims_offset_i64(&bd, i), want, "case %zu: output %lld", t,
                         (long long)i);
            cr_assert_eq(rg_dims_offset_u32(&bd, (uint32_t)i), (uint32_t)want);
        }
        /* the reduction's split visits every output once, and kept(j) + red(r) maps to b[j] */
        rg_bcast_split(&bc, &kept, &red);
        int64_t m = bc.n / bc.nb;
        char *seen = calloc((size_t)bc.n, 1);
        for (int64_t j = 0; j < bc.nb; j++)
            for (int64_t r = 0; r < m; r++) {
                int64_t o = rg_dims_offset_i64(&kept, j) + rg_dims_offset_i64(&red, r);
                cr_assert(o >= 0 && o < bc.n && !seen[o], "case %zu: output %lld twice", t,
                          (long long)o);
                seen[o] = 1;
                cr_assert_eq(naive_b_index(&big, &b, o), j, "case %zu: output %lld", t,
                             (long long)o);
                cr_assert_eq(rg_dims_offset_u32(&red, (uint32_t)r),
                             (uint32_t)rg_dims_offset_i64(&red, r));
            }
        free(seen);
    }
}

/* ---- max pooling ---- */

Test(cuda_per_thread, pool_covering_is_exactly_the_windows_that_reach_an_input) {
    for (int k = 1; k <= 4; k++)
        for (int stride = 1; stride <= 4; stride++)
            for (int pad = 0; 2 * pad <= k; pad++)
                for (int64_t h = k; h <= 12; h++) {
                    int64_t outs = (h + 2 * pad - k) / stride + 1;
                    for (int64_t x = 0; x < h; x++) {
                        int64_t lo, hi;
                        rg_pool_covering(x, pad, k, stride, outs, &lo, &hi);
                        for (int64_t p = 0; p < outs; p++) {
                            bool covers = p * stride - pad <= x && x < p * stride - pad + k;
                            cr_assert_eq(covers, p >= lo && p <= hi,
                                         "k%d s%d p%d h%lld: input "
                                         "%lld, output %lld",
                                         k, stride, pad, (long long)h, (long long)x, (long long)p);
                        }
                    }
                }
}

Test(cuda_per_thread, max_pool_bodies_match_the_cpu_bit_for_bit) {
    int cfg[][3] = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 3, 0}, {1, 1, 0}};
    for (int t = 0; t < 5; t++) {
        rg_pool2d_shape s = {.n = 2,
                             .c = 3,
                             .h = 11,
                             .w = 9,
                             .kernel_h = cfg[t][0],
                             .kernel_w = cfg[t][0],
                             .stride_h = cfg[t][1],
                             .stride_w = cfg[t][1],
                             .pad_h = cfg[t][2],
                             .pad_w = cfg[t][2]};
        s.p = (s.h + 2 * s.pad_h - s.kernel_h) / s.stride_h + 1;
        s.q = (s.w + 2 * s.pad_w - s.kernel_w) / s.stride_w + 1;
        int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.p * s.q;
        float *x = rgt_rand(nx, -1, 1, t), *dy = rgt_rand(ny, -1, 1, 10 + t);
        for (int64_t i = 0; i < nx; i += 5) x[i] = 0.5f; /* ties */
        x[17] = NAN;
        float *y0 = malloc(ny * 4), *y1 = malloc(ny * 4), *dx0 = malloc(nx * 4),
              *dx1 = malloc(nx * 4);
        int32_t *a0 = malloc(ny * 4), *a1 = malloc(ny * 4);
        rg_cpu_backend.maxpool2d_forward(&s, x, y0, a0);
        for (int64_t i = 0; i < ny; i++) rg_maxpool2d_forward_at(&s, x, i, y1, a1);
        cr_assert(memcmp(a0, a1, ny * 4) == 0 && memcmp(y0, y1, ny * 4) == 0, "forward, case %d",
                  t);
        for (int beta = 0; beta <= 1; beta++) {
            for (int64_t i = 0; i < nx; i++) dx0[i] = dx1[i] = beta ? x[i] : NAN;
            rg_cpu_backend.maxpool2d_backward(&s, dy, a0, (float)beta, dx0);
            for (int64_t i = 0; i < nx; i++)
                rg_maxpool2d_backward_at(&s, dy, a0, (float)beta, dx1, i);
            cr_assert(memcmp(dx0, dx1, nx * 4) == 0, "backward, case %d, beta %d", t, beta);
        }
        free(x), free(dy), free(y0), free(y1), free(dx0), free(dx1), free(a0), free(a1);
    }
}

/* ---- argmax: the warp's lanes and butterfly, simulated ---- */

static int64_t warp_argmax(const float *xr, int64_t cols) {
    float best[32], nb[32];
    int64_t at[32], na[32];
    for (int lane = 0; lane < 32; lane++) { /* as argmax_kernel's strided scan */
        best[lane] = 0.0f, at[lane] = -1;
        for (int64_t j = lane; j < cols; j += 32) {
            float v = xr[j];
            if (v == v && rg_argmax_better(v, j, best[lane], at[lane]))
                best[lane] = v, at[lane] = j;
        }
    }
    for (int o = 16; o > 0;
         o >>= 1) { /* __shfl_xor_sync: every lane reads its partner's old value */
        for (int l = 0; l < 32; l++) {
            bool b = rg_argmax_better(best[l ^ o], at[l ^ o], best[l], at[l]);
            nb[l] = b ? best[l ^ o] : best[l], na[l] = b ? at[l ^ o] : at[l];
        }
        memcpy(best, nb, sizeof best), memcpy(at, na, sizeof at);
    }
    for (int l = 1; l < 32; l++) cr_assert_eq(at[l], at[0], "every lane ends with the same answer");
    return (at[0] < 0 || xr[0] != xr[0]) ? 0 : at[0];
}

Test(cuda_per_thread, warp_argmax_equals_the_sequential_scan) {
    for (int t = 0; t < 300; t++) {
        int64_t cols = 1 + t % 97;
        float *x = rgt_rand(cols, -1, 1, t);
        for (int64_t j = 0; j < cols; j++) { /* few distinct values: many ties; some NaN, -inf */
            x[j] = floorf(x[j] * 3.0f);
            if ((j * 7 + t) % 11 == 0) x[j] = NAN;
            if ((j * 5 + t) % 13 == 0) x[j] = -INFINITY;
        }
        int64_t want;
        rg_cpu_backend.argmax(1, cols, x, &want);
        cr_assert_eq(warp_argmax(x, cols), want, "row %d of %lld columns", t, (long long)cols);
        free(x);
    }
}

/* ---- Philox positions ---- */

Test(cuda_per_thread, philox_counters_cover_each_element_once) {
    for (uint64_t offset = 0; offset < 10; offset++)
        for (int64_t n = 1; n <= 40; n++) {
            int hits[40] = {0};
            int64_t counters = rg_philox_counters(n, offset);
            for (int64_t g = 0; g < counters; g++)
                for (uint64_t j = 0; j < 4; j++) {
                    int64_t i;
                    bool valid;
                    uint64_t pos = rg_philox_position(offset, n, g, j, &i, &valid);
                    cr_assert_eq(pos >> 2, (offset >> 2) + (uint64_t)g, "one counter per thread");
                    if (!valid) continue;
                    cr_assert(i >= 0 && i < n && pos == offset + (uint64_t)i);
                    hits[i]++;
                }
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(hits[i], 1, "offset %llu, n %lld: element %lld",
                             (unsigned long long)offset, (long long)n, (long long)i);
        }
}

/* ---- dropout: a thread per counter ----
 * dropout.cu's forward as this machine can run it: every counter's thread computes its byte of
 * keeps (all eight when the counter lies inside the tensor, those in range otherwise), writes its
 * elements (as the two float4s of a whole counter or one by one), and its byte lands in byte g % 4
 * of mask word g / 4, as the warp's shuffles gather it. The result must be the CPU backend's, y
 * and mask, bit for bit, for every offset modulo 8 and the lengths around a counter and a word. */
Test(cuda_per_thread, dropout_threads_give_the_cpu_result) {
    const float ps[] = {0.1f, 0.5f, 1.0f - 1.0f / 65536.0f};
    float x[80], want[80], got[80];
    uint32_t want_mask[4], got_mask[4];
    for (int i = 0; i < 80; i++) x[i] = 1.0f + (float)i;
    for (int k = 0; k < 3; k++)
        for (uint64_t offset = 0; offset < 24; offset++)
            for (int64_t n = 1; n <= 70; n++) {
                int64_t words = rg_dropout_mask_words(n, offset);
                cr_assert(words <= 4);
                rg_cpu_backend.dropout_forward(n, ps[k], 31, offset, x, want, want_mask);
                float scale = 1.0f / (1.0f - ps[k]);
                memset(got_mask, 0, sizeof got_mask);
                int64_t counters = rg_stream_counters(n, offset, RG_DROPOUT_SHIFT);
                for (int64_t g = 0; g < counters; g++) {
                    bool whole;
                    int64_t first = rg_dropout_counter_first(offset, g, n, &whole);
                    uint32_t byte = rg_dropout_counter_keeps(ps[k], 31, offset, g);
                    if (!whole)
                        byte &= rg_dropout_counter_range(offset, g, n);
                    else
                        cr_assert_eq(rg_dropout_counter_range(offset, g, n), 0xFFu);
                    for (int64_t j = 0; j < RG_DROPOUT_PER_COUNTER; j++) {
                        int64_t i = first + j;
                        if (i >= 0 && i < n) got[i] = (byte >> j) & 1u ? x[i] * scale : 0.0f;
                    }
                    got_mask[g >> 2] |= byte << (8 * (g & 3));
                }
                for (int64_t i = 0; i < n; i++)
                    cr_assert_eq(got[i], want[i], "p %g offset %llu n %lld: element %lld",
                                 (double)ps[k], (unsigned long long)offset, (long long)n,
                                 (long long)i);
                for (int64_t w = 0; w < words; w++)
                    cr_assert_eq(got_mask[w], want_mask[w],
                                 "p %g offset %llu n %lld: mask word %lld: %08x, want %08x",
                                 (double)ps[k], (unsigned long long)offset, (long long)n,
                                 (long long)w, got_mask[w], want_mask[w]);
            }
}
