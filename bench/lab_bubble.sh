#!/usr/bin/env bash
# lab_bubble.sh — docs/LABS.md, lab 5: the pipeline's bubble against the number of micro-batches.
# Runs the CNN as a 2-stage GPipe pipeline (--strategy pipeline, 2 ranks) for a few steps at each
# M in --ms, with --timeline, and keeps each run's trace; scripts/lab_bubble.py measures each
# stage's idle fraction from the traces and compares it with (S-1)/(M+S-1).
#
#   bench/lab_bubble.sh [--ms "1 2 4 8 16"] [--batch 64] [--steps 12] [--model cnn] [--out DIR]
# Writes OUT/lab_bubble_M<M>.json (Chrome traces), OUT/lab_bubble.jsonl (each run's --json line)
# and OUT/lab_bubble.env (the load and the CPU).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ms="1 2 4 8 16" batch=64 steps=12 model=cnn out="$ROOT/bench/results"
while [ $# -gt 0 ]; do
    case "$1" in
    --ms) ms=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_bubble.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
{
    echo "date=$(date -u +%FT%TZ)"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cpu=$(lscpu | sed -n 's/^Model name: *//p')"
} >"$out/lab_bubble.env"
: >"$out/lab_bubble.jsonl"
for m in $ms; do
    echo "lab_bubble: M=$m" >&2
    "$ROOT/scripts/rg-mpirun" -np 2 "$ROOT/build/bin/ringgrad-train" --strategy pipeline \
        --pipeline-stages 2 --micro-batches "$m" --model "$model" --batch-size "$batch" \
        --data synthetic --max-steps "$steps" --epochs 1 --threads 1 --optim sgd --lr 0.01 \
        --timeline "$out/lab_bubble_M$m.json" --json | tail -n 1 | tee -a "$out/lab_bubble.jsonl"
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/lab_bubble.env"
cat "$out/lab_bubble.env"
