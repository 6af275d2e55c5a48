/* comm_nccl_nocuda.c — the nccl backend of a build without CUDA: it exists so that asking for
 * it gives a clear message instead of a link error. dist/cuda/comm_nccl.c replaces this file in
 * CUDA builds. */
#include "dist/comm_impl.h"

RG_NODISCARD static rg_status nccl_init(rg_comm *c) {
    return rg_error(RG_ENOTSUP, "comm backend \"nccl\": this build of ringgrad has no CUDA "
                                "(rebuild with -DRG_CUDA=ON, or use --comm mpi or ring)");
}

static void nccl_deinit(rg_comm *c) {}

/* Only init is ever called: a comm whose init fails is never used. */
const rg_comm_ops rg_comm_nccl_ops = {
    .name = "nccl",
    .device_buffers = true,
    .init = nccl_init,
    .deinit = nccl_deinit,
};
