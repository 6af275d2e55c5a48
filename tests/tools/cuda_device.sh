#!/usr/bin/env bash
# ringgrad-train asked for a GPU it cannot have: --device cuda without a GPU (in a build with or
# without CUDA), alone and under mpirun, and --comm nccl on a machine without a GPU, must each
# exit 1 with a message that says what is missing and what to use instead -- never crash or hang.
# So must ringgrad-bench --device cuda, when the bench is given. Skipped (exit 77) where a GPU is
# present.
#   cuda_device.sh MPIRUN RINGGRAD_TRAIN CUDA_BUILD(ON|OFF) [RINGGRAD_BENCH]
set -uo pipefail
mpirun=$1 train=$2 cuda_build=$3 bench=${4:-}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if command -v nvidia-smi >/dev/null && grep -q '^GPU' <<<"$(nvidia-smi -L 2>/dev/null)"; then
    echo "SKIPPED cuda_device.sh: a GPU is present (the CUDA tests cover --device cuda)"
    exit 77
fi

fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$out"; exit 1; }

# expect NAME PATTERN... -- COMMAND...: exit status 1 and every pattern in the output.
expect() {
    local name=$1; shift
    local patterns=()
    while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
    shift
    timeout 60 "$@" >"$out" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && fail "$name: still running after 60 s"
    [ $rc -ge 128 ] && fail "$name: killed by a signal (exit $rc)"
    grep -qiE 'segmentation|core dumped|backtrace' "$out" && fail "$name: crashed"
    [ $rc -ne 0 ] || fail "$name: exit status 0"
    for p in "${patterns[@]}"; do grep -qF -- "$p" "$out" || fail "$name: no \"$p\" in the output"; done
    echo "ok - $name (exit $rc)"
}

if [ "$cuda_build" = ON ]; then why="the driver found no GPU"; nccl_why="no CUDA device"
else why="this build has no CUDA backend"; nccl_why="has no CUDA"; fi

expect "--device cuda" "no CUDA device is available" "$why" "use --device cpu" -- \
    "$train" --device cuda --epochs 1
expect "--device cuda:0" "--device cuda:0: no CUDA device is available" -- \
    "$train" --device cuda:0 --epochs 1
expect "--device cuda under mpirun" "no CUDA device is available" "use --device cpu" -- \
    "$mpirun" -np 2 "$train" --device cuda --epochs 1
expect "--comm nccl" "nccl" "$nccl_why" -- "$train" --comm nccl --epochs 1
expect "RG_COMM=nccl" "nccl" "$nccl_why" -- env RG_COMM=nccl "$train" --epochs 1
expect "--comm nccl under mpirun" "nccl" "$nccl_why" -- "$mpirun" -np 2 "$train" --comm nccl --epochs 1

if [ -n "$bench" ]; then
    expect "ringgrad-bench --device cuda" "--device cuda: no CUDA device" "$why" -- \
        "$bench" --device cuda --only gemm
    expect "ringgrad-bench --device cuda under mpirun" "no CUDA device" -- \
        "$mpirun" -np 2 "$bench" --device cuda
fi
