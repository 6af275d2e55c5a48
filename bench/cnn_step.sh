#!/bin/sh
# cnn_step.sh — the Fashion-MNIST CNN's training step (batch 128, Adam) in ringgrad and in
# PyTorch, interleaved in one run.
#
#   bench/cnn_step.sh [--threads "1 2"] [--rounds 3] [--iters 5] [--clock wall|cpu]
#                   [--torch-malloc keep|default]   (see bench/common.sh)
#
# Each round runs `ringgrad-bench --only cnn` (which also times the step's GEMM floor) and then
# bench/torch_cnn_step.py at the same thread count; prints the median over rounds of each side's
# median step time as images/s, ringgrad's speedup over PyTorch and its share of the GEMM floor.
# --clock cpu times with the CPU time of each process's main thread, which the shared machine's
# time slicing does not inflate (meaningful at one thread only). Also prints, per thread count,
# ringgrad's speed over its own one-thread figure (when 1 is among --threads; the median of each
# round's ratio, the thread counts alternating within a round) and the step's share
# of the FMA peak measured in the same runs, counting 71.56 MFLOP per image (what a direct
# convolution multiplies: "of FMA peak") and what the step multiplies (conv2 by Winograd, 37.83
# unless RG_CONV_WINOGRAD=0: "FMAs run"), and the load before and after.
# RINGGRAD_BENCH overrides the bench binary (default build/bin/ringgrad-bench).
set -eu
. "$(dirname "$0")/common.sh"
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) common_option "$1" "${2-}" || { echo "cnn_step.sh: unknown option $1" >&2; exit 2; }
       shift 2 ;;
    esac
done
common_start cnn_step.sh
echo "CNN training step, batch 128, Adam: ringgrad vs PyTorch $torch_version, $rounds interleaved rounds of $iters steps, $clock clock, PyTorch malloc $torch_malloc, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
# Thread counts alternate within each round (1, 2, 1, 2, ...), so that the machine's slow drifts
# reach both sides of the "vs 1 thr" ratio alike: it is the median of each round's own ratio.
r=1
while [ "$r" -le "$rounds" ]; do
    for t in $threads; do
        "$bench" --only cnn --raw --threads "$t" --iters "$iters" --clock "$clock" | grep '^raw' |
            sed "s/\$/ round=$r/" >>"$raw"
        $torch_python "$here/torch_cnn_step.py" --threads "$t" --iters "$iters" --clock "$clock" |
            sed "s/\$/ round=$r/" >>"$raw"
    done
    r=$((r + 1))
done
/usr/bin/python3 - "$raw" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
isas = set()
by_round = collections.defaultdict(dict)  # round -> threads -> ringgrad's step_ms
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[2:] if "=" in x)
    if "isa" in kv: isas.add(kv["isa"])
    for name in ("step_ms", "floor_ms", "peak_gflops", "mflop_run"):
        if name in kv:
            v[(int(kv["threads"]), f[1], name)].append(float(kv[name]))
    if f[1] == "cnn" and "round" in kv:
        by_round[kv["round"]][int(kv["threads"])] = float(kv["step_ms"])
print("ringgrad CPU kernels: " + ", ".join(sorted(isas)))
print(f"{'threads':<8}{'ringgrad img/s':>15}{'PyTorch img/s':>15}{'speedup':>9}{'GEMM floor img/s':>18}{'of floor':>10}{'vs 1 thr':>10}{'of FMA peak':>13}{'FMAs run':>10}")
def vs_one(t):  # the median over rounds of the round's one-thread step over its t-thread step
    ratios = [r[1] / r[t] for r in by_round.values() if 1 in r and t in r]
    return statistics.median(ratios) if ratios else None
for t in sorted({k[0] for k in v}):
    rg = statistics.median(v[(t, "cnn", "step_ms")])
    pt = statistics.median(v[(t, "torchcnn", "step_ms")])
    fl = statistics.median(v[(t, "cnn", "floor_ms")])
    peak = statistics.median(v[(t, "cnn", "peak_gflops")])
    scale = f"{vs_one(t):.2f}x" if vs_one(t) else "-"
    frac = 71.56e-3 * 128 / (rg * 1e-3) / peak  # (GFLOP per step / s per step) / GFLOP/s
    run = statistics.median(v[(t, "cnn", "mflop_run")]) / 71.56 * frac
    print(f"{t:<8}{128e3 / rg:>15.0f}{128e3 / pt:>15.0f}{pt / rg:>9.2f}{128e3 / fl:>18.0f}{100 * fl / rg:>9.0f}%{scale:>10}{100 * frac:>12.0f}%{100 * run:>9.0f}%")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
