#!/usr/bin/python3
"""torchvision_to_safetensors.py - a torchvision ResNet's state_dict as a safetensors file that
ringgrad loads (rg_checkpoint_load_weights, ringgrad-train --init FILE).

    /usr/bin/python3 scripts/torchvision_to_safetensors.py OUT [--model resnet18] [--num-classes K]
        [--state-dict FILE.pth] [--io IO_BIN]

Without --state-dict the model is torchvision's freshly initialised one, with BatchNorm running
statistics moved by three training-mode forwards of random 3x64x64 batches (so that they are not
the defaults). --io writes float32 (2,3,64,64) inputs followed by the model's eval logits, for a
comparison with ringgrad's. Names, dtypes and shapes are written as PyTorch has them (scalars such
as num_batches_tracked with shape []). Written with struct + json: no safetensors package needed.
"""
import argparse
import json
import struct

import numpy as np
import torch
import torchvision

DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save(path, state_dict):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in state_dict.items():
        b = t.detach().cpu().contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--model", default="resnet18", choices=("resnet18", "resnet34", "resnet50"))
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--state-dict")
    ap.add_argument("--io")
    a = ap.parse_args()
    torch.manual_seed(3)
    m = getattr(torchvision.models, a.model)(num_classes=a.num_classes)
    if a.state_dict:
        m.load_state_dict(torch.load(a.state_dict, map_location="cpu"), strict=True)
    else:
        m.train()
        with torch.no_grad():
            for _ in range(3):
                m(torch.randn(8, 3, 64, 64))
    m.eval()
    save(a.out, m.state_dict())
    print("wrote %s: %d tensors" % (a.out, len(m.state_dict())))
    if a.io:
        x = torch.rand(2, 3, 64, 64) * 2 - 1
        with torch.no_grad():
            z = m(x)
        np.concatenate([x.numpy().ravel(), z.numpy().ravel()]).astype(np.float32).tofile(a.io)


if __name__ == "__main__":
    main()
