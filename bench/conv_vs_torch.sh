#!/bin/sh
# conv_vs_torch.sh — ringgrad's conv2d kernels against PyTorch's (oneDNN), interleaved.
#
#   bench/conv_vs_torch.sh [--threads "1 2"] [--rounds 3] [--iters 5] [--batch 16] [--layer NAME]
#                          [--clock wall|cpu] [--torch-malloc keep|default]
#
# For each thread count, each round and each layer, runs `ringgrad-bench --only conv` and then
# bench/torch_conv.py on the same shapes, so both see the same machine load; prints the median
# over rounds of each side's median time and the speedup (PyTorch time / ringgrad time, above 1
# means ringgrad is faster). --clock cpu times both with the CPU time of their main thread, which
# the shared machine's time slicing does not inflate (use it at one thread). RINGGRAD_BENCH
# overrides the bench binary (default build/bin/ringgrad-bench); PyTorch runs under
# /usr/bin/python3.
set -eu
. "$(dirname "$0")/common.sh"
batch=16 layers=""
while [ $# -gt 0 ]; do
    case $1 in
    --batch) batch=$2; shift 2 ;;
    --layer) layers=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) common_option "$1" "${2-}" || { echo "conv_vs_torch.sh: unknown option $1" >&2; exit 2; }
       shift 2 ;;
    esac
done
common_start conv_vs_torch.sh
shapes=$(mktemp)
trap 'rm -f "$shapes" "$raw"' EXIT
"$bench" --shapes --batch "$batch" >"$shapes"
[ -n "$layers" ] || layers=$(awk '{print $2}' "$shapes")
echo "conv2d: ringgrad vs PyTorch $torch_version (oneDNN), $rounds interleaved rounds of $iters runs, ResNet batch $batch, $clock clock, PyTorch malloc $torch_malloc, $(date -u +%Y-%m-%d)"
for t in $threads; do
    r=1
    while [ "$r" -le "$rounds" ]; do
        for l in $layers; do
            "$bench" --only conv --raw --threads "$t" --iters "$iters" --clock "$clock" --batch "$batch" --layer "$l" | grep '^raw' >>"$raw"
            $torch_python "$here/torch_conv.py" --threads "$t" --iters "$iters" --clock "$clock" --layer "$l" --shapes "$shapes" >>"$raw"
        done
        r=$((r + 1))
    done
done
/usr/bin/python3 - "$raw" <<'PY'
import collections, statistics, sys
times, order = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[2:])
    key = (int(kv["threads"]), kv["layer"], kv["pass"])
    times[key + (f[1],)].append(float(kv["ms"]))
    if key not in order:
        order.append(key)
print(f"{'thr':<4}{'layer':<15}{'pass':<11}{'ringgrad ms':>12}{'PyTorch ms':>12}{'speedup':>9}")
for key in order:
    rg, pt = times.get(key + ("conv",)), times.get(key + ("torch",))
    if rg and pt:
        a, b = statistics.median(rg), statistics.median(pt)
        print(f"{key[0]:<4}{key[1]:<15}{key[2]:<11}{a:>12.2f}{b:>12.2f}{b / a:>9.2f}")
PY
