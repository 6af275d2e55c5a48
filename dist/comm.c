/* comm.c — the public face of the communicator: names, argument checks, and turning each call
 * into a request for the comm thread.
 *
 * A blocking call keeps its request on its own stack, queues it and sleeps until the comm thread
 * is done with it, so it allocates nothing. An async call allocates its request, queues it and
 * returns it as the handle; rg_comm_wait frees it. */
#include <stdlib.h>
#include <string.h>

#include "dist/comm_impl.h"

static const char *const backend_names[] = {"mpi", "ring", "nccl"};
_Static_assert(sizeof backend_names / sizeof *backend_names == RG_COMM_BACKEND_COUNT,
               "a name per backend");

static const size_t dtype_sizes[] = {4, 2, 4, 8, 1};
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == RG_COMM_DTYPE_COUNT, "a size per dtype");

static const char *const kind_names[] = {"allreduce",      "broadcast", "allgather",
                                         "reduce_scatter", "barrier",   "send",
                                         "recv",           "open",      "close"};
_Static_assert(sizeof kind_names / sizeof *kind_names == RG_COLL_KIND_COUNT, "a name per kind");

rg_status rg_comm_backend_parse(const char *name, rg_comm_backend *out) {
    for (int b = 0; name && b < RG_COMM_BACKEND_COUNT; b++) {
        if (strcmp(name, backend_names[b]) == 0) {
            *out = (rg_comm_backend)b;
            return RG_OK;
        }
    }
    return rg_error(RG_EINVAL, "comm backend \"%s\": unknown; choose mpi, ring or nccl",
                    name ? name : "(null)");
}

const char *rg_comm_backend_name(rg_comm_backend b) {
    return (unsigned)b < RG_COMM_BACKEND_COUNT ? backend_names[b] : "?";
}

size_t rg_comm_dtype_size(rg_comm_dtype dt) {
    RG_CHECK((unsigned)dt < RG_COMM_DTYPE_COUNT, "comm: bad dtype %d", (int)dt);
    return dtype_sizes[dt];
}

const char *rg_coll_kind_name(rg_coll_kind k) {
    return (unsigned)k < RG_COLL_KIND_COUNT ? kind_names[k] : "?";
}

bool rg_coll_is_collective(rg_coll_kind k) {
    return k != RG_COLL_SEND && k != RG_COLL_RECV;
}

/* ---- queries ---- */

int rg_comm_rank(const rg_comm *c) {
    return c->rank;
}
int rg_comm_size(const rg_comm *c) {
    return c->size;
}
int rg_comm_local_rank(const rg_comm *c) {
    return c->local_rank;
}
int rg_comm_local_size(const rg_comm *c) {
    return c->local_size;
}
rg_comm_backend rg_comm_kind(const rg_comm *c) {
    return c->kind;
}

/* ---- argument checks: misuse stops here, on the calling thread, naming the call ---- */

static void check_buffer(const rg_comm *c, const char *what, const void *buf, int64_t count,
                         rg_comm_dtype dt) {
    RG_CHECK(c, "%s: NULL communicator", what);
    RG_CHECK((unsigned)dt < RG_COMM_DTYPE_COUNT, "%s: bad dtype %d", what, (int)dt);
    RG_CHECK(count >= 0, "%s: negative count %lld", what, (long long)count);
    RG_CHECK(count <= INT64_MAX / 8 / c->size, "%s: count %lld is too large", what,
             (long long)count);
    RG_CHECK(buf || count == 0, "%s: NULL buffer for %lld elements", what, (long long)count);
}

static void check_op(const char *what, rg_comm_dtype dt, rg_reduce_op op) {
    RG_CHECK((unsigned)op < RG_REDUCE_OP_COUNT, "%s: bad reduce op %d", what, (int)op);
    RG_CHECK(op != RG_REDUCE_AVG || dt == RG_COMM_F32 || dt == RG_COMM_F16,
             "%s: AVG needs F32 or F16 data", what);
}

static void check_peer(const rg_comm *c, const char *what, int peer) {
    RG_CHECK(peer >= 0 && peer < c->size, "%s: rank %d is not in a world of %d", what, peer,
             c->size);
}

/* ---- requests ---- */

RG_NODISCARD static rg_status run_blocking(rg_comm *c, rg_coll coll) {
    rg_comm_req r = {.comm = c, .coll = coll};
    return rg_comm_run(&r);
}

rg_status rg_comm_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                            rg_reduce_op op) {
    check_buffer(c, "rg_comm_allreduce", buf, count, dt);
    check_op("rg_comm_allreduce", dt, op);
    return run_blocking(
        c, (rg_coll){.kind = RG_COLL_ALLREDUCE, .recv = buf, .count = count, .dt = dt, .op = op});
}

rg_status rg_comm_allreduce_async(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                  rg_reduce_op op, rg_comm_req **req) {
    return rg_comm_allreduce_launch(c, buf, count, dt, op, false, req);
}

/* Queues `coll` as a heap request for rg_comm_wait. */
RG_NODISCARD static rg_status launch(rg_comm *c, rg_coll coll, bool waited, rg_comm_req **req,
                                     const char *what) {
    RG_CHECK(req, "%s: NULL req", what);
    *req = NULL;
    rg_comm_req *r = calloc(1, sizeof *r);
    if (!r) return rg_error(RG_ENOMEM, "%s: out of memory for a request", what);
    *r = (rg_comm_req){.comm = c, .heap = true, .coll = coll};
    rg_comm_submit(r, waited);
    *req = r;
    return RG_OK;
}

rg_status rg_comm_allreduce_launch(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                   rg_reduce_op op, bool waited, rg_comm_req **req) {
    check_buffer(c, "rg_comm_allreduce_async", buf, count, dt);
    check_op("rg_comm_allreduce_async", dt, op);
    return launch(
        c, (rg_coll){.kind = RG_COLL_ALLREDUCE, .recv = buf, .count = count, .dt = dt, .op = op},
        waited, req, "rg_comm_allreduce_async");
}

rg_status rg_comm_reduce_scatter_async(rg_comm *c, const void *send, void *recv, int64_t count,
                                       rg_comm_dtype dt, rg_reduce_op op, rg_comm_req **req) {
    return rg_comm_reduce_scatter_launch(c, send, recv, count, dt, op, false, req);
}

rg_status rg_comm_reduce_scatter_launch(rg_comm *c, const void *send, void *recv, int64_t count,
                                        rg_comm_dtype dt, rg_reduce_op op, bool waited,
                                        rg_comm_req **req) {
    check_buffer(c, "rg_comm_reduce_scatter_async: send", send, count, dt);
    check_buffer(c, "rg_comm_reduce_scatter_async: recv", recv, count, dt);
    check_op("rg_comm_reduce_scatter_async", dt, op);
    return launch(c,
                  (rg_coll){.kind = RG_COLL_REDUCE_SCATTER,
                            .send = send,
                            .recv = recv,
                            .count = count,
                            .dt = dt,
                            .op = op},
                  waited, req, "rg_comm_reduce_scatter_async");
}

rg_status rg_comm_wait(rg_comm_req *req) {
    RG_CHECK(req && req->heap, "rg_comm_wait: not a request from an async call");
    rg_status s = rg_comm_req_finish(req);
    free(req);
    return s;
}

rg_status rg_comm_test(rg_comm_req *req, bool *done) {
    RG_CHECK(req && req->heap && done, "rg_comm_test: NULL argument");
    rg_dist *d = req->dist;
    pthread_mutex_lock(&d->mu);
    *done = req->done;
    pthread_mutex_unlock(&d->mu);
    return RG_OK;
}

rg_status rg_comm_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root) {
    check_buffer(c, "rg_comm_broadcast", buf, count, dt);
    check_peer(c, "rg_comm_broadcast: root", root);
    return run_blocking(
        c,
        (rg_coll){.kind = RG_COLL_BROADCAST, .recv = buf, .count = count, .dt = dt, .peer = root});
}

rg_status rg_comm_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                            rg_comm_dtype dt) {
    check_buffer(c, "rg_comm_allgather: send", send, count, dt);
    check_buffer(c, "rg_comm_allgather: recv", recv, count, dt);
    return run_blocking(
        c,
        (rg_coll){.kind = RG_COLL_ALLGATHER, .send = send, .recv = recv, .count = count, .dt = dt});
}

rg_status rg_comm_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                 rg_comm_dtype dt, rg_reduce_op op) {
    check_buffer(c, "rg_comm_reduce_scatter: send", send, count, dt);
    check_buffer(c, "rg_comm_reduce_scatter: recv", recv, count, dt);
    check_op("rg_comm_reduce_scatter", dt, op);
    return run_blocking(c, (rg_coll){.kind = RG_COLL_REDUCE_SCATTER,
                                     .send = send,
                                     .recv = recv,
                                     .count = count,
                                     .dt = dt,
                                     .op = op});
}

rg_status rg_comm_barrier(rg_comm *c) {
    RG_CHECK(c, "rg_comm_barrier: NULL communicator");
    return run_blocking(c, (rg_coll){.kind = RG_COLL_BARRIER});
}

static void check_p2p(const rg_comm *c, const char *what, const void *buf, int64_t count,
                      rg_comm_dtype dt, int peer, int tag) {
    check_buffer(c, what, buf, count, dt);
    check_peer(c, what, peer);
    RG_CHECK(peer != c->rank, "%s: rank %d cannot message itself through the comm thread", what,
             peer);
    RG_CHECK(tag >= 0 && tag < RG_COMM_TAG_MAX, "%s: tag %d is outside [0, %d)", what, tag,
             RG_COMM_TAG_MAX);
}

rg_status rg_comm_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                       int tag) {
    check_p2p(c, "rg_comm_send", buf, count, dt, peer, tag);
    return run_blocking(
        c,
        (rg_coll){
            .kind = RG_COLL_SEND, .send = buf, .count = count, .dt = dt, .peer = peer, .tag = tag});
}

rg_status rg_comm_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer, int tag) {
    if (peer == RG_COMM_ANY_SOURCE) {
        RG_CHECK(c, "rg_comm_recv: NULL communicator");
        if (c->kind == RG_COMM_NCCL)
            return rg_error(RG_ENOTSUP, "rg_comm_recv: nccl cannot receive from any source");
        check_p2p(c, "rg_comm_recv", buf, count, dt, c->rank == 0 ? 1 : 0, tag);
    } else {
        check_p2p(c, "rg_comm_recv", buf, count, dt, peer, tag);
    }
    return run_blocking(
        c,
        (rg_coll){
            .kind = RG_COLL_RECV, .recv = buf, .count = count, .dt = dt, .peer = peer, .tag = tag});
}

/* ---- lifecycle ---- */

static const rg_comm_ops *ops_for(const rg_dist *d, rg_comm_backend b) {
    if (b == RG_COMM_NCCL) return &rg_comm_nccl_ops; /* NCCL runs a world of one by itself */
    if (!d->launched) return &rg_comm_self_ops;
    return b == RG_COMM_RING ? &rg_comm_ring_ops : &rg_comm_mpi_ops;
}

RG_NODISCARD static rg_status comm_open(rg_dist *d, rg_comm_backend b, int color, int key,
                                        rg_comm **out);

rg_status rg_comm_new(rg_dist *d, rg_comm_backend b, rg_comm **out) {
    return comm_open(d, b, -1, 0, out);
}

rg_status rg_comm_split(rg_comm *world, int color, int key, rg_comm **out) {
    RG_CHECK(world && out, "rg_comm_split: NULL argument");
    RG_CHECK(world->split_color < 0, "rg_comm_split: only a comm over the whole world splits");
    RG_CHECK(color >= 0, "rg_comm_split: color %d < 0", color);
    if (world->size == 1) return comm_open(world->dist, world->kind, -1, 0, out);
    return comm_open(world->dist, world->kind, color, key, out);
}

static rg_status comm_open(rg_dist *d, rg_comm_backend b, int color, int key, rg_comm **out) {
    RG_CHECK(d && out, "rg_comm_new: NULL argument");
    RG_CHECK((unsigned)b < RG_COMM_BACKEND_COUNT, "rg_comm_new: bad backend %d", (int)b);
    *out = NULL;
    rg_comm *c = calloc(1, sizeof *c);
    if (!c) return rg_error(RG_ENOMEM, "rg_comm_new: out of memory");
    *c = (rg_comm){.dist = d,
                   .ops = ops_for(d, b),
                   .kind = b,
                   .rank = d->rank,
                   .size = d->size,
                   .local_rank = d->local_rank,
                   .local_size = d->local_size,
                   .device = -1,
                   .split_color = color,
                   .split_key = key,
                   .mpi = MPI_COMM_NULL,
                   .control = MPI_COMM_NULL};
    rg_status s = run_blocking(c, (rg_coll){.kind = RG_COLL_OPEN});
    if (s != RG_OK) {
        free(c);
        return s;
    }
    *out = c;
    return RG_OK;
}

/* Closes c and returns how it went; the comm thread frees what MPI no longer uses. */
rg_status rg_comm_close(rg_comm *c) {
    rg_status s = run_blocking(c, (rg_coll){.kind = RG_COLL_CLOSE});
    free(c);
    return s;
}

void rg_comm_free(rg_comm *c) {
    if (!c) return;
    RG_CHECK(c != c->dist->comm, "rg_comm_free: the dist's own comm is freed by rg_dist_finalize");
    RG_IGNORE(rg_comm_close(c)); /* a void free has no one to report to */
}
