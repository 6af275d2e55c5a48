# shellcheck shell=bash
# lib.sh — sourced by the tests/train scripts (end-to-end tests of ringgrad-train).
# CTest sets (tests/train/tests.cmake):
#   RG_TRAIN       the ringgrad-train binary        RG_MPIRUN     scripts/rg-mpirun
#   RG_TRAIN_DATA  the small data folder (make_data.py)
#   RG_TRAIN_OUT   a folder for checkpoints, timelines and logs
set -uo pipefail
: "${RG_TRAIN:?}" "${RG_MPIRUN:?}" "${RG_TRAIN_DATA:?}" "${RG_TRAIN_OUT:?}"
# shellcheck disable=SC2034 # used by the scripts that source this file
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$RG_TRAIN_OUT"

fail() {
    echo "FAIL: $*"
    exit 1
}

# Seconds after which a run is killed (exit 124), so that a hang fails the test instead of
# stalling CTest.
TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-300}

# train NP ARGS...: ringgrad-train on the small data, alone (NP 1: no mpirun, a world of one) or
# on NP ranks.
train() {
    local np=$1
    shift
    if [ "$np" = 1 ]; then
        timeout -k 5 "$TRAIN_TIMEOUT" "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" "$@"
    else
        timeout -k 5 "$TRAIN_TIMEOUT" "$RG_MPIRUN" -np "$np" "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" "$@"
    fi
}

# run_logged LOG NP ARGS...: train, output to LOG; on failure print its tail and fail.
run_logged() {
    local log=$1
    shift
    train "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc != 0 ]; then
        tail -n 30 "$log"
        fail "ringgrad-train -np $1 exited $rc (log: $log)"
    fi
}

# seconds since START (date +%s.%N)
elapsed() { echo "$(date +%s.%N) - $1" | bc; }

# The PIDs of ranks running under process $1 (any depth), as "pid rank" lines.
rank_pids() {
    local p kids
    kids=$(pgrep -P "$1" || true)
    for p in $kids; do
        local r
        r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        [ -n "$r" ] && [ "$(basename "$(readlink "/proc/$p/exe" 2>/dev/null)")" = ringgrad-train ] && echo "$p $r"
        rank_pids "$p"
    done
}
