#!/usr/bin/python3
"""torch_cnn_step.py - one training step of the Fashion-MNIST CNN in PyTorch, timed.

The same network, batch and optimizer as `ringgrad-bench --only cnn` (conv1 Conv2d(1,32,3), ReLU,
conv2 Conv2d(32,64,3), ReLU, MaxPool2d(2), Dropout(0.25), Flatten, fc1 Linear(9216,128), ReLU,
Dropout(0.5), fc2 Linear(128,10), cross-entropy; Adam lr 1e-3; batch 128 of random images), so
that bench/cnn_step.sh can compare the two. --clock cpu times with the calling thread's CPU time. Prints "raw torchcnn threads=T step_ms=X" (median).
Run with /usr/bin/python3 (Debian's PyTorch).

--device cuda times the step on a GPU as `ringgrad-bench --device cuda --only cnn` does (data on
the GPU, 20 steps per timing, synchronised; use --batch 64 to match its default), in float32:
TF32 is off unless --tf32, and --cudnn-benchmark lets cuDNN time its algorithms first. It prints
"raw torchcnn device=cuda batch=B step_ms=X img_s=Y".
"""
import argparse
import statistics
import time

import torch
from torch import nn
import torch.nn.functional as F

from torch_cuda_timing import add_cuda_args, describe, median_step_ms, set_precision


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or this thread's CPU time (meaningful at one thread)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128, help="images a step (ringgrad-bench's "
                    "CPU job uses 128, its CUDA job 64)")
    add_cuda_args(ap)
    args = ap.parse_args()
    if args.device == "cuda":
        return main_cuda(args)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                          nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(args.batch, 1, 28, 28)
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
    print(f"raw torchcnn threads={args.threads} step_ms={statistics.median(times) * 1e3:.3f}",
          flush=True)


def main_cuda(args):
    set_precision(args)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                          nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10)).to(dev)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(args.batch, 1, 28, 28, device=dev)
    y = (torch.arange(args.batch, device=dev) * 7 % 10)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    ms = median_step_ms(step, args.iters)
    print(f"raw torchcnn device=cuda batch={args.batch} step_ms={ms:.4f} "
          f"img_s={args.batch / ms * 1e3:.0f} {describe(args)}", flush=True)


if __name__ == "__main__":
    main()
