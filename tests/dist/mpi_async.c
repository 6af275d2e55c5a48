/* Async requests complete in the order they were started, on one comm and across comms; and a
 * rank that calls a different collective (or leaves early) gets RG_EMISMATCH, not a hang. */
#include <stdio.h>
#include <unistd.h>

#include "dist_test.h"
#include "mpitest.h"

static rg_dist *dist;
static rg_comm *comms[2]; /* mpi, ring */
static int rank, size;

#define NREQ 8

static void fill(float *buf, int64_t n, int salt) {
    for (int64_t i = 0; i < n; i++) buf[i] = (float)dt_input(RG_COMM_F32, rank, i, salt);
}

static void check_sum(const float *buf, int64_t n, int salt, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) want += dt_input(RG_COMM_F32, r, i, salt);
        MT_CHECK(buf[i] == (float)want, "%s: element %lld is %g, want %g", what, (long long)i,
                 buf[i], want);
    }
}

/* Waits on the last request first: the others started earlier, so they must be done by then. */
static void test_async_requests_finish_in_order(void) {
    for (int b = 0; b < 2; b++) {
        float *bufs[NREQ];
        int64_t ns[NREQ] = {1 << 20, 3, 0, 100001, 1, 1 << 18, 7, 2};
        rg_comm_req *reqs[NREQ];
        for (int k = 0; k < NREQ; k++) {
            bufs[k] = dt_alloc(ns[k], RG_COMM_F32);
            fill(bufs[k], ns[k], k);
            MT_OK(rg_comm_allreduce_async(comms[b], bufs[k], ns[k], RG_COMM_F32, RG_REDUCE_SUM,
                                          &reqs[k]));
        }
        MT_OK(rg_comm_wait(reqs[NREQ - 1]));
        for (int k = 0; k < NREQ - 1; k++) {
            bool done = false;
            MT_OK(rg_comm_test(reqs[k], &done));
            MT_CHECK(done, "request %d of %d not done after the last one finished", k, NREQ);
        }
        for (int k = 0; k < NREQ - 1; k++) MT_OK(rg_comm_wait(reqs[k]));
        for (int k = 0; k < NREQ; k++) {
            check_sum(bufs[k], ns[k], k, "async allreduce");
            free(bufs[k]);
        }
    }
}

/* rg_comm_reduce_scatter_async interleaved with allreduces: in order, each rank's block of the
 * sum, exact (the inputs are small integers). ZeRO-1 launches its buckets this way. */
static void test_async_reduce_scatter_in_order_with_allreduces(void) {
    for (int b = 0; b < 2; b++) {
        const int64_t counts[3] = {1 << 18, 5, 100003}; /* per rank */
        float *send[3], *recv[3], *ar = dt_alloc(1000, RG_COMM_F32);
        rg_comm_req *reqs[4];
        fill(ar, 1000, 99);
        for (int k = 0; k < 3; k++) {
            send[k] = dt_alloc(counts[k] * size, RG_COMM_F32);
            recv[k] = dt_alloc(counts[k], RG_COMM_F32);
            fill(send[k], counts[k] * size, 10 + k);
            MT_OK(rg_comm_reduce_scatter_async(comms[b], send[k], recv[k], counts[k], RG_COMM_F32,
                                               RG_REDUCE_SUM, &reqs[k]));
            if (k == 1)
                MT_OK(rg_comm_allreduce_async(comms[b], ar, 1000, RG_COMM_F32, RG_REDUCE_SUM,
                                              &reqs[3]));
        }
        MT_OK(rg_comm_wait(reqs[2])); /* the last started: the others are done by now */
        bool done = false;
        MT_OK(rg_comm_test(reqs[0], &done));
        MT_CHECK(done, "%s: an earlier reduce-scatter not done after a later one's wait",
                 rg_comm_backend_name(rg_comm_kind(comms[b])));
        MT_OK(rg_comm_wait(reqs[0]));
        MT_OK(rg_comm_wait(reqs[1]));
        MT_OK(rg_comm_wait(reqs[3]));
        check_sum(ar, 1000, 99, "allreduce between reduce-scatters");
        for (int k = 0; k < 3; k++) {
            for (int64_t i = 0; i < counts[k]; i++) {
                int64_t at = (int64_t)rank * counts[k] + i;
                double want = 0;
                for (int r = 0; r < size; r++) want += dt_input(RG_COMM_F32, r, at, 10 + k);
                MT_CHECK(recv[k][i] == (float)want,
                         "%s reduce-scatter %d: element %lld is %g, want %g",
                         rg_comm_backend_name(rg_comm_kind(comms[b])), k, (long long)i, recv[k][i],
                         want);
            }
            free(send[k]);
            free(recv[k]);
        }
        free(ar);
    }
}

/* A blocking call queued after async ones on another comm returns after all of them. */
static void test_blocking_call_waits_for_earlier_async_on_any_comm(void) {
    int64_t n = 1 << 19;
    float *a = dt_alloc(n, RG_COMM_F32), *b = dt_alloc(n, RG_COMM_F32);
    fill(a, n, 1);
    fill(b, n, 2);
    rg_comm_req *ra, *rb;
    MT_OK(rg_comm_allreduce_async(comms[0], a, n, RG_COMM_F32, RG_REDUCE_SUM, &ra));
    MT_OK(rg_comm_allreduce_async(comms[1], b, n, RG_COMM_F32, RG_REDUCE_SUM, &rb));
    MT_OK(rg_comm_barrier(comms[0]));
    bool da = false, db = false;
    MT_OK(rg_comm_test(ra, &da));
    MT_OK(rg_comm_test(rb, &db));
    MT_CHECK(da && db, "earlier requests done: mpi %d, ring %d", da, db);
    MT_OK(rg_comm_wait(rb));
    MT_OK(rg_comm_wait(ra));
    check_sum(a, n, 1, "mpi");
    check_sum(b, n, 2, "ring");
    free(a);
    free(b);
}

static void test_test_reports_unfinished_request(void) {
    /* Rank 0 holds back: the others' request cannot finish until it joins. */
    float x = 1;
    rg_comm_req *r;
    if (rank == 0) usleep(200 * 1000);
    MT_OK(rg_comm_allreduce_async(comms[0], &x, 1, RG_COMM_F32, RG_REDUCE_SUM, &r));
    bool done = true;
    MT_OK(rg_comm_test(r, &done));
    if (rank != 0) MT_CHECK(!done, "finished before rank 0 joined");
    MT_OK(rg_comm_wait(r));
    MT_CHECK(x == (float)size, "sum %g", x);
}

/* ---- mismatched calls ---- */

static void expect_mismatch(rg_status s, const char *want_a, const char *want_b) {
    const char *msg = rg_last_error();
    MT_CHECK(s == RG_EMISMATCH, "got %s: %s", rg_status_name(s), msg);
    MT_CHECK(strstr(msg, want_a) && strstr(msg, want_b), "message \"%s\" lacks \"%s\" or \"%s\"",
             msg, want_a, want_b);
}

static void test_mismatched_counts_fail_on_every_rank(void) {
    rg_comm *c;
    MT_OK(rg_comm_new(dist, RG_COMM_RING, &c));
    float buf[11] = {0};
    rg_status s = rg_comm_allreduce(c, buf, rank == 0 ? 10 : 11, RG_COMM_F32, RG_REDUCE_SUM);
    expect_mismatch(s, "rank 0 called allreduce(10 x f32, sum)",
                    "rank 1 called allreduce(11 x f32, sum)");
    /* The comm is broken from now on: the next call fails at once with the first error. */
    s = rg_comm_barrier(c);
    expect_mismatch(s, "broken", "allreduce(10 x f32, sum)");
    rg_comm_free(c);
}

static void test_mismatched_kinds_fail_on_every_rank(void) {
    rg_comm *c;
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &c));
    int64_t v = 5;
    rg_status s =
        rank == size - 1 ? rg_comm_broadcast(c, &v, 1, RG_COMM_I64, 0) : rg_comm_barrier(c);
    char want[64];
    snprintf(want, sizeof want, "rank %d called broadcast(1 x i64, root 0)", size - 1);
    expect_mismatch(s, "rank 0 called barrier", want);
    rg_comm_free(c);
}

/* The last rank frees the comm while the others reduce on it: they learn it at once. */
static void test_rank_leaving_early_is_a_mismatch(void) {
    rg_comm *c;
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &c));
    if (rank == size - 1) {
        rg_comm_free(c);
        return;
    }
    float x = 1;
    char want[64];
    snprintf(want, sizeof want, "rank %d called close", size - 1);
    expect_mismatch(rg_comm_allreduce(c, &x, 1, RG_COMM_F32, RG_REDUCE_SUM), "allreduce", want);
    rg_comm_free(c);
}

int main(int argc, char **argv) {
    dist = rg_dist_init(&argc, &argv);
    MT_CHECK(dist, "rg_dist_init: %s", rg_last_error());
    rank = rg_dist_rank(dist), size = rg_dist_size(dist);
    MT_OK(rg_comm_new(dist, RG_COMM_MPI, &comms[0]));
    MT_OK(rg_comm_new(dist, RG_COMM_RING, &comms[1]));

    MT_RUN(test_async_requests_finish_in_order);
    MT_RUN(test_async_reduce_scatter_in_order_with_allreduces);
    MT_RUN(test_blocking_call_waits_for_earlier_async_on_any_comm);
    MT_RUN(test_test_reports_unfinished_request);
    MT_RUN(test_mismatched_counts_fail_on_every_rank);
    MT_RUN(test_mismatched_kinds_fail_on_every_rank);
    MT_RUN(test_rank_leaving_early_is_a_mismatch);

    rg_comm_free(comms[0]);
    rg_comm_free(comms[1]);
    MT_OK(rg_dist_finalize(dist));
    return mt_report();
}
