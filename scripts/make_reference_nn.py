#!/usr/bin/python3
"""make_reference_nn.py - PyTorch reference data for the layers/, optim/ and models/ tests.

Run with the system python, which has torch 1.13 (the default python3 on PATH does not):

    /usr/bin/python3 scripts/make_reference_nn.py            # (re)writes tests/data/nn/*.safetensors
    /usr/bin/python3 scripts/make_reference_nn.py --check DIR
        # loads the ringgrad checkpoint DIR/cnn.safetensors (written by the test
        # models_interop/cnn_checkpoint_for_pytorch) into PyTorch's CNN with
        # load_state_dict(strict=True) and compares its logits with ringgrad's (DIR/cnn_io.safetensors)

The safetensors files are read and written with struct + json only (the safetensors package is
not installed), which doubles as an independent implementation of the format.
Outputs (all small):
  optim_ref.safetensors       SGD / Adam / AdamW trajectories for two parameters over 6 steps
  lr_ref.safetensors          learning rates of torch's StepLR, CosineAnnealingLR, LinearLR warmup
  small_cnn_weights.safetensors  state_dict of a small CNN-shaped model (weights only)
  small_cnn_io.safetensors    its input, labels, logits (eval), loss and every parameter gradient
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "nn")

DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}
NP_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def save_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (written in insertion order)."""
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """-> (dict name -> numpy array, metadata dict)"""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base, out = 8 + n, {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype=NP_DTYPES[e["dtype"]]).reshape(e["shape"])
    return out, meta


# ---- optimizers -------------------------------------------------------------------------------

OPTIM_CONFIGS = {  # mirrored in tests/optim/test_optim.c
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_dampening": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    "sgd_weight_decay": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam_weight_decay": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
}
STEPS = 6
HALVE_LR_AFTER = 3  # after this many steps the test halves the learning rate


def make_optim_ref():
    g = torch.Generator().manual_seed(1)
    a0 = torch.rand(3, 4, generator=g) * 2 - 1
    b0 = torch.rand(5, generator=g) * 2 - 1
    ga = torch.rand(STEPS, 3, 4, generator=g) * 2 - 1
    gb = torch.rand(STEPS, 5, generator=g) * 2 - 1
    out = {"init.a": a0.numpy(), "init.b": b0.numpy(), "grad.a": ga.numpy(), "grad.b": gb.numpy()}
    for name, (cls, kw) in OPTIM_CONFIGS.items():
        a = a0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = cls([a, b], **kw)
        ta, tb = [], []
        for k in range(STEPS):
            if k == HALVE_LR_AFTER:
                for group in opt.param_groups:
                    group["lr"] *= 0.5
            a.grad = ga[k].clone()
            b.grad = None if k == 0 else gb[k].clone()  # b has no gradient on the first step
            opt.step()
            ta.append(a.detach().clone())
            tb.append(b.detach().clone())
        out[name + ".a"] = torch.stack(ta).numpy()
        out[name + ".b"] = torch.stack(tb).numpy()
    save_safetensors(os.path.join(OUT, "optim_ref.safetensors"), out)


# ---- learning-rate schedules ------------------------------------------------------------------

def lr_trace(make_sched, n, base=0.1):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base)
    sched = make_sched(opt)
    lrs = []
    for _ in range(n):
        lrs.append(opt.param_groups[0]["lr"])  # the rate step t uses
        opt.step()
        sched.step()
    return np.array(lrs, dtype=np.float64)


def make_lr_ref():
    S = torch.optim.lr_scheduler
    out = {  # mirrored in tests/optim/test_schedule.c
        "step": lr_trace(lambda o: S.StepLR(o, step_size=3, gamma=0.5), 12),
        "cosine": lr_trace(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 25),
        "warmup_cosine": lr_trace(lambda o: S.SequentialLR(o, [
            S.LinearLR(o, start_factor=0.1, total_iters=5),
            S.CosineAnnealingLR(o, T_max=10, eta_min=0.0)], milestones=[5]), 20),
        "warmup_step": lr_trace(lambda o: S.SequentialLR(o, [
            S.LinearLR(o, start_factor=0.25, total_iters=4),
            S.StepLR(o, step_size=3, gamma=0.1)], milestones=[4]), 14),
    }
    save_safetensors(os.path.join(OUT, "lr_ref.safetensors"), out)


# ---- a small CNN-shaped model -----------------------------------------------------------------

class SmallCNN(nn.Module):
    """The shape of ringgrad's CNN with fewer channels (mirrored in tests/models/test_reference.c)."""

    def __init__(self, c1=4, c2=8, hidden=32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3)
        self.conv2 = nn.Conv2d(c1, c2, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(c2 * 12 * 12, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return self.fc2(x)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.dropout1 = nn.Dropout(0.2)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.dropout1(F.relu(self.fc1(x)))
        return self.fc3(F.relu(self.fc2(x)))


def make_model_ref():
    torch.manual_seed(3)
    net = SmallCNN().eval()
    state = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    save_safetensors(os.path.join(OUT, "small_cnn_weights.safetensors"), state)
    x = torch.rand(4, 1, 28, 28)
    y = torch.tensor([3, 1, 4, 1], dtype=torch.int64)
    logits = net(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    io = {"input": x.numpy(), "labels": y.numpy(), "logits": logits.detach().numpy(),
          "loss": loss.detach().numpy().reshape(())}
    for k, p in net.named_parameters():
        io["grad." + k] = p.grad.numpy()
    save_safetensors(os.path.join(OUT, "small_cnn_io.safetensors"), io)


# ---- checking a ringgrad checkpoint in PyTorch ------------------------------------------------

def check(directory):
    from_rg, meta = load_safetensors(os.path.join(directory, "cnn.safetensors"))
    io, _ = load_safetensors(os.path.join(directory, "cnn_io.safetensors"))
    print("metadata:", meta)
    model = meta["model"]
    sys.path.insert(0, ROOT)
    net = (SmallCNN(32, 64, 128) if model == "cnn" else MLP()).eval()
    state = {k: torch.from_numpy(v.copy()) for k, v in from_rg.items() if not k.startswith("optim.")}
    net.load_state_dict(state, strict=True)  # every name and shape must match PyTorch's
    logits = net(torch.from_numpy(io["input"].copy())).detach().numpy()
    err = np.abs(logits - io["logits"]).max()
    print(f"{model}: {len(state)} tensors loaded with strict=True; max |logits diff| = {err:.3g}")
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    os.makedirs(OUT, exist_ok=True)
    make_optim_ref()
    make_lr_ref()
    make_model_ref()
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)), "bytes")
