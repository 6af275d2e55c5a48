"""torch_cuda_timing.py - what bench/torch_cnn_step.py and bench/torch_resnet_step.py share on a
GPU: the precision switches and the timing of a training step, as `ringgrad-bench --device cuda`
times its own (data resident on the GPU, 5 warm-up steps, then medians over `iters` timings of 20
steps each, between CUDA events)."""
import statistics

import torch


def add_cuda_args(ap):
    """The --device cuda options of both scripts."""
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tf32", action="store_true", help="cuda: allow TF32 tensor cores")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="cuda: cudnn.benchmark = True")


def set_precision(args):
    """float32 unless --tf32; cuDNN times its algorithms only with --cudnn-benchmark."""
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = args.cudnn_benchmark


def median_step_ms(step, iters, per=20):
    """Median milliseconds of one call of step() on the current GPU."""
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        for _ in range(per):
            step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / per)
    return statistics.median(times)


def describe(args):
    """The run's settings and versions, for the result line."""
    return (f"tf32={int(args.tf32)} cudnn_benchmark={int(args.cudnn_benchmark)} "
            f"({torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
            f"{torch.cuda.get_device_name()})")
