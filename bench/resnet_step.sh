#!/bin/sh
# resnet_step.sh — ResNet-18's training step (3x64x64, batch 32, SGD momentum) in ringgrad and in
# PyTorch (torchvision's resnet18, oneDNN), interleaved in one run.
#
#   bench/resnet_step.sh [--threads "1 2"] [--rounds 3] [--iters 5] [--clock wall|cpu]
#
# Each round runs `ringgrad-bench --only resnet` and then bench/torch_resnet_step.py at the same
# thread count; prints the median over rounds of each side's median step time and the ratio
# (PyTorch time / ringgrad time: above 1, ringgrad is faster).
# RINGGRAD_BENCH overrides the bench binary (default build/bin/ringgrad-bench).
set -eu
. "$(dirname "$0")/common.sh"
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) common_option "$1" "${2-}" || { echo "resnet_step.sh: unknown option $1" >&2; exit 2; }
       shift 2 ;;
    esac
done
common_start resnet_step.sh
echo "ResNet-18 training step, 3x64x64, batch 32: ringgrad vs PyTorch $torch_version, $rounds interleaved rounds of $iters steps, $clock clock, $(date -u +%Y-%m-%d)"
for t in $threads; do
    r=1
    while [ "$r" -le "$rounds" ]; do
        "$bench" --only resnet --raw --threads "$t" --iters "$iters" --clock "$clock" | grep '^raw' >>"$raw"
        /usr/bin/python3 "$here/torch_resnet_step.py" --threads "$t" --iters "$iters" --clock "$clock" >>"$raw"
        r=$((r + 1))
    done
done
/usr/bin/python3 - "$raw" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[2:])
    v[(int(kv["threads"]), f[1])].append(float(kv["step_ms"]))
print(f"{'threads':<8}{'ringgrad ms':>13}{'PyTorch ms':>12}{'PyTorch/ringgrad':>18}")
for t in sorted({k[0] for k in v}):
    rg = statistics.median(v[(t, "resnet18")])
    pt = statistics.median(v[(t, "torchresnet18")])
    print(f"{t:<8}{rg:>13.1f}{pt:>12.1f}{pt / rg:>18.2f}")
PY
