/* gpu_test.h — helpers for the MPI tests of collectives on GPUs (mpi_nccl.c, mpi_nccl_ddp.c):
 * one GPU per rank or a visible skip, and buffers that live on the GPU or on the host with a host
 * mirror to fill and check them.
 *
 * Without a GPU for every rank of a host (no GPU, a build without CUDA, or more ranks than GPUs)
 * every rank exits with code 77 and rank 0 prints "SKIPPED <prog>: no CUDA device ...", which
 * tests/dist/tests.cmake registers as a skip. */
#ifndef RG_GPU_TEST_H
#define RG_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "ringgrad.h"

#define GT_SKIP_CODE 77

/* Starts the world and picks this rank's GPU into *dev, or skips (exits) on every rank alike. */
static inline rg_dist *gt_start(int *argc, char ***argv, const char *prog, rg_device *dev) {
    rg_dist *d = rg_dist_init(argc, argv);
    MT_CHECK(d, "rg_dist_init: %s", rg_last_error());
    int gpus = rg_cuda_device_count(), local = rg_dist_local_size(d);
    int32_t missing = gpus < local;
    MT_OK(rg_comm_allreduce(rg_dist_comm(d), &missing, 1, RG_COMM_I32, RG_REDUCE_SUM));
    if (missing) {
        if (rg_dist_rank(d) == 0)
            printf("SKIPPED %s: no CUDA device for every rank (%s; %d visible here, %d ranks on "
                   "this host)\n",
                   prog, rg_cuda_compiled() ? "CUDA build" : "build without CUDA", gpus, local);
        fflush(stdout);
        MT_OK(rg_dist_finalize(d));
        exit(GT_SKIP_CODE);
    }
    MT_OK(rg_cuda_set_device(rg_dist_local_rank(d), dev));
    return d;
}

/* A buffer on the GPU (gpu != NULL) or on the host, and its host mirror. */
typedef struct {
    const rg_backend *gpu;
    char *host;
    void *dev;
    size_t bytes;
} gt_buf;

static inline gt_buf gt_buf_new(size_t bytes, const rg_backend *gpu) {
    gt_buf b = {gpu, malloc(bytes ? bytes : 1), NULL, bytes};
    MT_CHECK(b.host, "out of host memory");
    if (gpu) {
        b.dev = gpu->alloc(bytes ? bytes : 1);
        MT_CHECK(b.dev, "out of device memory for %zu bytes", bytes);
    }
    return b;
}

/* The pointer to hand to a collective. */
static inline void *gt_ptr(const gt_buf *b) {
    return b->gpu ? b->dev : b->host;
}

/* Mirror → buffer, and buffer → mirror (the latter waits for the GPU). */
static inline void gt_push(gt_buf *b) {
    if (b->gpu && b->bytes) b->gpu->copy(b->dev, b->host, b->bytes, RG_COPY_H2D);
}
static inline void gt_pull(gt_buf *b) {
    if (b->gpu && b->bytes) b->gpu->copy(b->host, b->dev, b->bytes, RG_COPY_D2H);
}

static inline void gt_buf_free(gt_buf *b) {
    if (b->gpu) b->gpu->free(b->dev, b->bytes ? b->bytes : 1);
    free(b->host);
}

#endif
