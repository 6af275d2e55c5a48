#!/usr/bin/python3
"""make_reference_nesterov.py - PyTorch reference for training ResNet-20 with SGD, Nesterov
momentum and no weight decay on the 1-D parameters (ringgrad-train --nesterov --no-wd-bn-bias).

    /usr/bin/python3 scripts/make_reference_nesterov.py  # (re)writes tests/data/nn/nesterov_ref.safetensors

The model is the CIFAR ResNet-20 of make_resnet_names.py (ringgrad's "resnet20", the same names)
on 3x8x8 images, 10 classes. Its starting weights and the data come from formulas that
tests/models/test_nesterov.c computes too, so that the file stays small. With the shader hash
u(a) = frac(43758.5453 sin(a)) in [0, 1) (computed in double, then rounded to float32):
  parameter number t (named_parameters order), element j, s = 2 u(12.9898 j + 78.233 t + 0.5) - 1:
    2+ dimensions (conv, fc weights): s * sqrt(6 / fan_in)   (fan_in = numel / shape[0])
    1-D weights (BatchNorm's): 1 + 0.2 s;  other 1-D (BatchNorm biases, fc.bias): 0.1 s
  batch k (of STEPS), element i of the (N,3,8,8) images: 2 u(12.9898 i + 78.233 k + 1) - 1 + 0.2 k;
  label of image n: (3 n + k) % 10.
Training mode (batch statistics), mean cross-entropy, torch.optim.SGD(lr=0.02, momentum=0.9,
nesterov, weight_decay=0.05) with two parameter groups: weight decay for the tensors of 2+
dimensions, none for the 1-D ones (or one group, "all_decay").
Contents (float32): for each configuration C in CONFIGS, C.loss (STEPS) the loss of each step,
and C.<name> the final value of every 1-D parameter and of conv1.weight and fc.weight.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference_nn import OUT, save_safetensors  # noqa: E402
from make_resnet_names import CifarResNet  # noqa: E402

N, STEPS, LR, MOMENTUM, WD = 8, 4, 0.02, 0.9, 0.05
CONFIGS = {  # mirrored in tests/models/test_nesterov.c
    "nesterov": dict(nesterov=True, no_wd_1d=True),
    "momentum": dict(nesterov=False, no_wd_1d=True),
    "nesterov_all_decay": dict(nesterov=True, no_wd_1d=False),
}


def u(a):
    v = 43758.5453 * np.sin(a)
    return v - np.floor(v)


def init(net):
    with torch.no_grad():
        for t, (name, p) in enumerate(net.named_parameters()):
            j = np.arange(p.numel(), dtype=np.float64)
            s = 2 * u(12.9898 * j + 78.233 * t + 0.5) - 1
            if p.dim() >= 2:
                v = s * math.sqrt(6.0 / (p.numel() / p.shape[0]))
            elif name.endswith("weight"):
                v = 1 + 0.2 * s
            else:
                v = 0.1 * s
            p.copy_(torch.from_numpy(v.astype(np.float32)).reshape(p.shape))


def batch(k):
    i = np.arange(N * 3 * 8 * 8, dtype=np.float64)
    x = (2 * u(12.9898 * i + 78.233 * k + 1) - 1 + 0.2 * k).astype(np.float32).reshape(N, 3, 8, 8)
    y = np.array([(3 * n + k) % 10 for n in range(N)], dtype=np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def run(nesterov, no_wd_1d):
    net = CifarResNet(3).train()
    init(net)
    params = list(net.parameters())
    if no_wd_1d:
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WD},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": params, "weight_decay": WD}]
    opt = torch.optim.SGD(groups, lr=LR, momentum=MOMENTUM, nesterov=nesterov)
    losses = []
    for k in range(STEPS):
        x, y = batch(k)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"loss": np.array(losses, dtype=np.float32)}
    for name, p in net.named_parameters():
        if p.dim() < 2 or name in ("conv1.weight", "fc.weight"):
            out[name] = p.detach().numpy().astype(np.float32)
    return out


def main():
    torch.set_num_threads(1)
    out = {}
    for c, kw in CONFIGS.items():
        for k, v in run(**kw).items():
            out[c + "." + k] = v
    path = os.path.join(OUT, "nesterov_ref.safetensors")
    save_safetensors(path, out, {"torch": torch.__version__})
    print("wrote", path, {c: out[c + ".loss"].tolist() for c in CONFIGS})


if __name__ == "__main__":
    main()
