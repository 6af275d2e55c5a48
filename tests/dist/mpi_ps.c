/* Parameter servers (dist/ps.c) through the C API, on both host comms: the last K ranks serve,
 * the rest push known gradients. With SGD (no momentum) at lr 0.5 and worker w's gradient
 * (w + 1)(i + 1) for element i, every step moves element i by 0.5 (i + 1) (W + 1) / 2: the
 * average over the W workers, for ps-sync and for ps-async at staleness 0. Rank 0's initial
 * weights reach everyone; a stop flag reaches every worker and server within the step; a bad K
 * or staleness fails on every rank with a message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mpi_ddp.h"

static rg_dist *dist;
static rg_comm *comms[2];
static int rank, size;

enum { NA = 10, NB = 3, STEPS = 3 };

typedef struct {
    rg_tensor *a, *b;
    rg_named_tensor items[2];
    rg_param_list list;
} params2;

static void params_init(params2 *p) {
    int64_t sa = NA, sb = NB;
    p->a = rg_tensor_new(RG_F32, 1, &sa, RG_CPU);
    p->b = rg_tensor_new(RG_F32, 1, &sb, RG_CPU);
    MT_CHECK(p->a && p->b, "%s", rg_last_error());
    for (int i = 0; i < NA; i++) ((float *)p->a->data)[i] = rank == 0 ? (float)i : -99.0f;
    for (int i = 0; i < NB; i++) ((float *)p->b->data)[i] = rank == 0 ? (float)(NA + i) : -99.0f;
    rg_tensor_set_requires_grad(p->a, true);
    rg_tensor_set_requires_grad(p->b, true);
    p->items[0] = (rg_named_tensor){.name = "a", .tensor = p->a};
    p->items[1] = (rg_named_tensor){.name = "b", .tensor = p->b};
    p->list = (rg_param_list){p->items, 2};
}

static void params_free(params2 *p) {
    rg_tensor_free(p->a);
    rg_tensor_free(p->b);
}

/* Parameter servers over p: SGD at lr 0.5, staleness 0. */
static rg_ps *ps_new(params2 *p, rg_comm *c, rg_ps_mode mode, int servers) {
    params_init(p);
    rg_ps *ps = rg_ps_new(&p->list, c, "sgd", "lr=0.5",
                          &(rg_ps_opts){.mode = mode, .servers = servers, .max_staleness = 0});
    MT_CHECK(ps, "rg_ps_new: %s", rg_last_error());
    return ps;
}

static void run(rg_comm *c, rg_ps_mode mode, int servers) {
    params2 p;
    rg_ps *ps = ps_new(&p, c, mode, servers);
    int W = size - servers;
    MT_CHECK(rg_ps_workers(ps) == W, "%d workers, want %d", rg_ps_workers(ps), W);
    MT_CHECK(rg_ps_is_server(ps) == (rank >= W), "rank %d: server %d", rank, rg_ps_is_server(ps));
    if (rg_ps_is_server(ps)) {
        int flags = -1;
        int64_t steps = -1;
        MT_OK(rg_ps_serve(ps, &flags, &steps));
        MT_CHECK(flags == 0 && steps == STEPS, "served %lld steps with flags %d", (long long)steps,
                 flags);
        MT_CHECK(rg_ps_optim(ps) != NULL, "a server has no optimizer");
    } else {
        MT_CHECK(rg_ps_optim(ps) == NULL && rg_ps_state_bytes(ps) == 0, "a worker has state");
        for (int t = 0; t < STEPS; t++) {
            for (int i = 0; i < NA + NB; i++) {
                rg_tensor *g = i < NA ? p.a->grad : p.b->grad;
                ((float *)g->data)[i < NA ? i : i - NA] = (float)((rank + 1) * (i + 1));
            }
            int seen = -1;
            MT_OK(rg_ps_push_pull(ps, 0, &seen));
            MT_CHECK(seen == 0, "step %d: flags %d seen", t, seen);
            for (int i = 0; i < NA + NB; i++) {
                float got = i < NA ? ((float *)p.a->data)[i] : ((float *)p.b->data)[i - NA];
                double want = i - (t + 1) * 0.5 * (i + 1) * (W + 1) / 2.0;
                MT_CHECK(fabs(got - want) <= 1e-5 * (1 + fabs(want)),
                         "%s %s K=%d step %d element %d: %g, want %g",
                         rg_comm_backend_name(rg_comm_kind(c)),
                         mode == RG_PS_SYNC ? "sync" : "async", servers, t, i, got, want);
            }
        }
        MT_CHECK(rg_ps_bytes_per_step(ps) >= 2 * 4 * (NA + NB), "bytes %lld",
                 (long long)rg_ps_bytes_per_step(ps));
        MT_OK(rg_ps_end(ps, 0));
    }
    int64_t hist[1];
    MT_OK(rg_ps_staleness_hist(ps, hist, 1));
    MT_CHECK(hist[0] == (int64_t)W * STEPS * servers, "histogram [%lld], want [%d]",
             (long long)hist[0], W * STEPS * servers);
    rg_ps_free(ps);
    params_free(&p);
}

/* fn on both comms, with every number of servers, sync and async */
static void each_setup(void (*fn)(rg_comm *c, rg_ps_mode mode, int servers)) {
    for (int b = 0; b < 2; b++)
        for (int k = 1; k < size; k++) {
            fn(comms[b], RG_PS_SYNC, k);
            fn(comms[b], RG_PS_ASYNC, k);
        }
}

static void test_sync_and_async_s0_step_on_the_average(void) {
    each_setup(run);
}

/* A stop (a signal, a non-finite loss) travels in-band: the last worker pushes flags 4 at step
 * 1; every worker sees them in that step's pull (sync, and async at staleness 0, where no reply
 * leaves before every push of the step has arrived), ends its period there, and every server
 * returns after 2 steps with the flags. Then a second period runs as usual. */
static void stop(rg_comm *c, rg_ps_mode mode, int servers) {
    params2 p;
    rg_ps *ps = ps_new(&p, c, mode, servers);
    int W = size - servers;
    const char *what = mode == RG_PS_SYNC ? "sync" : "async";
    for (int period = 0; period < 2; period++) {
        int want = period == 0 ? 4 : 0;
        if (rg_ps_is_server(ps)) {
            int flags = -1;
            int64_t steps = -1;
            MT_OK(rg_ps_serve(ps, &flags, &steps));
            MT_CHECK(flags == want && steps == (period == 0 ? 2 : STEPS),
                     "%s K=%d period %d: served %lld steps with flags %d", what, servers, period,
                     (long long)steps, flags);
            continue;
        }
        int t = 0, seen = 0;
        for (; t < STEPS && !seen; t++) {
            int mine = period == 0 && t == 1 && rank == W - 1 ? 4 : 0;
            MT_OK(rg_ps_push_pull(ps, mine, &seen));
        }
        MT_CHECK(seen == want && t == (period == 0 ? 2 : STEPS),
                 "%s K=%d period %d: worker %d stopped after %d steps, flags %d", what, servers,
                 period, rank, t, seen);
        MT_OK(rg_ps_end(ps, seen));
    }
    rg_ps_free(ps);
    params_free(&p);
}

static void test_a_stop_reaches_every_worker_and_server_in_band(void) {
    each_setup(stop);
}

/* rank 0's optimizer over p's tensors, as the servers' (SGD, momentum 0.9), for checkpoints */
static rg_optim *full_new(params2 *p) {
    rg_optim *o = rank == 0 ? rg_optim_new("sgd", &p->list, "lr=0.5,momentum=0.9") : NULL;
    MT_CHECK(rank != 0 || o, "%s", rg_last_error());
    return o;
}

/* Checkpoints: after 3 sync steps of SGD with momentum 0.9 on constant gradients (the average
 * g_i = (i + 1)(W + 1)/2), rg_ps_gather_state gives rank 0 what one process would hold: the
 * momentum buffer 2.71 g_i (g, 1.9 g, 2.71 g), 3 steps, lr 0.5, and the servers' weights. A
 * fresh set of servers given that state (rg_ps_scatter_state) gathers the same state back; async
 * runs the round trip too. */
static void checkpoint(rg_comm *c, rg_ps_mode mode, int servers) {
    params2 p;
    params_init(&p);
    rg_ps_opts o = {.mode = mode, .servers = servers};
    rg_ps *ps = rg_ps_new(&p.list, c, "sgd", "lr=0.5,momentum=0.9", &o);
    MT_CHECK(ps, "rg_ps_new: %s", rg_last_error());
    int W = size - servers;
    if (rg_ps_is_server(ps)) {
        MT_OK(rg_ps_serve(ps, NULL, NULL));
    } else {
        for (int t = 0; t < STEPS; t++) {
            for (int i = 0; i < NA + NB; i++)
                ((float *)(i < NA ? p.a->grad : p.b->grad)->data)[i < NA ? i : i - NA] =
                    (float)((rank + 1) * (i + 1));
            MT_OK(rg_ps_push_pull(ps, 0, NULL));
        }
        MT_OK(rg_ps_end(ps, 0));
    }
    rg_optim *full = full_new(&p);
    MT_OK(rg_ps_gather_state(ps, full));
    if (rank == 0) {
        MT_CHECK(rg_optim_num_steps(full) == (mode == RG_PS_SYNC ? STEPS : STEPS * W) &&
                     rg_optim_get_lr(full) == 0.5f,
                 "gathered: %lld steps, lr %g", (long long)rg_optim_num_steps(full),
                 (double)rg_optim_get_lr(full));
        for (int i = 0; mode == RG_PS_SYNC && i < NA + NB; i++) {
            const rg_named_tensor *b =
                rg_param_list_find(rg_optim_state(full), i < NA ? "optim.state.a.momentum_buffer"
                                                                : "optim.state.b.momentum_buffer");
            float got = rg_tensor_f32(b->tensor)[i < NA ? i : i - NA];
            double want = 2.71 * (i + 1) * (W + 1) / 2.0;
            MT_CHECK(fabs(got - want) <= 1e-5 * want, "K=%d momentum[%d] = %g, want %g", servers, i,
                     got, want);
        }
    }
    /* a fresh set of servers, given the state, holds the same */
    params2 q;
    params_init(&q);
    rg_ps *ps2 = rg_ps_new(&q.list, c, "sgd", "lr=0.5,momentum=0.9", &o);
    MT_CHECK(ps2, "rg_ps_new: %s", rg_last_error());
    MT_OK(rg_ps_scatter_state(ps2, full));
    rg_optim *again = full_new(&q);
    MT_OK(rg_ps_gather_state(ps2, again));
    for (int i = 0; rank == 0 && i < rg_optim_state(full)->n; i++) {
        const rg_named_tensor *x = &rg_optim_state(full)->items[i];
        const rg_tensor *y = rg_param_list_find(rg_optim_state(again), x->name)->tensor;
        MT_CHECK(memcmp(x->tensor->data, y->data, rg_tensor_nbytes(y)) == 0,
                 "%s differs after a scatter and a gather", x->name);
    }
    rg_optim_free(again);
    rg_optim_free(full);
    rg_ps_free(ps2);
    rg_ps_free(ps);
    params_free(&q);
    params_free(&p);
}

static void test_checkpoints_gather_and_scatter_the_servers_state(void) {
    each_setup(checkpoint);
}

static void test_bad_options_fail_on_every_rank(void) {
    params2 p;
    params_init(&p);
    rg_ps *ps = rg_ps_new(&p.list, comms[0], "sgd", "lr=0.5",
                          &(rg_ps_opts){.mode = RG_PS_SYNC, .servers = size});
    MT_CHECK(!ps && strstr(rg_last_error(), "--servers"), "K = size: %s", rg_last_error());
    ps = rg_ps_new(&p.list, comms[0], "sgd", "lr=0.5",
                   &(rg_ps_opts){.mode = RG_PS_ASYNC, .servers = 1, .max_staleness = -1});
    MT_CHECK(!ps && strstr(rg_last_error(), "--max-staleness"), "S = -1: %s", rg_last_error());
    ps = rg_ps_new(&p.list, comms[0], "lamb", "", &(rg_ps_opts){.mode = RG_PS_SYNC, .servers = 1});
    MT_CHECK(!ps, "an unknown optimizer was accepted");
    params_free(&p);
}

int main(int argc, char **argv) {
    dist = ddp_test_begin(&argc, &argv, comms, &rank, &size);
    MT_RUN(test_sync_and_async_s0_step_on_the_average);
    MT_RUN(test_a_stop_reaches_every_worker_and_server_in_band);
    MT_RUN(test_checkpoints_gather_and_scatter_the_servers_state);
    MT_RUN(test_bad_options_fail_on_every_rank);
    return ddp_test_end(dist, comms);
}
