#!/bin/sh
# perf_ops.sh — where the CNN step's CPU time goes, per kernel group, at each thread count:
# `perf record` (cpu-clock samples, every thread) of `ringgrad-bench --only cnn --step-only`,
# grouped by symbol into the step's ops. CPU milliseconds per step summed over all threads; the
# OpenMP row is time the workers spend waiting at barriers (libgomp), "kernel" page faults and
# scheduling. Setup (random inputs) is left out.
#
#   bench/perf_ops.sh [--threads "1 2"] [--iters 20]
# RINGGRAD_BENCH overrides the bench binary (default build/bin/ringgrad-bench).
set -eu
threads="1 2" iters=20
while [ $# -gt 0 ]; do
    case $1 in
    --threads) threads=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "perf_ops.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
bench=${RINGGRAD_BENCH:-build/bin/ringgrad-bench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
freq=1999
for t in $threads; do
    perf record -q -e cpu-clock -F $freq -o "$tmp/p$t.data" "$bench" --only cnn --step-only \
        --threads "$t" --iters "$iters" | grep 'step only' | sed "s/^/step: /"
    perf report -i "$tmp/p$t.data" --no-children --sort dso,symbol --stdio -F overhead,sample,dso,sym \
        2>/dev/null | grep -v '^#' | grep -v '^$' >"$tmp/r$t.txt"
done
python3 - "$tmp" "$freq" "$iters" $threads <<'PY'
import re, sys
tmp, freq, iters, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
groups = [  # (name, regex on "dso symbol"), first match wins
    ("setup (not the step)", r"rgb_random|rg_cpu_uniform|rg_cpu_normal"),
    ("conv tiles (rg_conv_tile)", r"tile_nv\d"),
    ("conv transposes, packing", r"rg_conv_|conv2d_|pack_|build_panel|direct_image"),
    ("OpenBLAS (fc1, fc2)", r"openblas"),
    ("adam step", r"adam"),
    ("relu", r"relu"),
    ("maxpool", r"maxpool|pool"),
    ("dropout", r"dropout|draw_words|keep_threshold"),
    ("cross-entropy, sum, bcast", r"cross_entropy|rg_cpu_sum|bcast|binary|axpby|fill"),
    ("OpenMP wait (libgomp)", r"libgomp"),
    ("kernel (page faults, scheduling)", r"kernel|\[k\]"),
    ("libc (memset, memcpy)", r"libc"),
]
res = {}
for t in threads:
    tot = {}
    for line in open(f"{tmp}/r{t}.txt"):
        f = line.split()
        if len(f) < 4: continue
        n = int(f[1]); key = " ".join(f[2:])
        name = next((g for g, rx in groups if re.search(rx, key)), "other")
        tot[name] = tot.get(name, 0) + n
    res[t] = tot
steps = iters + 1  # one warm-up step
names = [g for g, _ in groups] + ["other"]
print("%-34s" % "CPU ms per step" + "".join("%12s" % (t + " thr") for t in threads))
for g in names:
    if g.startswith("setup"): continue
    print("%-34s" % g + "".join("%12.1f" % (res[t].get(g, 0) / freq / steps * 1e3) for t in threads))
print("%-34s" % "total (all threads)" + "".join(
    "%12.1f" % (sum(v for k, v in res[t].items() if not k.startswith("setup")) / freq / steps * 1e3)
    for t in threads))
PY
