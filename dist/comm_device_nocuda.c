/* comm_device_nocuda.c — comm_device.c of a build without CUDA: every buffer is host memory, so
 * every request runs as it is. dist/cuda/comm_device.c replaces this file in CUDA builds. */
#include "dist/comm_impl.h"

void rg_comm_dev_submit(rg_comm_req *r) {
    r->device = -1;
}

rg_status rg_comm_dev_run(rg_comm *c, rg_comm_req *r, rg_dispatch_fn run) {
    return run(c, &r->coll);
}

void rg_comm_dev_finish(rg_comm_req *r) {}

/* Unreachable: only a device backend syncs, and this build has none. */
rg_status rg_comm_dev_sync(rg_comm *c, const char *what) {
    return rg_error(RG_ENOTSUP, "%s: this build of ringgrad has no CUDA", what);
}
