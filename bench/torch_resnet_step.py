#!/usr/bin/python3
"""torch_resnet_step.py - one training step of a torchvision ResNet in PyTorch, timed.

The same model, batch and optimizer as `ringgrad-bench --only resnet`: resnet18 (--model)
with num_classes=10 on random 3xSxS images (S = 64, --image-size), batch 32 (--batch),
cross-entropy, SGD lr 0.01 momentum 0.9. Prints
"raw torch model=M size=S batch=B threads=T step_ms=X" (median). --clock cpu times with the calling thread's
CPU time (meaningful at one thread). Run with /usr/bin/python3 (Debian's PyTorch).

--device cuda times the step on a GPU as `ringgrad-bench --device cuda --only resnet` does (data
on the GPU, 20 steps per timing, CUDA events), in float32: TF32 off unless --tf32;
--cudnn-benchmark lets cuDNN time its algorithms first. It prints
"raw torch-cuda model=M size=S batch=B step_ms=X img_s=Y".
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

from torch_cuda_timing import add_cuda_args, describe, median_step_ms, set_precision


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", default="resnet18", choices=("resnet18", "resnet34", "resnet50"))
    ap.add_argument("--image-size", type=int, default=64)
    add_cuda_args(ap)
    ap.add_argument("--phases", action="store_true",
                    help="cuda: also time forward, backward and the optimizer step apart")
    args = ap.parse_args()
    if args.device == "cuda":
        return main_cuda(args)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(args.batch, 3, args.image_size, args.image_size) * 2 - 1
    y = torch.arange(args.batch) * 7 % 10

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    step()  # warm up
    times = []
    for _ in range(args.iters):
        t0 = clock()
        step()
        times.append(clock() - t0)
    print(f"raw torch model={args.model} size={args.image_size} batch={args.batch} "
          f"threads={args.threads} step_ms={statistics.median(times) * 1e3:.3f}", flush=True)


def main_cuda(args):
    set_precision(args)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(args.batch, 3, args.image_size, args.image_size, device=dev) * 2 - 1
    y = torch.arange(args.batch, device=dev) * 7 % 10

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    ms = median_step_ms(step, args.iters)
    if args.phases:
        print_phases(args, model, opt, x, y)
        try:  # two steps for `ncu --profile-from-start off`; a convenience, never fatal
            torch.cuda.profiler.start()
            for _ in range(2):
                step()
            torch.cuda.profiler.stop()
            torch.cuda.synchronize()
        except RuntimeError as e:
            print(f"torch_resnet_step.py: profiler range: {e} (ignored)", flush=True)
    print(f"raw torch-cuda model={args.model} size={args.image_size} batch={args.batch} "
          f"step_ms={ms:.4f} img_s={args.batch / ms * 1e3:.0f} {describe(args)}", flush=True)


def print_phases(args, model, opt, x, y):
    """Medians of forward (with the loss), backward and the optimizer's step, each between its
    own CUDA events and waited for, as ringgrad-bench's resnet part prints them."""
    times = {"forward": [], "backward": [], "optimizer": []}
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def timed(name, fn):
        ev[0].record()
        out = fn()
        ev[1].record()
        ev[1].synchronize()
        times[name].append(ev[0].elapsed_time(ev[1]))
        return out

    opt.zero_grad()
    for _ in range(args.iters):
        loss = timed("forward", lambda: F.cross_entropy(model(x), y))
        timed("backward", loss.backward)
        timed("optimizer", lambda: (opt.step(), opt.zero_grad()))  # as ringgrad's phase
    print("raw torch-cuda phases " + " ".join(
        f"{k}_ms={statistics.median(v):.3f}" for k, v in times.items()), flush=True)


if __name__ == "__main__":
    main()
