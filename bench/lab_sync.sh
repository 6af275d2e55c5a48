#!/usr/bin/env bash
# lab_sync.sh — lab 3 of docs/LABS.md: synchronous against asynchronous updates. The same model,
# data and per-worker batch, W workers, trained by
#   ddp           allreduce on W ranks (synchronous)
#   ps-sync       K parameter servers + W workers (synchronous: equals ddp, tests/train/equiv.sh)
#   ps-async S    the same, each gradient applied on arrival, a worker at most S steps ahead of
#                 the slowest (stale synchronous parallel), for S in --staleness (default 0 2 8)
# each alone and with --straggle: worker 1 sleeps MS ms in every step (an injected straggler).
#
#   bench/lab_sync.sh [--epochs 3] [--model mlp] [--batch 64] [--workers 2] [--servers 1]
#                     [--straggle-ms 5] [--staleness "0 2 8"] [--threads 1]
#                     [--out bench/results] [--bin build/bin/ringgrad-train]
#
# Writes OUT/lab_sync.jsonl: ringgrad-train's own --json summary per run (its epoch_log holds the
# test accuracy and the wall seconds of training, up to every worker's end of epoch, after each
# epoch; ps runs add staleness_hist), with
# "config", "straggle_ms" and "load" (the 1-minute load average at the start) added, for
# scripts/plot_bench.py lab_sync.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
epochs=3 model=mlp batch=64 workers=2 servers=1 straggle=5 staleness="0 2 8" threads=1
out="$ROOT/bench/results" bin="$ROOT/build/bin/ringgrad-train"
while [ $# -gt 0 ]; do
    case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --straggle-ms) straggle=$2; shift 2 ;;
    --staleness) staleness=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_sync.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
jsonl="$out/lab_sync.jsonl"
: >"$jsonl"
common=(--model "$model" --epochs "$epochs" --batch-size "$batch" --threads "$threads" --seed 1
        --json)
run() { # NAME NP STRAGGLE_MS ARGS...
    local name=$1 np=$2 ms=$3 load
    shift 3
    local extra=()
    [ "$ms" != 0 ] && extra=(--straggle "1:$ms")
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "lab_sync: $name (straggle $ms ms): rg-mpirun -np $np ringgrad-train ${common[*]} $* ${extra[*]}" >&2
    RG_PROGRESS=lines "$ROOT/scripts/rg-mpirun" -np "$np" "$bin" "${common[@]}" "$@" "${extra[@]}" |
        tail -n 1 |
        sed "s/^{/{\"config\":\"$name\",\"straggle_ms\":$ms,\"load\":$load,/" | tee -a "$jsonl"
}
for ms in 0 "$straggle"; do
    run ddp "$workers" "$ms" --strategy ddp
    run ps-sync $((servers + workers)) "$ms" --strategy ps-sync --servers "$servers"
    for s in $staleness; do
        run "ps-async S=$s" $((servers + workers)) "$ms" --strategy ps-async --servers "$servers" \
            --max-staleness "$s"
    done
done
echo "lab_sync: wrote $jsonl" >&2
