/* dist_test.h — helpers shared by the dist tests: typed element access, and inputs that make
 * every reduction exact, so a result is compared with the serial reference exactly whatever the
 * order of the additions. */
#ifndef RG_DIST_TEST_H
#define RG_DIST_TEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad.h"
#include "core/kernels.h"

/* Element i of buf as a double. */
static inline double dt_get(const void *buf, rg_comm_dtype dt, int64_t i) {
    switch (dt) {
    case RG_COMM_F32:
        return ((const float *)buf)[i];
    case RG_COMM_F16:
        return rg_f16_to_f32(((const uint16_t *)buf)[i]);
    case RG_COMM_I32:
        return ((const int32_t *)buf)[i];
    case RG_COMM_I64:
        return (double)((const int64_t *)buf)[i];
    case RG_COMM_U8:
        return ((const uint8_t *)buf)[i];
    default:
        abort();
    }
}

static inline void dt_put(void *buf, rg_comm_dtype dt, int64_t i, double v) {
    switch (dt) {
    case RG_COMM_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case RG_COMM_F16:
        ((uint16_t *)buf)[i] = rg_f32_to_f16((float)v);
        break;
    case RG_COMM_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case RG_COMM_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case RG_COMM_U8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    default:
        abort();
    }
}

/* Rank r's element i: a small integer (0..9 for U8, -11..11 otherwise), so that sums over a few
 * ranks are exact in every dtype, float16 included. salt varies the data between calls. */
static inline double dt_input(rg_comm_dtype dt, int r, int64_t i, int salt) {
    int64_t v = (i * 7 + r * 13 + salt * 5) % 23;
    return dt == RG_COMM_U8 ? (double)(v % 10) : (double)(v - 11);
}

static inline void *dt_alloc(int64_t count, rg_comm_dtype dt) {
    return malloc(count ? (size_t)count * rg_comm_dtype_size(dt) : 1);
}

#endif
