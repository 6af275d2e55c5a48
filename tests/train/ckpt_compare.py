#!/usr/bin/env python3
"""ckpt_compare.py A B [--atol X] [--rtol Y] [--expect-differ] [--meta KEY ...]: compares two
safetensors checkpoints written by ringgrad-train --save, tensor by tensor.

Every tensor of A must be in B with the same dtype and shape, and the other way round. By default
each element must satisfy |a - b| <= atol + rtol |b| (atol = rtol = 0: bit for bit); the worst
element of each tensor is printed. --expect-differ inverts the verdict: the run passes only if
some tensor is OUTSIDE the tolerance (a control that the tolerance can fail). --meta KEY asks
for equal metadata values (step, epoch, ...). --weights-only leaves out the optimizer's tensors
("optim.*": a --strategy zero1 checkpoint has none, its state being sharded over the ranks).
Exit 0 on success, 1 otherwise.
Only the standard library: json and struct (the tests run without numpy or torch)."""
import argparse
import json
import math
import struct
import sys

FORMATS = {"F32": "f", "F64": "d", "I64": "q", "I32": "i", "U8": "B", "F16": "e"}


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        fmt = FORMATS[t["dtype"]]
        count = (hi - lo) // struct.calcsize(fmt)
        tensors[name] = (t["dtype"], tuple(t["shape"]),
                         struct.unpack_from("<%d%s" % (count, fmt), blob, 8 + n + lo))
    return tensors, meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--atol", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--expect-differ", action="store_true")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--weights-only", action="store_true")
    a = ap.parse_args()
    ta, ma = load(a.a)
    tb, mb = load(a.b)
    if a.weights_only:
        ta = {k: v for k, v in ta.items() if not k.startswith("optim.")}
        tb = {k: v for k, v in tb.items() if not k.startswith("optim.")}
        if not ta:
            print("no weights to compare")
            return 1
    problems = []
    if sorted(ta) != sorted(tb):
        problems.append("tensor names differ: %s" % sorted(set(ta) ^ set(tb)))
    for key in a.meta:
        if ma.get(key) != mb.get(key):
            problems.append("metadata %s: %r vs %r" % (key, ma.get(key), mb.get(key)))
    outside = 0
    worst_all = 0.0
    for name in sorted(set(ta) & set(tb)):
        (da, sa, va), (db, sb, vb) = ta[name], tb[name]
        if (da, sa) != (db, sb):
            problems.append("%s: %s %s vs %s %s" % (name, da, sa, db, sb))
            continue
        worst, worst_i, bad = 0.0, -1, 0
        for i, (x, y) in enumerate(zip(va, vb)):
            d = abs(x - y)
            if not math.isfinite(d) or d > a.atol + a.rtol * abs(y):
                bad += 1
            if not math.isfinite(d) or d > worst:
                worst, worst_i = (d if math.isfinite(d) else math.inf), i
        worst_all = max(worst_all, worst)
        outside += bad
        where = "" if worst_i < 0 else " (element %d: %.9g vs %.9g)" % (worst_i, va[worst_i], vb[worst_i])
        print("%-40s max |a-b| %.3g%s%s" % (name, worst, where, ", %d outside" % bad if bad else ""))
    print("largest difference %.3g; %d elements outside atol %g + rtol %g" % (worst_all, outside, a.atol, a.rtol))
    if problems:
        print("\n".join(problems))
        return 1
    if a.expect_differ:
        if outside == 0:
            print("FAIL: expected the checkpoints to differ beyond the tolerance")
            return 1
        return 0
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
