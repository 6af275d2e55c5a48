/* ringgrad-bench — how fast are ringgrad's CPU kernels, next to the matrix products they replace?
 *
 *   ringgrad-bench [--only gemm|conv|cnn|peak|membw] [--threads N] [--iters N] [--batch N] [--raw]
 *                  [--layer NAME] [--pass forward|bwd-data|bwd-filter] [--clock wall|cpu]
 *                  [--shapes]
 *
 * gemm: cblas_sgemm on a few shapes (is the BLAS healthy on this machine?).
 * conv: conv2d forward, backward data and backward filter for the Fashion-MNIST CNN's layers and
 *       ResNet-18's conv shapes, each next to cblas_sgemm of the im2col matrix product with the
 *       same arithmetic; GFLOP/s of both and their ratio.
 * cnn:  one training step of the CNN (batch 128, Adam) next to its "GEMM floor": the matrix
 *       products an im2col implementation of the step needs, timed alone; and as a fraction of
 *       the FMA peak of the kernels' instruction set.
 * peak: the FMA peak per instruction set and thread count (peak.c); not in the default run.
 * membw: ReLU, dropout, max-pool and the optimizer steps against a copy of the same bytes
 *       (membw.c); not in the default run.
 * The first line names the instruction set of the CPU kernels (RG_ISA forces one).
 * --device cuda runs the GPU bench instead (ringgrad-bench/cuda_bench.h; --device cuda --help).
 * Every pair is measured interleaved in one run and reported as medians (see bench.h). The
 * results and the commands that produced them are kept in docs/PERFORMANCE.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringgrad.h"
#include "ringgrad-bench/bench.h"
#include "ringgrad-bench/cuda_bench.h"

static void usage(FILE *f) {
    fprintf(
        f, "usage: ringgrad-bench [options]\n"
           "  --only PART           gemm, conv, cnn, peak, membw or resnet (default: the first 3)\n"
           "  --threads N           threads for the CPU kernels (default: 1, then 2)\n"
           "  --iters N             timed repetitions per result, median reported (default 7)\n"
           "  --batch N             batch of the ResNet-18 conv shapes (default 16), of resnet's\n"
           "                        step (default 32)\n"
           "  --model NAME          resnet: the model (resnet18, resnet50, ...; default resnet18)\n"
           "  --image-size S        resnet: 3xSxS images (default 64)\n"
           "  --layer NAME          conv: only layer NAME and those under it (cnn, r18.l2, ...)\n"
           "  --pass P              conv: only pass P (forward, bwd-data or bwd-filter)\n"
           "  --clock wall|cpu      time with the wall clock (default) or this thread's CPU time\n"
           "                        (one thread only, the default with it: immune to the "
           "time slicing\n"
           "                        of a shared machine)\n"
           "  --step-only           cnn: only the step (no GEMM floor, no peak), e.g. under perf\n"
           "  --ops                 cnn, resnet: also the step's wall time per op at each thread\n"
           "                        count\n"
           "  --raw                 also print one 'raw ...' line per result (for bench/ scripts)\n"
           "  --shapes              print the conv layers' shapes and exit\n"
           "  --isa-supported ISA   exit 0 if this build and CPU run the kernels of ISA, else 1\n"
           "  --isa-default         print the kernels this CPU runs without RG_ISA, and exit\n"
           "  --device cpu|cuda     where to run (cuda: GPU kernels, NCCL; --device cuda --help)\n"
           "  --help                this text\n");
}

static int parse_int(const char *flag, const char *v, int lo, int hi) {
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "ringgrad-bench: %s needs an integer in [%d, %d], got '%s'\n", flag, lo, hi,
                v ? v : "");
        exit(2);
    }
    return (int)x;
}

int main(int argc, char **argv) {
    rgb_opts o = {.threads = {1, 2}, .nthreads = 2, .iters = 7, .batch = 16, .pass = -1};
    const char *only = NULL;
    bool shapes = false, threads_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--only")) {
            only = v, i++;
            if (!v || (strcmp(v, "gemm") && strcmp(v, "conv") && strcmp(v, "cnn") &&
                       strcmp(v, "peak") && strcmp(v, "membw") && strcmp(v, "resnet"))) {
                fprintf(stderr, "ringgrad-bench: --only takes gemm, conv, cnn, peak, membw or resnet\n");
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            o.threads[0] = parse_int(a, v, 1, 1024), o.nthreads = 1, threads_given = true, i++;
        } else if (!strcmp(a, "--iters")) {
            o.iters = parse_int(a, v, 1, 100000), i++;
        } else if (!strcmp(a, "--batch")) {
            o.batch = parse_int(a, v, 1, 4096), o.batch_given = true, i++;
        } else if (!strcmp(a, "--model")) {
            o.model = v, i++;
            if (!v) {
                fprintf(stderr, "ringgrad-bench: --model needs a name\n");
                return 2;
            }
        } else if (!strcmp(a, "--image-size")) {
            o.image_size = parse_int(a, v, 1, 4096), i++;
        } else if (!strcmp(a, "--step-only")) {
            o.step_only = true;
        } else if (!strcmp(a, "--ops")) {
            o.ops = true;
        } else if (!strcmp(a, "--raw")) {
            o.raw = true;
        } else if (!strcmp(a, "--clock")) {
            i++;
            if (!v || (strcmp(v, "wall") && strcmp(v, "cpu"))) {
                fprintf(stderr, "ringgrad-bench: --clock takes wall or cpu\n");
                return 2;
            }
            rgb_cpu_clock = !strcmp(v, "cpu");
        } else if (!strcmp(a, "--isa-supported")) {
            if (!v) {
                fprintf(stderr, "ringgrad-bench: --isa-supported needs avx512, avx2 or generic\n");
                return 2;
            }
            return rg_cpu_isa_supported(v) ? 0 : 1;
        } else if (!strcmp(a, "--isa-default")) {
            if (getenv("RG_ISA")) {
                fprintf(stderr, "ringgrad-bench: --isa-default: unset RG_ISA first\n");
                return 2;
            }
            printf("%s\n", rg_cpu_isa());
            return 0;
        } else if (!strcmp(a, "--shapes")) {
            shapes = true;
        } else if (!strcmp(a, "--layer")) {
            o.layer = v, i++;
            if (!v) {
                fprintf(stderr, "ringgrad-bench: --layer needs a name\n");
                return 2;
            }
        } else if (!strcmp(a, "--pass")) {
            o.pass = v ? rgb_parse_pass(v) : -2, i++;
            if (o.pass < 0) {
                fprintf(stderr, "ringgrad-bench: --pass takes forward, bwd-data or bwd-filter\n");
                return 2;
            }
        } else if (!strcmp(a, "--device")) {
            i++;
            if (v && !strcmp(v, "cpu")) continue;
            if (v && !strncmp(v, "cuda", 4)) return rg_bench_cuda(argc, argv); /* its own flags */
            fprintf(stderr, "ringgrad-bench: --device takes cpu or cuda, got '%s'\n", v ? v : "");
            return 2;
        } else {
            fprintf(stderr, "ringgrad-bench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (rgb_cpu_clock && threads_given && o.threads[0] > 1) {
        fprintf(stderr, "ringgrad-bench: --clock cpu times the calling thread's CPU time, which "
                        "leaves out the other threads' work: use it with --threads 1\n");
        return 2;
    }
    if (rgb_cpu_clock) o.threads[0] = 1, o.nthreads = 1; /* the default's 2-thread rows too */
    if (o.ops && (!only || (strcmp(only, "cnn") && strcmp(only, "resnet")))) {
        fprintf(stderr,
                "ringgrad-bench: --ops needs --only cnn or --only resnet (a step, per op)\n");
        return 2;
    }
    char names[4096];
    if (o.layer && !rgb_conv_layer_known(o.layer, names, sizeof names)) {
        fprintf(stderr,
                "ringgrad-bench: --layer %s names no conv layer (the layers: %s; a prefix "
                "such as r18.l2 takes those under it)\n",
                o.layer, names);
        return 2;
    }
    if (shapes) {
        rgb_print_conv_shapes(o.batch);
        return 0;
    }
    if (rg_cpu_isa_init() != RG_OK) {
        fprintf(stderr, "ringgrad-bench: %s\n", rg_last_error());
        return 2;
    }
    printf("ringgrad-bench: CPU kernels %s\n", rg_cpu_isa());
    rgb_print_blas_core();
    if (only && !strcmp(only, "peak")) rgb_run_peak(&o);
    if (only && !strcmp(only, "membw")) rgb_run_membw(&o);
    if (!only || !strcmp(only, "gemm")) rgb_run_gemm(&o);
    if (!only || !strcmp(only, "conv")) rgb_run_conv(&o);
    if (!only || !strcmp(only, "cnn")) rgb_run_cnn(&o);
    if (only && !strcmp(only, "resnet")) rgb_run_resnet(&o);
    return 0;
}
