#!/usr/bin/env bash
# overlap.sh — how much gradient communication the DDP reducer hides behind backward, on two
# simulated hosts joined by a 1 Gbit/s link, by a 10 Gbit/s link, and on shared memory (one host).
#
#   bench/overlap.sh [--repeats 3] [--steps 20] [--batch-size 128] [--bucket-mb 25]
#                    [--nets "1gbit 10gbit shm"] [--out bench/results] [--name overlap]
#                    [--comm mpi|ring] [--traces DIR] [-- MORE overlap_bench ARGS, e.g. --fp16]
#
# Each run is build/bin/overlap_bench (bench/overlap_bench.c) on 2 ranks x 1 thread: it trains
# the CNN three ways side by side, step by step in turn — overlap (buckets reduced during
# backward), no-overlap (one allreduce after backward) and compute (no gradients sent, a barrier
# only) — and prints their median step times and hidden = (T_no - T_overlap) / (T_no - T_compute).
# The networks take turns too (1gbit, 10gbit, shm, 1gbit, ...), each cluster set up once.
# Results: one JSON line per run in OUT/NAME.jsonl (with the load average), and a summary
# table: per network the median over runs of each mode's step time, and hidden computed from
# those medians. Needs root for the simulated hosts (scripts/sim-cluster.sh); where namespaces are
# not allowed only shm runs.
#
# --traces DIR also writes ringgrad-train --timeline traces on the 1 Gbit/s cluster, with overlap
# (DIR/timeline_overlap.json) and without (DIR/timeline_no_overlap.json), for
# scripts/plot_timeline.py.
#
# On a shared machine, compare only what one run measured, and read the load averages it
# records (nice does not help against other login sessions: the kernel shares the CPU between
# sessions first, sched_autogroup).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
SIM="$ROOT/scripts/sim-cluster.sh"
repeats=3 steps=20 batch=128 bucket=25 nets="1gbit 10gbit shm" out="$ROOT/bench/results" traces=""
name=overlap
while [ $# -gt 0 ]; do
    case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --bucket-mb) bucket=$2; shift 2 ;;
    --nets) nets=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --traces) traces=$2; shift 2 ;;
    --comm) export RG_COMM=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "overlap.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/overlap_bench" ] || { echo "overlap.sh: build first (cmake --build build)" >&2; exit 1; }
mkdir -p "$out"
jsonl="$out/$name.jsonl"
: >"$jsonl"

# One cluster per shaped network, named ov<rate>, removed however the script ends.
clusters=()
cleanup() { for c in "${clusters[@]}"; do "$SIM" down --id "$c" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
for net in $nets; do
    [ "$net" = shm ] && continue
    if ! "$SIM" check >/dev/null 2>&1; then
        echo "overlap.sh: no simulated cluster here ($("$SIM" check 2>&1 | tail -1)); shm only" >&2
        nets=shm
        break
    fi
    "$SIM" up 2 --rate "$net" --id "ov$net" >/dev/null
    clusters+=("ov$net")
done

launch() { # net, then the program and its arguments
    local net=$1
    shift
    if [ "$net" = shm ]; then
        "$ROOT/scripts/rg-mpirun" -np 2 -x RG_COMM="${RG_COMM:-mpi}" "$@"
    else
        "$SIM" mpirun --id "ov$net" -- -np 2 -x RG_COMM="${RG_COMM:-mpi}" "$@"
    fi
}

args=(--steps "$steps" --batch-size "$batch" --bucket-mb "$bucket" --threads 1 "$@")
for r in $(seq "$repeats"); do
    for net in $nets; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        output=$(launch "$net" "$BIN/overlap_bench" "${args[@]}")
        echo "$net, run $r (load $load):" >&2
        echo "$output" >&2
        line=$(echo "$output" | tail -1)
        echo "{\"net\":\"$net\",\"repeat\":$r,\"load_before\":$load,\"result\":$line}" >>"$jsonl"
    done
done

if [ -n "$traces" ] && [[ " ${clusters[*]} " == *" ov1gbit "* ]]; then
    mkdir -p "$traces"
    train=("$BIN/ringgrad-train" --threads 1 --max-steps 8 --batch-size "$batch")
    launch 1gbit "${train[@]}" --bucket-mb "$bucket" --timeline "$traces/timeline_overlap.json" >/dev/null
    launch 1gbit "${train[@]}" --no-overlap --timeline "$traces/timeline_no_overlap.json" >/dev/null
    echo "traces in $traces" >&2
fi

python3 - "$jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
nets = list(dict.fromkeys(r["net"] for r in runs))
med = statistics.median
print("# overlap: per network, the median over %d run(s) of each run's medians (ms per step)" %
      (len(runs) // max(1, len(nets))))
print("%-7s %8s %8s %8s %6s %7s | %s" % ("net", "overlap", "no-ovl", "compute", "comm", "hidden",
                                          "per run: hidden; load"))
for net in nets:
    rs = [r["result"] for r in runs if r["net"] == net]
    step = {m: med(r["step_ms"][m] for r in rs) for m in ("overlap", "no_overlap", "compute")}
    comm = step["no_overlap"] - step["compute"]
    hidden = (step["no_overlap"] - step["overlap"]) / comm if comm > 0 else float("nan")
    loads = [r["load_before"] for r in runs if r["net"] == net]
    print("%-7s %8.1f %8.1f %8.1f %6.1f %7.2f | %s; %s" % (
        net, step["overlap"], step["no_overlap"], step["compute"], comm, hidden,
        " ".join("%.2f" % r["hidden"] for r in rs), " ".join("%.1f" % l for l in loads)))
print("# where the time goes, medians over runs (ms per step; softirq and idle: whole machine)")
print("%-7s %-10s %8s %8s %8s %8s %8s" % ("net", "mode", "backward", "ddp_wait", "cpu_comm",
                                          "softirq", "idle"))
for net in nets:
    rs = [r["result"] for r in runs if r["net"] == net]
    if "backward_ms" not in rs[0]:
        continue
    for m in ("overlap", "no_overlap", "compute"):
        print("%-7s %-10s %8.1f %8.1f %8.1f %8.1f %8.1f" % (
            net, m, *(med(r[k][m] for r in rs) for k in ("backward_ms", "ddp_wait_ms",
                                                          "cpu_comm_ms", "softirq_ms", "idle_ms"))))
EOF
