/* resnet.c — a ResNet's training step (default ResNet-18, --model; the models of models/resnet.c,
 * torchvision's layout) on synthetic 3xSxS images (S = 64, --image-size), batch 32 (--batch),
 * 10 classes, SGD with momentum 0.9; the peer is bench/torch_resnet_step.py and
 * bench/resnet_step.sh interleaves the two. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ringgrad.h"

void rgb_run_resnet(const rgb_opts *o) {
    int batch = o->batch_given ? o->batch : 32, size = o->image_size > 0 ? o->image_size : 64;
    const char *name = o->model ? o->model : "resnet18";
    rg_model *m = NULL;
    rg_model_spec spec = {.channels = 3, .height = size, .width = size, .num_classes = 10};
    if (rg_model_new_for(name, 42, &spec, &m) != RG_OK) { /* a bad --model: a usage error */
        fprintf(stderr, "ringgrad-bench: --model %s: %s\n", name, rg_last_error());
        exit(2);
    }
    if (rg_model_bn_plane(m) == 1 && batch < 2) { /* BatchNorm would stop the process */
        fprintf(stderr,
                "ringgrad-bench: --batch %d: %s on %dx%d images ends in 1x1 planes, and "
                "BatchNorm needs more than one value per channel in training: use --batch 2 or "
                "more, or larger images\n",
                batch, name, size, size);
        rg_model_free(m);
        exit(2);
    }
    rg_optim *opt = rg_sgd_new(rg_model_params(m), &(rg_sgd_opts){.lr = 0.01f, .momentum = 0.9f});
    rg_tensor *x = rg_tensor_new(RG_F32, RG_SHAPE(batch, 3, size, size), RG_CPU);
    rg_tensor *y = rg_tensor_new(RG_I64, RG_SHAPE(batch), RG_CPU);
    RG_CHECK(opt && x && y, "resnet bench: out of memory");
    uint64_t off = 0;
    rg_tensor_uniform_(x, -1.0f, 1.0f, 7, &off);
    for (int i = 0; i < batch; i++) ((int64_t *)y->data)[i] = (i * 7) % 10;
    double *ts = calloc((size_t)o->iters, sizeof *ts);
    RG_CHECK(ts, "resnet bench: out of memory");
    printf("\n%s training step (3x%dx%d, batch %d, SGD momentum), median of %d\n", name, size, size,
           batch, o->iters);
    rgb_op_table *ops = o->ops ? calloc(1, sizeof *ops) : NULL;
    RG_CHECK(ops || !o->ops, "resnet bench: out of memory");
    if (ops) ops->by_name = true; /* one row per op name: 20-53 convolutions a step */
    int nts[RGB_MAX_THREAD_COUNTS];
    for (int ti = 0; ti < o->nthreads; ti++) {
        int nt = nts[ti] = rg_set_num_threads(o->threads[ti]);
        float loss = 0;
        /* it -1: warm-up; then --iters timed steps, and with --ops as many again, traced (the
         * rg_trace_* marks cost a relaxed load each when not recording) */
        int traced = ops ? o->iters : 0;
        for (int it = -1; it < o->iters + traced; it++) {
            if (it == o->iters) rgb_ops_begin();
            double t0 = rgb_now();
            rg_trace_begin("step", "step");
            rg_scope_begin();
            rg_trace_begin("forward", "step part");
            rg_tensor *l = rg_cross_entropy(rg_model_forward(m, x, RG_TRAIN), y);
            rg_trace_end();
            rg_trace_begin("backward", "step part");
            rg_backward(l);
            rg_trace_end();
            loss = rg_tensor_item(l);
            rg_trace_begin("sgd, zero_grad", "step part");
            rg_optim_step(opt);
            rg_optim_zero_grad(opt);
            rg_trace_end();
            /* the frees as a part of their own: under ASan every block goes to free() */
            rg_trace_begin("scope end (frees)", "step part");
            rg_scope_end();
            rg_trace_end();
            rg_trace_end();
            if (it >= 0 && it < o->iters) ts[it] = rgb_now() - t0;
        }
        if (ops) rgb_ops_end(ops, ti);
        RG_CHECK(isfinite(loss), "resnet bench: the loss is %g", (double)loss);
        double step = rgb_median(ts, o->iters);
        printf("threads %d: %.1f ms/step, %.1f img/s\n", nt, step * 1e3, batch / step);
        if (o->raw)
            printf("raw ringgrad model=%s size=%d batch=%d threads=%d step_ms=%.3f\n", name, size,
                   batch, nt, step * 1e3);
    }
    if (ops) rgb_ops_print(ops, nts, o->nthreads);
    free(ops);
    free(ts);
    rg_optim_free(opt);
    rg_tensor_free(x), rg_tensor_free(y);
    rg_model_free(m);
}
