#!/usr/bin/env python3
"""make_data.py OUT [--train N] [--test M]: a small Fashion-MNIST folder for the trainer's
end-to-end tests: the first N training and M test images (and labels) of the real data set, as
unpacked IDX files, so that an epoch and its evaluation take a fraction of a second. Without
the real data (RG_DATA_DIR or /usr/share/datasets/fashion-mnist) it writes images of the same
format from a fixed pseudo-random generator instead: the tests compare runs with each other,
so any data will do."""
import argparse
import gzip
import os
import random
import struct
import sys


def read_idx(path, count, item_bytes, header_bytes):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read(header_bytes + count * item_bytes)[header_bytes:]


def find(src, name):
    for p in (os.path.join(src, name + ".gz"), os.path.join(src, name)):
        if os.path.exists(p):
            return p
    return None


def generated_pixel(label, p, rng):
    """Like Fashion-MNIST: a black background, and a noisy bright block whose place depends on
    the class (rows label .. label + 13, columns 7 .. 20)."""
    row, col = divmod(p, 28)
    return 100 + rng.randrange(150) if label <= row < label + 14 and 7 <= col < 21 else 0


def write_split(out, prefix, images, labels, n):
    with open(os.path.join(out, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images)
    with open(os.path.join(out, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=960)
    ap.add_argument("--test", type=int, default=100)
    a = ap.parse_args()
    src = os.environ.get("RG_DATA_DIR", "/usr/share/datasets/fashion-mnist")
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(1)
    for prefix, n in (("train", a.train), ("t10k", a.test)):
        img, lab = find(src, prefix + "-images-idx3-ubyte"), find(src, prefix + "-labels-idx1-ubyte")
        if img and lab:
            images, labels = read_idx(img, n, 784, 16), read_idx(lab, n, 1, 8)
        else:
            labels = bytes(rng.randrange(10) for _ in range(n))
            images = bytes(generated_pixel(labels[i // 784], i % 784, rng) for i in range(n * 784))
        if len(images) != n * 784 or len(labels) != n:
            sys.exit("make_data.py: %s has fewer than %d items" % (img, n))
        write_split(a.out, prefix, images, labels, n)
    print("make_data.py: %d training and %d test images in %s (%s)"
          % (a.train, a.test, a.out, "Fashion-MNIST" if img else "generated"))


if __name__ == "__main__":
    main()
