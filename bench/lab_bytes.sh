#!/usr/bin/env bash
# lab_bytes.sh — docs/LABS.md, lab 6 (first part): what each strategy sends and what it keeps.
# Runs the CNN on 2 ranks for a few steps (synthetic data: only the sizes matter) with
#   ddp (float32), ddp --compress fp16, ddp --compress powersgd (rank 1, 4, 16), zero1
# and keeps each run's --json line: bytes_per_step (the payload each rank gives the allreduces)
# and optimizer_state_bytes (Adam's moments on one rank).
#
#   bench/lab_bytes.sh [--np 2] [--out bench/results]
# Writes OUT/lab_bytes.jsonl, for scripts/plot_bench.py lab_bytes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
np=2 out="$ROOT/bench/results"
while [ $# -gt 0 ]; do
    case "$1" in
    --np) np=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_bytes.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
jsonl="$out/lab_bytes.jsonl"
: >"$jsonl"
run() { # LABEL FLAGS...
    local label=$1
    shift
    echo "lab_bytes: $label: $*" >&2
    "$ROOT/scripts/rg-mpirun" -np "$np" "$ROOT/build/bin/ringgrad-train" --data synthetic \
        --max-steps 2 --epochs 1 --threads 1 --json "$@" | tail -n 1 |
        sed "s/^{/{\"label\":\"$label\",/" >>"$jsonl"
}
run "ddp float32"
run "ddp fp16" --compress fp16
run "powersgd r=1" --compress powersgd --powersgd-rank 1
run "powersgd r=4" --compress powersgd
run "powersgd r=16" --compress powersgd --powersgd-rank 16
run "zero1" --strategy zero1
cat "$jsonl"
