#!/bin/sh
# perf_ops.sh — where the CNN step's CPU time goes, per op, at each thread count: `perf record`
# (cpu-clock samples, every thread) of `ringgrad-bench --only cnn --step-only`, grouped by symbol
# into the step's ops. CPU milliseconds per step, summed over all threads.
#
#   bench/perf_ops.sh [--threads "1 2"] [--iters 20] [--base 4] [--symbols]
#
# Set-up is left out by difference: each thread count is recorded twice, with --iters and with
# --base steps, and the table is (samples of the long run - samples of the short one) / (iters -
# base), so the random inputs, the first step's page faults and the warm-up step cancel. The
# OpenMP row is time spent in libgomp (workers waiting at barriers, the main thread waiting for
# them); "kernel" is scheduling and system calls. Also prints each run's wall ms per step (the
# bench's median) and, for 2+ threads, the CPU a perfect split would take (1-thread CPU x 1).
# --symbols also lists the 25 hottest symbols per thread count (per step, difference taken).
# RINGGRAD_BENCH overrides the bench binary (default build/bin/ringgrad-bench).
set -eu
threads="1 2" iters=20 base=4 symbols=0
while [ $# -gt 0 ]; do
    case $1 in
    --threads) threads=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --symbols) symbols=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "perf_ops.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$iters" -gt "$base" ] || { echo "perf_ops.sh: --iters must exceed --base" >&2; exit 2; }
bench=${RINGGRAD_BENCH:-build/bin/ringgrad-bench}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
freq=1999
echo "perf_ops.sh: $bench, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $threads; do
    for n in "$base" "$iters"; do
        perf record -q -e cpu-clock -F $freq -o "$tmp/p$t.$n.data" "$bench" --only cnn \
            --step-only --threads "$t" --iters "$n" | awk -v t="$t" -v n="$n" \
            '$1 == t && /step only/ { print "wall", t, n, $2 }' >>"$tmp/wall.txt"
        perf report -i "$tmp/p$t.$n.data" --no-children --sort dso,symbol --stdio \
            -F overhead,sample,dso,sym 2>/dev/null | grep -v '^#' | grep -v '^$' >"$tmp/r$t.$n.txt"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$freq" "$iters" "$base" "$symbols" $threads <<'PY'
import re, sys
tmp, freq, iters, base, symbols, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6:]
groups = [  # (row, regex on "dso symbol"), first match wins
    ("register tiles (conv; fc1 on AVX-512)", r"tile_(add_)?nv\d|rg_conv_tile|rg_conv_panel_product"),
    ("conv1 forward (direct, im2col panels)", r"forward_direct|build_panel|direct_image"),
    ("Winograd's transforms (conv2d_winograd.c)", r"winograd|input_tile|filter_gradient"),
    ("conv transposes, col2im, packing", r"rg_conv_|conv2d_|pack_|window_offsets|chunks_new|gemm_tile|panel\b"),
    ("OpenBLAS (fc2; fc1 without AVX-512)", r"openblas"),
    ("adam step", r"adam"),
    ("relu", r"relu"),
    ("maxpool", r"maxpool"),
    ("dropout", r"dropout|draw_words|keep_threshold"),
    ("linear bias, loss, sums, grad adds", r"cross_entropy|rg_cpu_sum|bcast|binary|axpby|fill|add_bias|linear|log_softmax|scal"),
    ("set-up (cancels in the difference)", r"rgb_random|rg_cpu_uniform|rg_cpu_normal|philox"),
    ("OpenMP (libgomp: barriers, waiting)", r"libgomp"),
    ("kernel (scheduling, syscalls, faults)", r"kernel|\[k\]"),
    ("libc (memset, memcpy, malloc)", r"libc"),
]
def load(t, n):
    tot, syms = {}, {}
    for line in open(f"{tmp}/r{t}.{n}.txt"):
        f = line.split()
        if len(f) < 4 or not f[1].isdigit(): continue
        k = int(f[1]); key = " ".join(f[2:])
        name = next((g for g, rx in groups if re.search(rx, key)), "other")
        tot[name] = tot.get(name, 0) + k
        sym = re.sub(r"\s+", " ", key)
        syms[sym] = syms.get(sym, 0) + k
    return tot, syms
wall = {}
for line in open(f"{tmp}/wall.txt"):
    _, t, n, ms = line.split()
    if int(n) == iters: wall[t] = float(ms)
res, sres = {}, {}
for t in threads:
    (a, sa), (b, sb) = load(t, iters), load(t, base)
    per = lambda x, y: {k: (x.get(k, 0) - y.get(k, 0)) / freq / (iters - base) * 1e3 for k in set(x) | set(y)}
    res[t], sres[t] = per(a, b), per(sa, sb)
names = [g for g, _ in groups] + ["other"]
print(f"CPU ms per step, all threads, ({iters} - {base} steps) difference of two perf runs")
print("%-40s" % "op" + "".join("%11s" % (t + " thr") for t in threads))
for g in names:
    if all(abs(res[t].get(g, 0)) < 0.05 for t in threads): continue
    print("%-40s" % g + "".join("%11.1f" % res[t].get(g, 0) for t in threads))
tot = {t: sum(res[t].values()) for t in threads}
print("%-40s" % "total CPU (all threads)" + "".join("%11.1f" % tot[t] for t in threads))
print("%-40s" % "wall ms per step (bench median)" + "".join("%11.1f" % wall.get(t, float("nan")) for t in threads))
print("%-40s" % "wall x threads (CPU the run was given)" + "".join("%11.1f" % (wall.get(t, float("nan")) * int(t)) for t in threads))
if symbols:
    for t in threads:
        print(f"\nhottest symbols, {t} thread(s), CPU ms per step")
        for k, v in sorted(sres[t].items(), key=lambda kv: -kv[1])[:25]:
            print("%9.2f  %s" % (v, k))
PY
