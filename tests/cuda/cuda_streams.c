/* The stream API the NCCL backend builds on (tensor/cuda/streams.h), from plain C — which is also
 * the check that the header compiles as C. Built only with the CUDA backend (tests.cmake).
 *
 * To make "this work has not run yet" deterministic, a stream is held shut by a host function
 * that spins until the test opens the gate. */
#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "cudatest.h"
#include "tensor/cuda/streams.h"

static atomic_int gate;

static void CUDART_CB hold(void *arg) {
    while (!atomic_load(&gate)) {
    }
}

/* Queues a host function that blocks `s` until open_gate(). */
static void close_gate(cudaStream_t s) {
    atomic_store(&gate, 0);
    cr_assert_eq(cudaLaunchHostFunc(s, hold, NULL), cudaSuccess);
}

static void open_gate(void) {
    atomic_store(&gate, 1);
}

Test(cuda_streams, each_device_has_two_distinct_streams) {
    RGT_REQUIRE_CUDA();
    cudaStream_t compute = rg_cuda_stream(0, RG_CUDA_STREAM_COMPUTE);
    cudaStream_t comm = rg_cuda_stream(0, RG_CUDA_STREAM_COMM);
    cr_assert(compute && comm && compute != comm, "non-default, distinct streams");
    cr_assert_eq(rg_cuda_stream(0, RG_CUDA_STREAM_COMPUTE), compute, "and always the same ones");
    int pc, pm;
    cr_assert_eq(cudaStreamGetPriority(compute, &pc), cudaSuccess);
    cr_assert_eq(cudaStreamGetPriority(comm, &pm), cudaSuccess);
    cr_assert_leq(pm, pc, "comm has the higher priority (the smaller number)");
}

Test(cuda_streams, stream_wait_orders_comm_after_compute_on_the_device) {
    RGT_REQUIRE_CUDA();
    cudaStream_t compute = rg_cuda_stream(0, RG_CUDA_STREAM_COMPUTE);
    cudaStream_t comm = rg_cuda_stream(0, RG_CUDA_STREAM_COMM);
    float *d = rgt_dev(NULL, 4096);
    close_gate(compute);
    rg_cuda_stream_wait(0, RG_CUDA_STREAM_COMM, RG_CUDA_STREAM_COMPUTE); /* returns at once */
    cr_assert_eq(cudaMemsetAsync(d, 0, 4096, comm), cudaSuccess);
    cr_assert_eq(cudaStreamQuery(comm), cudaErrorNotReady, "comm waits for the held compute");
    (void)cudaGetLastError(); /* "not ready" is an answer; keep it out of later launch checks */
    open_gate();
    cr_assert_eq(cudaStreamSynchronize(comm), cudaSuccess);
    rgt_dev_free(d, 4096);
}

Test(cuda_streams, record_stream_delays_reuse_until_that_stream_is_done) {
    RGT_REQUIRE_CUDA();
    const rg_backend *g = rgt_gpu();
    size_t bytes = 1 << 16;
    cudaStream_t comm = rg_cuda_stream(0, RG_CUDA_STREAM_COMM);
    void *p = g->alloc(bytes);
    close_gate(comm); /* NCCL "still uses" p */
    rg_cuda_record_stream(0, p, RG_CUDA_STREAM_COMM);
    g->free(p, bytes);
    void *q = g->alloc(bytes);
    cr_assert_neq(q, p, "p must not be handed out while comm may still use it");
    open_gate();
    cr_assert_eq(cudaStreamSynchronize(comm), cudaSuccess);
    void *r = g->alloc(bytes);
    const char *e = getenv("RG_CUDA_ALLOC_CACHE");
    if (!(e && strcmp(e, "0") == 0)) cr_assert_eq(r, p, "after comm finished, p is reused");
    g->free(q, bytes), g->free(r, bytes);
}

Test(cuda_streams, comm_owned_block_goes_back_through_the_table) {
    RGT_REQUIRE_CUDA();
    void *p = rg_cuda_alloc_on(0, 1 << 20, RG_CUDA_STREAM_COMM);
    cr_assert(p);
    rg_mem_stats s = rgt_gpu()->mem_stats();
    cr_assert_geq(s.in_use, 1 << 20);
    rgt_gpu()->free(p, 1 << 20);
    cr_assert_eq(rgt_gpu()->mem_stats().in_use, s.in_use - (1 << 20));
}
