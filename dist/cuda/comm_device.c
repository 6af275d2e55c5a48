/* comm_device.c — collectives on GPU memory: ordered on the device, never by a host wait in the
 * training loop, and buffers copied to the side a backend works on.
 *
 * What it teaches: how a framework orders a collective between the kernels that write its input
 * and the kernels that read its result without making the host wait for the GPU (PyTorch's
 * ProcessGroupNCCL does the same with the CUDA events of its work objects):
 *
 *   main thread            compute stream                      comm stream (high priority)
 *   bucket full: submit    ...backward kernels  ●ready
 *                                               ╰──── waits ──▶ ncclAllReduce  ●done
 *   backward goes on       ...more backward                                    │
 *   rg_comm_wait           waits for done ◀────────────────────────────────────╯
 *   optimizer step         optimizer kernels
 *
 * The main thread only records `ready` and later queues the wait for `done`; the comm thread only
 * queues ncclAllReduce (after the join, so every rank has arrived). Neither waits for the GPU, so
 * the host keeps queueing backward while buckets reduce, and the optimizer's kernels start on the
 * device the moment the last bucket is reduced.
 *
 * Buffers on the side a backend cannot use are staged through page-locked host memory:
 *   GPU buffers, host backend (--comm mpi or ring on a GPU, "copied through the host"): the comm
 *     thread copies the inputs to the host once `ready` has passed, runs the collective there and
 *     copies the results back. It waits for each copy itself; the main thread still never does.
 *   host buffers, device backend (a model fingerprint or an epoch metric through nccl): the
 *     inputs go to device scratch, NCCL runs there and the results come back; the comm thread
 *     waits, because the caller reads a host buffer as soon as the call returns.
 * The comm thread's waits poll the device (and the backend's health), with stall reports and the
 * stall timeout, so that a GPU or a peer that never finishes is reported instead of hanging. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dist/cuda/dist_cuda.h"
#include "tensor/backend_impl.h"

/* ---- where a request's data is ---- */

/* The CUDA device holding p, or -1 for host memory (pageable or page-locked). */
static int device_of(const void *p) {
    if (!p || rg_cuda_device_count() == 0) return -1;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* not a pointer CUDA knows: host memory */
        return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

/* The bytes a collective reads and writes in the caller's buffers. */
typedef struct {
    size_t send, recv; /* bytes of send read, and of recv touched */
    bool recv_in;      /* recv holds input too (allreduce, broadcast) */
    bool recv_out;     /* recv is written */
    bool send_in_recv; /* allgather in place: send is recv + send_off */
    size_t send_off;
} layout;

static layout layout_of(const rg_comm *c, const rg_coll *a) {
    size_t n = (size_t)a->count * rg_comm_dtype_size(a->dt), all = n * (size_t)c->size;
    layout l = {0};
    switch (a->kind) {
    case RG_COLL_ALLREDUCE:
    case RG_COLL_BROADCAST:
        l.recv = n, l.recv_in = l.recv_out = true;
        break;
    case RG_COLL_ALLGATHER:
        l.send = n, l.recv = all, l.recv_out = true;
        l.send_off = (size_t)c->rank * n;
        l.send_in_recv = (const char *)a->send == (const char *)a->recv + l.send_off;
        break;
    case RG_COLL_REDUCE_SCATTER:
        l.send = all, l.recv = n, l.recv_out = true;
        break;
    case RG_COLL_SEND:
        l.send = n;
        break;
    case RG_COLL_RECV:
        l.recv = n, l.recv_out = true;
        break;
    default: /* barrier, open, close: no data */
        break;
    }
    return l;
}

void rg_comm_dev_submit(rg_comm_req *r) {
    const rg_coll *a = &r->coll;
    layout l = layout_of(r->comm, a);
    r->device = -1;
    if (l.send + l.recv == 0) return;
    int ds = l.send ? device_of(a->send) : -2, dr = l.recv ? device_of(a->recv) : -2;
    RG_CHECK(ds == -2 || dr == -2 || ds == dr,
             "rg_comm_%s: send and recv must both be host memory or both on one GPU (send on "
             "device %d, recv on device %d; -1 is the host)",
             rg_coll_kind_name(a->kind), ds, dr);
    r->device = ds > dr ? ds : dr;
    if (r->device < 0) return;
    int prev = rg_dist_cuda_use(r->device);
    cudaEvent_t ready;
    RG_DIST_CUDA_FATAL(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    RG_DIST_CUDA_FATAL(cudaEventRecord(ready, rg_cuda_stream(r->device, RG_CUDA_STREAM_COMPUTE)));
    rg_dist_cuda_use(prev);
    r->ready_ev = ready;
}

void rg_comm_dev_finish(rg_comm_req *r) {
    if (r->done_ev) {
        cudaStream_t compute = rg_cuda_stream(r->device, RG_CUDA_STREAM_COMPUTE);
        RG_DIST_CUDA_FATAL(cudaStreamWaitEvent(compute, (cudaEvent_t)r->done_ev, 0));
        RG_DIST_CUDA_FATAL(cudaEventDestroy((cudaEvent_t)r->done_ev));
        r->done_ev = NULL;
    }
    if (r->ready_ev) {
        RG_DIST_CUDA_FATAL(cudaEventDestroy((cudaEvent_t)r->ready_ev));
        r->ready_ev = NULL;
    }
}

/* ---- the comm thread waits for its own device work, politely ---- */

typedef struct {
    cudaEvent_t ev;
    int device;
    const char *what;
} event_wait;

RG_NODISCARD static rg_status test_event(rg_comm *c, void *ctx, bool *done) {
    event_wait *w = ctx;
    if (c->ops->check) RG_TRY(c->ops->check(c));
    cudaError_t e = cudaEventQuery(w->ev);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* "not yet" is an answer, not an error */
        *done = false;
        return RG_OK;
    }
    RG_DIST_CUDA(e);
    *done = true;
    return RG_OK;
}

static void describe_event(rg_comm *c, void *ctx, double waited, char *buf, size_t cap) {
    event_wait *w = ctx;
    snprintf(buf, cap, "%s on rank %d has waited %.1f s for cuda:%d to finish it", w->what, c->rank,
             waited, w->device);
}

/* Waits for the work queued so far on device's comm stream. */
RG_NODISCARD static rg_status sync_comm_stream(rg_comm *c, int device, const char *what) {
    event_wait w = {NULL, device, what};
    RG_DIST_CUDA(cudaEventCreateWithFlags(&w.ev, cudaEventDisableTiming));
    cudaError_t e = cudaEventRecord(w.ev, rg_cuda_stream(device, RG_CUDA_STREAM_COMM));
    rg_status s = e == cudaSuccess ? rg_comm_poll(c, test_event, NULL, &w, describe_event, &w)
                                   : rg_dist_cuda_error(e, "cudaEventRecord");
    cudaEventDestroy(w.ev); /* allowed while pending: released once it completes */
    return s;
}

rg_status rg_comm_dev_sync(rg_comm *c, const char *what) {
    return sync_comm_stream(c, c->device, what);
}

/* ---- GPU buffers, device backend: ordered by events ---- */

RG_NODISCARD static rg_status run_on_device(rg_comm *c, rg_comm_req *r, rg_dispatch_fn run) {
    if (r->device != c->device)
        return rg_error(RG_EDEVICE,
                        "rg_comm_%s: the buffers are on cuda:%d, but rank %d's %s communicator "
                        "works on cuda:%d (one GPU per rank: the GPU of the local rank)",
                        rg_coll_kind_name(r->coll.kind), r->device, c->rank, c->ops->name,
                        c->device);
    rg_dist_cuda_use(c->device);
    cudaStream_t comm = rg_cuda_stream(c->device, RG_CUDA_STREAM_COMM);
    RG_DIST_CUDA(cudaStreamWaitEvent(comm, (cudaEvent_t)r->ready_ev, 0));
    RG_TRY(run(c, &r->coll));
    cudaEvent_t done;
    RG_DIST_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    r->done_ev = done; /* rg_comm_dev_finish releases it, whatever happens next */
    RG_DIST_CUDA(cudaEventRecord(done, comm));
    return RG_OK;
}

/* ---- buffers on the other side: staged through page-locked host memory ---- */

static size_t round_up(size_t n) {
    return (n + 255) & ~(size_t)255;
}

/* The collective as the backend sees it: the same call on a staging block laid out as
 * [recv][send], with send inside recv for an in-place allgather. */
static rg_coll staged_coll(const rg_coll *a, const layout *l, char *base) {
    rg_coll s = *a;
    s.recv = l->recv ? base : NULL;
    s.send = l->send_in_recv ? base + l->send_off : l->send ? base + round_up(l->recv) : NULL;
    return s;
}

static size_t staged_bytes(const layout *l) {
    return round_up(l->recv) + (l->send_in_recv ? 0 : l->send);
}

/* Copies the inputs of a (the caller's buffers) into b (staging), queued on stream s. */
RG_NODISCARD
static rg_status copy_inputs(const layout *l, const rg_coll *a, const rg_coll *b, cudaStream_t s) {
    if (l->recv_in) RG_DIST_CUDA(cudaMemcpyAsync(b->recv, a->recv, l->recv, cudaMemcpyDefault, s));
    if (l->send)
        RG_DIST_CUDA(cudaMemcpyAsync((void *)b->send, a->send, l->send, cudaMemcpyDefault, s));
    return RG_OK;
}

/* GPU data, host backend: the inputs come down once the caller's kernels have written them,
 * the backend runs on the host, and the results go back up. */
RG_NODISCARD
static rg_status run_through_host(rg_comm *c, rg_comm_req *r, const layout *l, char *host,
                                  rg_dispatch_fn run) {
    cudaStream_t s = rg_cuda_stream(r->device, RG_CUDA_STREAM_COMM);
    rg_coll h = staged_coll(&r->coll, l, host);
    RG_DIST_CUDA(cudaStreamWaitEvent(s, (cudaEvent_t)r->ready_ev, 0));
    RG_TRY(copy_inputs(l, &r->coll, &h, s));
    RG_TRY(sync_comm_stream(c, r->device, "copying a collective's inputs to the host"));
    RG_TRY(run(c, &h));
    if (!l->recv_out) return RG_OK;
    RG_DIST_CUDA(cudaMemcpyAsync(r->coll.recv, h.recv, l->recv, cudaMemcpyDefault, s));
    return sync_comm_stream(c, r->device, "copying a collective's results to the GPU");
}

/* Host data, device backend: host → page-locked → device scratch, the collective, and back. */
RG_NODISCARD
static rg_status run_through_device(rg_comm *c, rg_comm_req *r, const layout *l, char *host,
                                    char *gpu, rg_dispatch_fn run) {
    cudaStream_t s = rg_cuda_stream(c->device, RG_CUDA_STREAM_COMM);
    rg_coll h = staged_coll(&r->coll, l, host), d = staged_coll(&r->coll, l, gpu);
    if (l->recv_in) memcpy(h.recv, r->coll.recv, l->recv);
    if (l->send) memcpy((void *)h.send, r->coll.send, l->send);
    RG_TRY(copy_inputs(l, &h, &d, s));
    RG_TRY(run(c, &d));
    if (l->recv_out) RG_DIST_CUDA(cudaMemcpyAsync(h.recv, d.recv, l->recv, cudaMemcpyDefault, s));
    RG_TRY(sync_comm_stream(c, c->device, "a collective on host buffers"));
    if (l->recv_out) memcpy(r->coll.recv, h.recv, l->recv);
    return RG_OK;
}

RG_NODISCARD
static rg_status run_staged(rg_comm *c, rg_comm_req *r, const layout *l, rg_dispatch_fn run) {
    const bool to_device = c->ops->device_buffers;
    const int device = to_device ? c->device : r->device;
    const size_t bytes = staged_bytes(l);
    const rg_backend *be = rg_backend_for(RG_CUDA_DEVICE(device));
    rg_dist_cuda_use(device);
    char *host = be->host_alloc(bytes);
    char *gpu = to_device && host ? rg_cuda_alloc_on(device, bytes, RG_CUDA_STREAM_COMM) : NULL;
    rg_status s;
    if (!host || (to_device && !gpu))
        s = rg_error(RG_ENOMEM, "rg_comm_%s: out of %s memory for %zu bytes of staging",
                     rg_coll_kind_name(r->coll.kind), host ? "device" : "page-locked host", bytes);
    else if (to_device)
        s = run_through_device(c, r, l, host, gpu, run);
    else
        s = run_through_host(c, r, l, host, run);
    if (s == RG_ETIMEDOUT) return s; /* the device may still write them: keep both blocks */
    if (host) be->host_free(host, bytes);
    if (gpu) be->free(gpu, bytes);
    return s;
}

rg_status rg_comm_dev_run(rg_comm *c, rg_comm_req *r, rg_dispatch_fn run) {
    const bool gpu_data = r->device >= 0, gpu_backend = c->ops->device_buffers;
    const layout l = layout_of(c, &r->coll);
    if (l.send + l.recv == 0 || (!gpu_data && !gpu_backend)) return run(c, &r->coll);
    if (gpu_data && gpu_backend) return run_on_device(c, r, run);
    return run_staged(c, r, &l, run);
}
