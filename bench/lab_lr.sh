#!/usr/bin/env bash
# lab_lr.sh — lab 4 of docs/LABS.md: the learning rate for large batches. SGD (momentum 0.9) on
# Fashion-MNIST, test accuracy after each epoch, for
#   small         batch B, lr                      (the tuned small-batch run)
#   big           batch k x B, lr                  (no scaling: k times fewer, equally long steps)
#   big_scaled    batch k x B, lr x k              (--scale-lr: Goyal et al.'s linear rule)
#   big_warmup    batch k x B, lr x k, ramped from lr over --warmup steps (Goyal's gradual warmup)
# The big batch is emulated on one process with --accum-steps k, which tests/train/equiv.sh proves
# equal to k ranks at batch B (the same images in each step, the same weights).
#
#   bench/lab_lr.sh [--epochs 3] [--batch 64] [--k 8] [--lr 0.05] [--warmup 100] [--threads 2]
#                   [--out bench/results] [--bin build/bin/ringgrad-train]
#
# Writes OUT/lab_lr.jsonl: one line per config and epoch ({"config", "epoch", "test_accuracy",
# "train_loss", "load"}), for scripts/plot_bench.py lab_lr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
epochs=3 batch=64 k=8 lr=0.05 warmup=100 threads=2 out="$ROOT/bench/results"
bin="$ROOT/build/bin/ringgrad-train"
while [ $# -gt 0 ]; do
    case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lab_lr.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
jsonl="$out/lab_lr.jsonl"
: >"$jsonl"
common=(--optim sgd --momentum 0.9 --lr "$lr" --epochs "$epochs" --batch-size "$batch"
        --threads "$threads" --seed 1)
run() { # NAME ARGS...
    local name=$1 load
    shift
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "lab_lr: $name: ringgrad-train ${common[*]} $*" >&2
    RG_PROGRESS=lines "$bin" "${common[@]}" "$@" |
        awk -v name="$name" -v load="$load" '
            /^Epoch [0-9]+\// { split($2, e, "/"); epoch = e[1] }
            /test_accuracy:/ {
                match($0, /loss: [0-9.na]+/); loss = substr($0, RSTART + 6, RLENGTH - 6)
                match($0, /test_accuracy: [0-9.]+/); acc = substr($0, RSTART + 15, RLENGTH - 15)
                printf "{\"config\":\"%s\",\"epoch\":%d,\"test_accuracy\":%s,\"train_loss\":%s,\"load\":%s}\n",
                       name, epoch, acc, (loss ~ /^[0-9.]+$/ ? loss : "null"), load
                fflush()
            }' | tee -a "$jsonl"
}
run small
run big --accum-steps "$k"
run big_scaled --accum-steps "$k" --scale-lr
run big_warmup --accum-steps "$k" --scale-lr --warmup-steps "$warmup"
echo "lab_lr: wrote $jsonl" >&2
