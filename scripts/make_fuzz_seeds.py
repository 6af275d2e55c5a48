#!/usr/bin/env python3
"""make_fuzz_seeds.py: writes the seed corpora of the fuzz targets (tests/fuzz/<target>/) and the
regression inputs of the bad files issue 10 reported (tests/fuzz/<target>/regressions/). Small on
purpose: libFuzzer mutates from these, and the normal test suite replays all of them.
Only the standard library."""
import gzip
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz")


def put(target, name, data):
    path = os.path.join(HERE, target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def idx(dims, payload, ndim_byte=None):
    magic = struct.pack(">I", 0x0800 | (ndim_byte if ndim_byte is not None else len(dims)))
    return magic + b"".join(struct.pack(">I", d) for d in dims) + payload


def safetensors(tensors, meta=None, cut=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    blob = struct.pack("<Q", len(text)) + text + data
    return blob[:cut] if cut else blob


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


# ---- IDX: good files (raw and gzip, images and labels), then damaged ones
images = idx([3, 4, 4], bytes(range(48)))
labels = idx([3], bytes([0, 1, 2]))
put("idx", "images_3x4x4", images)
put("idx", "images_3x4x4.gz", gzip.compress(images))
put("idx", "labels_3", labels)
put("idx", "labels_3.gz", gzip.compress(labels))
put("idx", "truncated_payload", images[:40])
put("idx", "trailing", images + b"xx")
put("idx", "bad_magic", b"\x00\x00\x09\x03" + images[4:])
put("idx", "empty", b"")
# issue 10: a header claiming 2^31 images of 28x28 blamed "dimension 1 is 28"
put("idx/regressions", "count_2pow31", idx([1 << 31, 28, 28], b"\x00" * 16))
put("idx/regressions", "zero_dim", idx([0, 28, 28], b""))
put("idx/regressions", "huge_promise.gz", gzip.compress(idx([1024, 1024, 1024], b"\x01" * 64)))

# ---- safetensors / checkpoints
meta = {"format": "pt", "ringgrad.format_version": "1", "model": "mlp", "step": "3",
        "epoch": "0", "seed": "1", "optim": "sgd", "optim.lr": "0.1"}
small = {"a": ("F32", [2], f32(1, 2)), "b": ("I64", [1], struct.pack("<q", 7))}
put("safetensors", "two_tensors", safetensors(small, {"k": "v"}))
put("safetensors", "metadata_only", safetensors({}, meta))
put("safetensors", "scalar_and_empty", safetensors({"s": ("F32", [], f32(3)), "e": ("F32", [0], b"")}))
put("safetensors", "json_nesting", b"\x20\x00\x00\x00\x00\x00\x00\x00" + b'{"a":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}'[:32])
# issue 10: a half file said "run past the data section"; NaN weights loaded silently; an epoch
# of 1e12 blamed --batch-size
whole = safetensors({"a": ("F32", [64], f32(*range(64)))}, meta)
put("safetensors/regressions", "half_file", whole[: len(whole) // 2 + 100])
put("safetensors/regressions", "nan_weight", safetensors({"fc1.bias": ("F32", [2], f32(float("nan"), 1))}, meta))
put("safetensors/regressions", "epoch_1e12", safetensors(small, dict(meta, epoch="1000000000000")))
put("safetensors/regressions", "header_len_huge", struct.pack("<Q", 1 << 62) + b"{}")
print("make_fuzz_seeds.py: seeds written under", os.path.normpath(HERE))
