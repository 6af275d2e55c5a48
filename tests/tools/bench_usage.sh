#!/usr/bin/env bash
# ringgrad-bench's bad arguments are exit 2 and a message naming the argument, never a signal:
# an unknown --only, --threads 0, an unknown --model, a model that cannot take the images, and a
# --batch of one image where the model's last planes are 1x1 (BatchNorm needs two values per
# channel in training; these aborted the process before), and a --layer that names no layer
# (it printed an empty table), and --ops for another part than the CNN's step.
#   bench_usage.sh RINGGRAD_BENCH
set -uo pipefail
bench=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
expect() { # expect PATTERN ARGS...: exit 2 and PATTERN in the output
    local pattern=$1
    shift
    timeout 120 "$bench" "$@" >"$out" 2>&1
    local rc=$?
    [ $rc -eq 2 ] || { cat "$out"; echo "FAIL: ringgrad-bench $*: exit $rc, want 2"; exit 1; }
    grep -qF -- "$pattern" "$out" || { cat "$out"; echo "FAIL: ringgrad-bench $*: no '$pattern'"; exit 1; }
    echo "ok: ringgrad-bench $*: exit 2, '$pattern'"
}
expect "--only takes" --only nonsense
expect "--threads needs" --threads 0 --only peak
expect "unknown model 'resnet99'" --only resnet --model resnet99
expect "fc1 takes" --only resnet --model cnn --image-size 32 --iters 1
expect "--batch 1: resnet18 on 7x7 images ends in 1x1 planes" --only resnet --model resnet18 \
    --image-size 7 --batch 1 --iters 1
expect "--ops needs --only cnn" --only conv --ops
expect "--layer r19 names no conv layer (the layers: cnn.conv1, cnn.conv2," --only conv --layer r19
echo "PASS"
