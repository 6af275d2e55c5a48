/* comm_self.c — the backend of a world of one (a program not started by mpirun): every
 * collective over a single rank is the identity, or a copy when it has separate buffers. No MPI
 * call is made, so a single process never depends on MPI start-up. */
#include <string.h>

#include "dist/comm_impl.h"

RG_NODISCARD static rg_status self_init(rg_comm *c) {
    return RG_OK;
}
static void self_deinit(rg_comm *c) {}

/* The sum over one rank is the rank's own data, and so is the average. */
RG_NODISCARD static rg_status self_allreduce(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt,
                                rg_reduce_op op) {
    return RG_OK;
}

RG_NODISCARD
static rg_status self_broadcast(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int root) {
    return RG_OK;
}

RG_NODISCARD
static rg_status self_copy(const void *send, void *recv, int64_t count, rg_comm_dtype dt) {
    if (send != recv) memmove(recv, send, (size_t)count * rg_comm_dtype_size(dt));
    return RG_OK;
}

RG_NODISCARD
static rg_status self_allgather(rg_comm *c, const void *send, void *recv, int64_t count,
                                rg_comm_dtype dt) {
    return self_copy(send, recv, count, dt);
}

RG_NODISCARD
static rg_status self_reduce_scatter(rg_comm *c, const void *send, void *recv, int64_t count,
                                     rg_comm_dtype dt, rg_reduce_op op) {
    return self_copy(send, recv, count, dt);
}

RG_NODISCARD static rg_status self_barrier(rg_comm *c) {
    return RG_OK;
}

/* Unreachable: comm.c refuses a message to oneself, the only peer there is. */
RG_NODISCARD
static rg_status self_send(rg_comm *c, const void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    return rg_error(RG_EINVAL, "rg_comm_send: a world of one has no peer");
}

RG_NODISCARD
static rg_status self_recv(rg_comm *c, void *buf, int64_t count, rg_comm_dtype dt, int peer,
                           int tag) {
    return rg_error(RG_EINVAL, "rg_comm_recv: a world of one has no peer");
}

const rg_comm_ops rg_comm_self_ops = {
    .name = "self",
    .init = self_init,
    .deinit = self_deinit,
    .allreduce = self_allreduce,
    .broadcast = self_broadcast,
    .allgather = self_allgather,
    .reduce_scatter = self_reduce_scatter,
    .barrier = self_barrier,
    .send = self_send,
    .recv = self_recv,
};
