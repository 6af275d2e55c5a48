#!/usr/bin/env bash
# ringgrad-train refuses a bad RG_NUM_THREADS or --threads with exit 2 and a message before any
# work (no signal: RG_NUM_THREADS=100000 used to segfault inside libgomp), and takes a good one.
#   threads_env.sh RINGGRAD_TRAIN
set -uo pipefail
train=$1
fail=0
for v in abc -3 0 100000 2x; do
    out=$(RG_NUM_THREADS="$v" "$train" --data synthetic --epochs 1 --max-steps 1 2>&1)
    rc=$?
    if [ "$rc" != 2 ] || ! grep -q "RG_NUM_THREADS='$v': expected a whole number" <<<"$out"; then
        echo "FAIL: RG_NUM_THREADS=$v: exit $rc: $out"; fail=1
    else
        echo "ok: RG_NUM_THREADS=$v -> exit 2: $out"
    fi
done
out=$("$train" --threads 100000 --data synthetic --epochs 1 --max-steps 1 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q -- "--threads: 100000 is out of range" <<<"$out" || { echo "FAIL: --threads 100000: $rc $out"; fail=1; }
out=$(RG_NUM_THREADS=2 "$train" --data synthetic --model mlp --epochs 1 --max-steps 1 --json 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q '"threads":2' <<<"$out" || { echo "FAIL: RG_NUM_THREADS=2: $rc $out"; fail=1; }
exit $fail
