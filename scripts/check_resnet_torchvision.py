#!/usr/bin/python3
"""check_resnet_torchvision.py - a ringgrad ResNet checkpoint in torchvision, by hand.

    /usr/bin/python3 scripts/check_resnet_torchvision.py CKPT NUM_CLASSES [IO_BIN N C H W]

Loads the model tensors of CKPT (a ringgrad-train / rg_checkpoint_save safetensors file; the
optimizer's "optim.*" entries are left out) into torchvision.models.resnet18(num_classes=N) with
load_state_dict(strict=True). With IO_BIN (float32 input (N,C,H,W) followed by ringgrad's eval
logits (N,NUM_CLASSES)), also compares torchvision's eval logits with ringgrad's.
Reads safetensors with struct + json (tests/train/ckpt_compare.py).
"""
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "train"))
import ckpt_compare  # noqa: E402


def main():
    path, classes = sys.argv[1], int(sys.argv[2])
    tensors, meta = ckpt_compare.load(path)
    sd = {}
    for name, (dtype, shape, values) in tensors.items():
        if name.startswith("optim."):
            continue
        a = np.array(values, dtype=np.int64 if dtype == "I64" else np.float32).reshape(shape)
        sd[name] = torch.from_numpy(a)
    model = torchvision.models.resnet18(num_classes=classes)
    model.load_state_dict(sd, strict=True)
    print("%s: %d tensors loaded into torchvision resnet18(num_classes=%d) with strict=True"
          % (path, len(sd), classes))
    print("bn1.num_batches_tracked =", int(model.bn1.num_batches_tracked))
    if len(sys.argv) > 3:
        n, c, h, w = (int(v) for v in sys.argv[4:8])
        raw = np.fromfile(sys.argv[3], dtype=np.float32)
        x = torch.from_numpy(raw[:n * c * h * w].reshape(n, c, h, w).copy())
        ours = raw[n * c * h * w:].reshape(n, classes)
        model.eval()
        with torch.no_grad():
            theirs = model(x).numpy()
        diff = float(np.abs(theirs - ours).max())
        print("eval logits: max |torchvision - ringgrad| = %.3g (scale %.3g)"
              % (diff, float(np.abs(theirs).max())))
        sys.exit(0 if diff < 1e-3 * max(1.0, float(np.abs(theirs).max())) else 1)


if __name__ == "__main__":
    main()
