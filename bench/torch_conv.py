#!/usr/bin/python3
"""torch_conv.py - PyTorch timings of conv2d forward, backward data and backward filter.

Times the same layers as `ringgrad-bench --only conv`, so that bench/conv_vs_torch.sh can put the
two side by side. PyTorch 1.13 runs CPU convolutions through oneDNN (aten::mkldnn_convolution);
backward goes through aten::convolution_backward with an output mask, so "bwd-data" computes only
the input gradient and "bwd-filter" the weight and bias gradients, as ringgrad's kernels do.

--clock cpu times with the calling thread's CPU time, as ringgrad-bench --clock cpu does.
Shapes come from `ringgrad-bench --shapes` ("shape NAME N C H K R stride pad" lines) on stdin or
in --shapes FILE. One line per result: "raw torch threads=T layer=NAME pass=P ms=X" (median).
Run with /usr/bin/python3 (Debian's PyTorch).
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def timed(fn, iters, clock):
    fn()  # warm up: oneDNN builds its kernel on first use
    times = []
    for _ in range(iters):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def passes(n, c, h, k, r, stride, pad):
    x = torch.randn(n, c, h, h)
    w = torch.randn(k, c, r, r)
    b = torch.randn(k)
    dy = torch.randn_like(F.conv2d(x, w, b, stride, pad))

    def backward(mask):
        return torch.ops.aten.convolution_backward(dy, x, w, [k], [stride, stride], [pad, pad],
                                                   [1, 1], False, [0, 0], 1, mask)

    return {
        "forward": lambda: F.conv2d(x, w, b, stride, pad),
        "bwd-data": lambda: backward([True, False, False]),
        "bwd-filter": lambda: backward([False, True, True]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or this thread's CPU time (meaningful at one thread)")
    ap.add_argument("--iters", type=int, default=7)
    ap.add_argument("--layer", default=None, help="only this layer and those under it (cnn, r18.l2)")
    ap.add_argument("--pass", dest="only_pass", default=None, help="forward, bwd-data or bwd-filter")
    ap.add_argument("--shapes", default="-", help="file of 'shape ...' lines (default: stdin)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    src = sys.stdin if args.shapes == "-" else open(args.shapes)
    with torch.no_grad():
        for line in src:
            f = line.split()
            if len(f) != 9 or f[0] != "shape":
                continue
            name, (n, c, h, k, r, stride, pad) = f[1], map(int, f[2:])
            if args.layer and not (name == args.layer or name.startswith(args.layer + ".")):
                continue
            for pname, fn in passes(n, c, h, k, r, stride, pad).items():
                if args.only_pass and pname != args.only_pass:
                    continue
                ms = timed(fn, args.iters, clock) * 1e3
                print(f"raw torch threads={args.threads} layer={name} pass={pname} ms={ms:.4f}",
                      flush=True)


if __name__ == "__main__":
    main()
