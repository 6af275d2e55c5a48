#!/usr/bin/env python3
"""check_layers.py — the layer rule: a file includes headers of its own layer or of layers below.

    tests/architecture/check_layers.py [ROOT]      exit 0 when the tree keeps the rule, else 1

The layers and their order come from ROOT/LAYERS (one line per layer, bottom first: the layer's
folder, then the public headers of include/ringgrad/ that belong to it). A file's layer is its
top-level folder; a public header's is the one LAYERS names for it. Every #include "..." of a
file in a layer folder or in include/ is resolved (relative to the file, then to the source root,
then to include/) and must land in the same layer or one listed before it. Headers outside any
layer (system headers, tests' helpers) are not checked. Every public header must be named in
LAYERS, so that a new one is placed deliberately."""
import os
import re
import sys

SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def read_layers(root):
    order, public = [], {}
    with open(os.path.join(root, "LAYERS")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            layer, headers = line[0], line[1:]
            order.append(layer)
            for h in headers:
                public["include/ringgrad.h" if h == "ringgrad.h" else "include/ringgrad/" + h] = layer
    return order, public


def layer_of(path, order, public):
    """The layer of a path relative to the root, or None when it is in none."""
    if path.startswith("include/"):
        return public.get(path, "?unlisted")
    top = path.split("/", 1)[0]
    return top if top in order else None


def resolve(root, src, inc):
    """The root-relative path an include names, or None when it is not one of ours."""
    for base in (os.path.dirname(src), "", "include"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def source_files(root, order):
    for top in order + ["include"]:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, n), root)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    order, public = read_layers(root)
    rank = {name: i for i, name in enumerate(order)}
    problems, checked = [], 0
    for src in source_files(root, order):
        mine = layer_of(src, order, public)
        if mine == "?unlisted":
            problems.append(f"{src}: a public header that LAYERS does not place in any layer")
            continue
        with open(os.path.join(root, src), errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, src, m.group(1))
                theirs = layer_of(target, order, public) if target else None
                if theirs is None or theirs == "?unlisted":
                    continue
                checked += 1
                if rank[theirs] > rank[mine]:
                    problems.append(f"{src}:{lineno}: includes {target}: layer '{mine}' may not "
                                    f"include from '{theirs}', which is above it (LAYERS)")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} includes checked over {len(order)} layers, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
