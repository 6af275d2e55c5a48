#!/usr/bin/env bash
# The layer rule (LAYERS) holds on this tree, and the check that enforces it does fail: on copies
# of the tree with one upward include planted, in a source file and in a public header, it must
# exit 1 and name the planted line.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
check="$root/tests/architecture/check_layers.py"

echo "== this tree"
python3 "$check" "$root"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# plant WHERE INCLUDE: a copy of the layer folders and LAYERS with one more #include in WHERE
plant() {
    local where=$1 inc=$2 copy="$tmp/$RANDOM"
    mkdir -p "$copy"
    (cd "$root" && cp -r LAYERS include core tensor autograd ops layers optim data dist models "$copy/")
    printf '#include "%s" /* planted */\n' "$inc" >>"$copy/$where"
    echo "== planted in $where: #include \"$inc\""
    local out rc=0
    out=$(python3 "$check" "$copy") || rc=$?
    echo "$out"
    [ "$rc" = 1 ] || { echo "FAIL: the check exited $rc on an upward include in $where"; exit 1; }
    grep -q "^$where:[0-9]*: includes" <<<"$out" || { echo "FAIL: no report names $where"; exit 1; }
}
plant tensor/tensor.c ringgrad/ddp.h             # tensor -> dist
plant include/ringgrad/tensor.h ringgrad/model.h # a public header: tensor -> models
plant ops/conv2d.c layers/conv2d.c               # a module-internal file: ops -> layers
echo "PASS: the tree keeps the layer rule, and the check catches upward includes"
