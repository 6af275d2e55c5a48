#!/usr/bin/env bash
# lab_buckets.sh — lab 2: the DDP bucket size against images/s on 2 simulated hosts joined by a
# 1 Gbit/s link (scripts/sim-cluster.sh), from one bucket per tensor to one bucket for the whole
# gradient, and --no-overlap (one allreduce after backward).
#
#   bench/lab_buckets.sh [--buckets "0.000001 0.01 0.1 0.5 1 2 4 8 25"] [--repeats 2]
#                        [--steps 15] [--batch-size 128] [--hosts 2] [--rate 1gbit]
#                        [--model cnn] [--out bench/results]
#
# Each run is `ringgrad-train --threads 1 --max-steps S --batch-size B --bucket-mb X --timeline`
# on one rank per host; its images/s is ranks x batch / the median step time (bench/trace_steps.py,
# the first 3 steps left out), with the time per step the comm thread spent in allreduce and the
# fraction of it that overlapped backward. The sizes (and --no-overlap, "none") take turns within
# a repeat, so a burst of load from other jobs hits them alike; the cluster is set up once.
# Results: OUT/lab_buckets.jsonl, one line per run with the load average before it; plot with
#   /usr/bin/python3 scripts/plot_bench.py lab_buckets bench/results/lab_buckets.jsonl \
#       -o docs/images/lab_buckets.png
# Needs root and network namespaces (exits 77 where scripts/sim-cluster.sh check says no).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
SIM="$ROOT/scripts/sim-cluster.sh"
buckets="0.000001 0.01 0.1 0.5 1 2 4 8 25" repeats=2 steps=15 batch=128 hosts=2 rate=1gbit
model=cnn out="$ROOT/bench/results"
while [ $# -gt 0 ]; do
    case "$1" in
    --buckets) buckets=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_buckets.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/ringgrad-train" ] || { echo "lab_buckets.sh: build first (cmake --build build)" >&2; exit 1; }
if ! "$SIM" check >/dev/null 2>&1; then
    echo "lab_buckets.sh: SKIPPED: $("$SIM" check 2>&1 | tail -1)" >&2
    exit 77
fi
mkdir -p "$out"
jsonl="$out/lab_buckets.jsonl"
: >"$jsonl"
tmp=$(mktemp -d)
id="lb$$"
trap '"$SIM" down --id "$id" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
"$SIM" up "$hosts" --rate "$rate" --id "$id" >/dev/null

for r in $(seq "$repeats"); do
    for b in $buckets none; do
        if [ "$b" = none ]; then opt=(--no-overlap); else opt=(--bucket-mb "$b"); fi
        load=$(cut -d' ' -f1 /proc/loadavg)
        "$SIM" mpirun --id "$id" -- -np "$hosts" "$BIN/ringgrad-train" --model "$model" --threads 1 \
            --max-steps "$steps" --batch-size "$batch" "${opt[@]}" --timeline "$tmp/trace.json" \
            >/dev/null
        steps_json=$(python3 "$ROOT/bench/trace_steps.py" "$tmp/trace.json" --batch-size "$batch")
        echo "{\"bucket_mb\":$([ "$b" = none ] && echo null || echo "$b"),\"no_overlap\":$([ "$b" = none ] && echo true || echo false),\"hosts\":$hosts,\"rate\":\"$rate\",\"model\":\"$model\",\"repeat\":$r,\"load_before\":$load,\"trace\":$steps_json}" |
            tee -a "$jsonl" | python3 -c 'import json,sys
r = json.loads(sys.stdin.read())
print("bucket %-8s repeat %d: %7.1f img/s, comm %.1f ms/step, overlap %.2f (load %.1f)" % (
    r["bucket_mb"] if r["bucket_mb"] is not None else "none", r["repeat"],
    r["trace"]["images_per_sec"], r["trace"].get("comm_ms") or 0, r["trace"].get("overlap") or 0,
    r["load_before"]), file=sys.stderr)'
    done
done
echo "lab_buckets.sh: $(wc -l <"$jsonl") runs in $jsonl; load now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
