/* train.c — a complete data-parallel training loop against ringgrad's C API.
 * Runs alone or as `mpirun -np N ./train`; the README shows this file verbatim. */
#include <ringgrad.h>
#include <stdio.h>

int main(int argc, char **argv) {
    rg_dist *dist = rg_dist_init(&argc, &argv); /* a world of 1 without mpirun */
    if (!dist) return fprintf(stderr, "%s\n", rg_last_error()), 1;
    rg_comm *comm = rg_dist_comm(dist);

    rg_dataset *ds;
    if (rg_dataset_fmnist(rg_data_default_dir(), RG_SPLIT_TRAIN, &ds) != RG_OK &&
        rg_dataset_synthetic(&(rg_synthetic_opts){.n = 4096, .seed = 1}, &ds) != RG_OK)
        return fprintf(stderr, "%s\n", rg_last_error()), 1;

    rg_model *net = rg_model_cnn(42);
    rg_ddp *ddp = rg_ddp_new(rg_model_params(net), comm, &(rg_ddp_opts){.bucket_mb = 25});
    if (!ddp) return fprintf(stderr, "%s\n", rg_last_error()), 1; /* e.g. models differ */
    rg_optim *opt = rg_adam_new(rg_model_params(net), &(rg_adam_opts){.lr = 1e-3f});
    rg_loader *train = rg_loader_new(ds, &(rg_loader_opts){
        .batch = 64, .shuffle = true, .seed = 1,
        .rank = rg_comm_rank(comm), .world = rg_comm_size(comm)});

    for (int step = 0; step < 20; step++) {
        rg_batch b;
        if (!rg_loader_next(train, &b)) continue; /* end of epoch: the next call starts another */
        rg_scope_begin();
        rg_tensor *loss = rg_cross_entropy(rg_model_forward(net, b.x, RG_TRAIN), b.y);
        rg_backward(loss);   /* gradient-ready hooks start reducing buckets meanwhile */
        if (rg_ddp_wait(ddp) != RG_OK) return fprintf(stderr, "%s\n", rg_last_error()), 1;
        rg_optim_step(opt);
        rg_optim_zero_grad(opt);
        if (rg_comm_rank(comm) == 0 && step % 5 == 0)
            printf("step %2d  loss %.4f\n", step, rg_tensor_item(loss));
        rg_scope_end();      /* frees every tensor this step made */
    }
    rg_loader_free(train);
    rg_optim_free(opt);
    rg_ddp_free(ddp);
    rg_model_free(net);
    rg_dataset_free(ds);
    return rg_dist_finalize(dist) == RG_OK ? 0 : 1;
}
