/* cuda_api_nocuda.c — ringgrad/device.h in a build without the CUDA backend: every call reports
 * RG_ENOTSUP, so programs can offer --device cuda and fail with a clear message. */
#include "ringgrad/device.h"

#define NO_CUDA "this build has no CUDA backend (configure with -DRG_CUDA=ON and the toolkit)"

rg_status rg_cuda_set_device(int local_rank, rg_device *dev) {
    return rg_error(RG_ENOTSUP, "rg_cuda_set_device(%d): " NO_CUDA, local_rank);
}

rg_status rg_cuda_device_name(int index, char *buf, size_t n) {
    if (buf && n) buf[0] = '\0';
    return rg_error(RG_ENOTSUP, "rg_cuda_device_name(%d): " NO_CUDA, index);
}

rg_status rg_cuda_timer_new(rg_device dev, rg_cuda_timer **out) {
    *out = NULL;
    return rg_error(RG_ENOTSUP, "rg_cuda_timer_new: " NO_CUDA);
}

void rg_cuda_timer_free(rg_cuda_timer *t) {
    RG_CHECK(!t, "rg_cuda_timer_free: " NO_CUDA);
}

void rg_cuda_timer_start(rg_cuda_timer *t) {
    rg_fatal(__FILE__, __LINE__, "rg_cuda_timer_start: " NO_CUDA);
}

void rg_cuda_timer_stop(rg_cuda_timer *t) {
    rg_fatal(__FILE__, __LINE__, "rg_cuda_timer_stop: " NO_CUDA);
}

float rg_cuda_timer_elapsed_ms(rg_cuda_timer *t) {
    rg_fatal(__FILE__, __LINE__, "rg_cuda_timer_elapsed_ms: " NO_CUDA);
}
