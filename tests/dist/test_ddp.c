/* The DDP reducer in a world of one (no mpirun): the gradients are the plain backward's, bit for
 * bit; misuse that would make a round of buckets go out of step with the other ranks stops with
 * a message (a parameter's gradient made final twice in one round, which is also what a second
 * model's backward in the same step scope does); rg_ddp_free is safe with buckets in flight. The
 * reducer across ranks is tested by mpi_ddp.c and mpi_ddp_modes.c. */
#include <stdlib.h>

#include "rgtest.h"

static void no_launcher(void) {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMI_RANK");
    unsetenv("RG_COMM");
}

TestSuite(dist_ddp, .init = no_launcher);

/* Two layers, w1 (4,3) then w2 (2,4), as a registration-ordered list. */
typedef struct {
    rg_tensor *w1, *w2, *x;
    rg_named_tensor items[2];
    rg_param_list list;
} net2;

static void net2_init(net2 *n, uint64_t seed) {
    n->w1 = rgt_param(RG_SHAPE(4, 3), -1, 1, seed);
    n->w2 = rgt_param(RG_SHAPE(2, 4), -1, 1, seed + 1);
    n->x = rgt_uniform(RG_SHAPE(5, 3), -1, 1, seed + 2);
    n->items[0] = (rg_named_tensor){.name = "fc1.weight", .tensor = n->w1};
    n->items[1] = (rg_named_tensor){.name = "fc2.weight", .tensor = n->w2};
    n->list = (rg_param_list){.items = n->items, .n = 2};
}

static rg_tensor *net2_loss(net2 *n) {
    return rg_sum(rg_linear(rg_relu(rg_linear(n->x, n->w1, NULL)), n->w2, NULL));
}

static void net2_free(net2 *n) {
    rgt_free_all(3, (rg_tensor *[]){n->w1, n->w2, n->x});
}

Test(dist_ddp, world_of_one_gradients_are_the_plain_backwards) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    cr_assert(d, "%s", rg_last_error());
    net2 a, b;
    net2_init(&a, 10);
    net2_init(&b, 10);
    rg_ddp *ddp = rg_ddp_new(&a.list, rg_dist_comm(d), NULL);
    cr_assert(ddp, "%s", rg_last_error());
    cr_assert_eq(rg_ddp_num_buckets(ddp), 1);
    for (int step = 0; step < 2; step++) { /* the second step accumulates onto the first */
        rg_scope_begin();
        rg_backward(net2_loss(&a));
        cr_assert_eq(rg_ddp_wait(ddp), RG_OK);
        rg_scope_end();
        rg_scope_begin();
        rg_backward(net2_loss(&b));
        rg_scope_end();
        cr_assert_arr_eq(rg_tensor_f32(a.w1->grad), rg_tensor_f32(b.w1->grad), 12 * sizeof(float));
        cr_assert_arr_eq(rg_tensor_f32(a.w2->grad), rg_tensor_f32(b.w2->grad), 8 * sizeof(float));
    }
    rg_ddp_free(ddp);
    net2_free(&a);
    net2_free(&b);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_ddp, a_second_backward_before_the_wait_stops_with_a_message, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    net2 a;
    net2_init(&a, 20);
    rg_ddp *ddp = rg_ddp_new(&a.list, rg_dist_comm(d), NULL);
    cr_assert(ddp);
    rg_scope_begin();
    rg_backward(net2_loss(&a));
    rg_scope_end();
    rgt_expect_fatal("fc2.weight: its gradient was final twice before rg_ddp_wait");
    rg_scope_begin();
    rg_backward(net2_loss(&a)); /* the buckets already went out with the first gradients */
}

Test(dist_ddp, another_models_backward_in_the_same_scope_leaves_the_reducer_alone) {
    /* b's backward fires only the hooks of parameters b's loss depends on, so it cannot start a
     * reduction round of a's buckets that nobody waits for. */
    rg_dist *d = rg_dist_init(NULL, NULL);
    net2 a, b;
    net2_init(&a, 30);
    net2_init(&b, 40);
    rg_ddp *ddp = rg_ddp_new(&a.list, rg_dist_comm(d), NULL);
    cr_assert(ddp);
    rg_scope_begin();
    rg_tensor *la = net2_loss(&a), *lb = net2_loss(&b);
    rg_backward(la);
    cr_assert_eq(rg_ddp_wait(ddp), RG_OK);
    rg_backward(lb);
    cr_assert_eq(rg_ddp_num_launched(ddp), 0, "b's backward launched a's buckets");
    rg_scope_end();
    rg_scope_begin();
    rg_backward(net2_loss(&a));
    cr_assert_eq(rg_ddp_wait(ddp), RG_OK);
    rg_scope_end();
    rg_ddp_free(ddp);
    net2_free(&a);
    net2_free(&b);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_ddp, free_with_buckets_in_flight_waits_for_them) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    net2 a;
    net2_init(&a, 50);
    rg_ddp *ddp = rg_ddp_new(&a.list, rg_dist_comm(d), NULL);
    rg_scope_begin();
    rg_backward(net2_loss(&a)); /* launches the bucket; no wait */
    rg_scope_end();
    cr_assert_eq(rg_ddp_num_launched(ddp), 1);
    float g[8];
    rg_tensor_copy_to_host(a.w2->grad, g);
    rg_ddp_free(ddp);
    cr_assert(a.w2->grad->flags & RG_TENSOR_OWNS_DATA, "an ordinary gradient again");
    cr_assert_arr_eq(rg_tensor_f32(a.w2->grad), g, sizeof g);
    net2_free(&a);
    cr_assert_eq(rg_dist_finalize(d), RG_OK);
}

Test(dist_ddp, free_null_is_a_no_op) {
    rg_ddp_free(NULL);
}

Test(dist_ddp, null_parameters_stop_with_a_message, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    rgt_expect_fatal("rg_ddp_new: NULL");
    rg_ddp_new(NULL, rg_dist_comm(d), NULL);
}

/* A negative or NaN option used to become its default without a word. */
Test(dist_ddp, negative_bucket_size_stops_with_a_message, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    rg_model *net = rg_model_mlp(1);
    rgt_expect_fatal("bucket_mb -5, first_bucket_mb 0: sizes in MiB");
    rg_ddp_new(rg_model_params(net), rg_dist_comm(d), &(rg_ddp_opts){.bucket_mb = -5});
}

Test(dist_ddp, negative_accumulation_stops_with_a_message, .signal = SIGABRT) {
    rg_dist *d = rg_dist_init(NULL, NULL);
    rg_model *net = rg_model_mlp(1);
    rgt_expect_fatal("ddp: accum_steps -2");
    rg_ddp_new(rg_model_params(net), rg_dist_comm(d), &(rg_ddp_opts){.accum_steps = -2});
}
