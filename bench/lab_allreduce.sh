#!/usr/bin/env bash
# lab_allreduce.sh — lab 1: allreduce time against the number of hosts N, for a ring, MPI's
# allreduce and a parameter server's pattern, on simulated hosts (scripts/sim-cluster.sh) joined
# by 1 Gbit/s and 10 Gbit/s links, one rank per host.
#
#   bench/lab_allreduce.sh [--hosts "2 3 4"] [--rates "1gbit 10gbit"] [--min 1K] [--max 16M]
#                          [--factor 4] [--rounds 3] [--budget 0.05] [--out bench/results]
#                          [--methods raw,ring,ps,reducebcast]
#
# Each (rate, N) is one `sim-cluster.sh run N --rate R -- -np N allreduce_bench --jsonl ...`
# (bench/allreduce_bench.c): raw = MPI_Allreduce, ring = ringgrad's ring communicator (its comm
# thread included), ps = every rank sends its buffer to rank 0, which sums and sends the sum back
# (point to point, 64,000-byte chunks, pipelined), reducebcast = MPI_Reduce + MPI_Bcast. Sizes from
# --min to --max by --factor; each figure is the median of --rounds interleaved rounds of calls.
# The rates take turns innermost (N=2 at 1gbit, N=2 at 10gbit, N=3 ...), so a burst of load from
# other jobs hits both alike. Results: OUT/lab_allreduce.jsonl, one line per (rate, N, size,
# method) with the load average before its run; plot with
#   /usr/bin/python3 scripts/plot_bench.py lab_allreduce bench/results/lab_allreduce.jsonl \
#       -o docs/images/lab_allreduce.png
# Needs root and network namespaces (exits 77 where scripts/sim-cluster.sh check says no).
# The simulated hosts share this machine's cores: rg-mpirun's --bind-to none lets the kernel
# spread the N ranks over them (bound, every host's rank 0 would sit on core 0).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
SIM="$ROOT/scripts/sim-cluster.sh"
hosts="2 3 4" rates="1gbit 10gbit" min=1K max=16M factor=4 rounds=3 budget=0.05
methods=raw,ring,ps,reducebcast out="$ROOT/bench/results"
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_allreduce.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/allreduce_bench" ] || { echo "lab_allreduce.sh: build first (cmake --build build)" >&2; exit 1; }
if ! "$SIM" check >/dev/null 2>&1; then
    echo "lab_allreduce.sh: SKIPPED: $("$SIM" check 2>&1 | tail -1)" >&2
    exit 77
fi
mkdir -p "$out"
jsonl="$out/lab_allreduce.jsonl"
: >"$jsonl"
for n in $hosts; do
    for rate in $rates; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "N=$n at $rate (load $load)" >&2
        "$SIM" run "$n" --rate "$rate" -- -np "$n" "$BIN/allreduce_bench" --jsonl \
            --methods "$methods" --min "$min" --max "$max" --factor "$factor" \
            --rounds "$rounds" --budget "$budget" |
            sed "s/^{/{\"rate\":\"$rate\",\"hosts\":$n,\"load_before\":$load,/" | tee -a "$jsonl" |
            python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    print("  %9d %-12s %10.3f ms  busbw %.3f GB/s" % (r["bytes"], r["method"], r["time_s"] * 1e3, r["busbw"]), file=sys.stderr)'
    done
done
echo "lab_allreduce.sh: $(wc -l <"$jsonl") lines in $jsonl; load now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
