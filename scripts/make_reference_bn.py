#!/usr/bin/python3
"""make_reference_bn.py - PyTorch reference data for BatchNorm2d and label-smoothed cross-entropy.

Run with the system python, which has torch 1.13:

    /usr/bin/python3 scripts/make_reference_bn.py     # (re)writes tests/data/nn/bn_ref.safetensors

Contents (float32 unless said):
  bn.x1, bn.x2 (4,3,5,5)     two training batches (non-zero means, different scales per channel)
  bn.weight, bn.bias (3)     the affine parameters (random, not the default 1 and 0)
  bn.dy (4,3,5,5)            the upstream gradient of the first batch (loss = sum(y1 * dy))
  bn.y1                      training output for x1
  bn.dx1, bn.dweight1, bn.dbias1   gradients of sum(y1 * dy)
  bn.running_mean1, bn.running_var1  buffers after x1; bn.running_mean2, bn.running_var2 after x2
  bn.num_batches_tracked (I64, shape ())  = 2 after both batches
  bn.x3, bn.y3 (2,3,4,4)     evaluation output with the buffers after x2
  bn.dx3                     evaluation gradient of sum(y3 * dy3), bn.dy3 its upstream gradient
  ce.logits (5,7), ce.labels (I64, 5), ce.smoothing (1)   label smoothing 0.1
  ce.loss (shape ()), ce.dlogits (5,7)   F.cross_entropy(..., label_smoothing=0.1) and its gradient
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference_nn import OUT, save_safetensors  # noqa: E402


def f32(t):
    return t.detach().numpy().astype(np.float32)


def main():
    torch.manual_seed(7)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.5, -0.7, 0.3]))
        bn.bias.copy_(torch.tensor([0.2, 0.0, -1.1]))
    scale = torch.tensor([1.0, 3.0, 0.2]).view(1, 3, 1, 1)
    shift = torch.tensor([0.5, -2.0, 4.0]).view(1, 3, 1, 1)
    x1 = (torch.randn(4, 3, 5, 5) * scale + shift).requires_grad_(True)
    x2 = torch.randn(4, 3, 5, 5) * scale + shift * 0.5
    dy = torch.randn(4, 3, 5, 5)
    out = {}
    bn.train()
    y1 = bn(x1)
    (y1 * dy).sum().backward()
    out.update({"bn.x1": f32(x1), "bn.x2": f32(x2), "bn.weight": f32(bn.weight),
                "bn.bias": f32(bn.bias), "bn.dy": f32(dy), "bn.y1": f32(y1),
                "bn.dx1": f32(x1.grad), "bn.dweight1": f32(bn.weight.grad),
                "bn.dbias1": f32(bn.bias.grad), "bn.running_mean1": f32(bn.running_mean),
                "bn.running_var1": f32(bn.running_var)})
    with torch.no_grad():
        bn(x2)
    out.update({"bn.running_mean2": f32(bn.running_mean), "bn.running_var2": f32(bn.running_var),
                "bn.num_batches_tracked": bn.num_batches_tracked.numpy().astype(np.int64)})
    bn.eval()
    x3 = (torch.randn(2, 3, 4, 4) * scale + shift).requires_grad_(True)
    dy3 = torch.randn(2, 3, 4, 4)
    y3 = bn(x3)
    (y3 * dy3).sum().backward()
    out.update({"bn.x3": f32(x3), "bn.y3": f32(y3), "bn.dy3": f32(dy3), "bn.dx3": f32(x3.grad)})

    logits = (torch.randn(5, 7) * 2).requires_grad_(True)
    labels = torch.tensor([0, 6, 3, 3, 1])
    loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
    loss.backward()
    out.update({"ce.logits": f32(logits), "ce.labels": labels.numpy().astype(np.int64),
                "ce.smoothing": np.array([0.1], dtype=np.float32), "ce.loss": f32(loss),
                "ce.dlogits": f32(logits.grad)})
    path = os.path.join(OUT, "bn_ref.safetensors")
    save_safetensors(path, out, {"torch": torch.__version__})
    print("wrote", path)


if __name__ == "__main__":
    main()
