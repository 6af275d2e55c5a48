#!/usr/bin/env bash
# Ranks must agree on everything that must be equal (issue 10): a difference fails every rank
# before the first collective, with a message naming the setting and the ranks with their values.
#   agree.sh comm     --comm mpi on rank 0, ring on rank 1 (the comparison runs over MPI, before
#                     either backend exists); and RG_COMM=ring set for rank 1 only
#   agree.sh hyper    --batch-size, --lr, --optim, --seed and --momentum differ: all named at once
#   agree.sh save1    --save on rank 1 only
#   agree.sh init     --init of a file that does not exist: rank 0 reads it, both exit 1
#   agree.sh datasize the training sets differ in size (960 and 480 images)
TRAIN_TIMEOUT=60
source "$(dirname "$0")/lib.sh"
mode=$1
log="$RG_TRAIN_OUT/agree_$mode.log"
d=(--data-dir "$RG_TRAIN_DATA" --model mlp --max-steps 2)

# mpmd EXTRA-ARGS-RANK0 -- EXTRA-ARGS-RANK1: exit status in $rc, output in $log
mpmd_run() {
    local a=() b=()
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local start
    start=$(date +%s.%N)
    timeout -k 5 "$TRAIN_TIMEOUT" "$RG_MPIRUN" -np 1 "$RG_TRAIN" "${d[@]}" "${a[@]}" : \
        -np 1 "${MPMD_ENV1[@]}" "$RG_TRAIN" "${d[@]}" "${b[@]}" >"$log" 2>&1
    rc=$?
    grep "ringgrad-train" "$log" | head -n 4
    echo "-- exit $rc after $(elapsed "$start")s"
    [ $rc = 124 ] && fail "hung"
    [ $rc != 0 ] || fail "exit 0"
    grep -q "^Epoch 1" "$log" && fail "trained before failing"
}
# both RE: every rank printed a line matching RE
both() {
    for r in 0 1; do
        grep -Eq -- "^ringgrad-train: rank $r: error: .*$1" "$log" || fail "rank $r: no line matches /$1/"
    done
}
MPMD_ENV1=()
case $mode in
comm)
    mpmd_run --comm mpi -- --comm ring
    both "the ranks' settings differ .*--comm/\\\$RG_COMM is mpi on rank 0, ring on rank 1"
    MPMD_ENV1=(-x RG_COMM=ring)
    mpmd_run -- 
    both "--comm/\\\$RG_COMM is mpi on rank 0, ring on rank 1"
    ;;
hyper)
    mpmd_run --batch-size 16 --lr 0.1 --optim sgd --seed 1 --momentum 0.5 -- \
        --batch-size 32 --lr 0.2 --optim adam --seed 2 --momentum 0.9
    for s in "--batch-size is 16 on rank 0, 32 on rank 1" "--optim is sgd on rank 0, adam on rank 1" \
        "--lr is 0.1 on rank 0, 0.2 on rank 1" "--momentum is 0.5 on rank 0, 0.9 on rank 1" \
        "--seed is 1 on rank 0, 2 on rank 1"; do
        both "the ranks' settings differ .*$s"
    done
    ;;
save1)
    mpmd_run --json -- --json --save "$RG_TRAIN_OUT/agree_save1.safetensors"
    both "--save is unset on rank 0, set on rank 1"
    # --json: rank 0 still prints a valid JSON line, with the reason
    grep '^{' "$log" | tail -n 1 | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert "--save is unset on rank 0" in j["error"], j
' || fail "no valid --json line with the error"
    ;;
init)
    mpmd_run --init "$RG_TRAIN_OUT/no-such.safetensors" -- --init "$RG_TRAIN_OUT/no-such.safetensors"
    grep -q "^ringgrad-train: rank 0: error: .*no-such.safetensors: cannot open: No such file" "$log" ||
        fail "rank 0 does not name the file"
    ;;
datasize)
    half="$RG_TRAIN_OUT/agree_half_data"
    python3 "$HERE/make_data.py" "$half" --train 480 >/dev/null || fail "make_data.py"
    timeout -k 5 "$TRAIN_TIMEOUT" "$RG_MPIRUN" -np 1 "$RG_TRAIN" "${d[@]}" : \
        -np 1 "$RG_TRAIN" --model mlp --max-steps 2 --data-dir "$half" >"$log" 2>&1
    rc=$?
    grep "ringgrad-train" "$log" | head -n 4
    [ $rc != 0 ] && [ $rc != 124 ] || fail "exit $rc"
    both "the number of training images differs between the ranks: 960 on rank 0, 480 on rank 1"
    ;;
*) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode"
