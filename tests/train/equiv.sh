#!/usr/bin/env bash
# N-rank equivalence, the proof that data parallelism is right (docs/ARCHITECTURE.md,
# "Distribution"): with --no-shuffle and --dropout 0, N ranks at per-rank batch B/N see between them exactly the images
# of 1 rank's batch B (the sampler deals position i to rank i mod N), and the averaged gradient of
# their B/N-image means is the B-image mean. So after the same steps every weight and every
# optimizer state tensor must match the 1-rank run's, up to float rounding: the N ranks add each
# gradient up in another order. B = 48 divides by 2 and by 3.
#   equiv.sh ref NAME FLAGS...                 1 rank at batch 48 -> ref_NAME.safetensors
#   equiv.sh ranks NAME TAG NP COMM TOL FLAGS... NP ranks at 48/NP on COMM (FLAGS may override the
#                                              batch): must match ref_NAME within |a - b| <= TOL
#                                              for every element; files named after TAG
#   equiv.sh weights NAME TAG NP COMM TOL FLAGS...  as ranks, comparing the weights only (for
#                                              --strategy zero1, whose checkpoint has no optimizer
#                                              state: it is sharded over the ranks)
#   equiv.sh ps NAME TAG K W COMM TOL FLAGS...  K parameter servers + W workers (K + W ranks) at
#                                              48/W per worker (FLAGS carry --strategy): the
#                                              weights must match 1 rank at 48, as DDP on W ranks
#                                              does (the optimizer state is on the servers)
#   equiv.sh psdiffer NAME TAG K W COMM TOL FLAGS...  as ps, but must differ (a control)
#   equiv.sh differ NAME TAG TOL FLAGS...      1 rank with FLAGS: must differ from ref_NAME by more
#                                              than TOL somewhere (a control: the tolerance can fail)
#   equiv.sh ranks_differ NAME TAG NP COMM TOL FLAGS...  NP ranks at 48/NP: must differ from
#                                              ref_NAME by more than TOL (a control for a flag that
#                                              makes N ranks equal 1, such as --sync-bn)
source "$(dirname "$0")/lib.sh"
mode=$1 name=$2
shift 2
common=(--no-shuffle --dropout 0 --epochs 1 --seed 42 --bucket-mb 0.05)
ref="$RG_TRAIN_OUT/ref_$name.safetensors"
compare() { python3 "$HERE/ckpt_compare.py" "$@" --meta step --meta epoch; }

case $mode in
ref)
    rm -f "$ref"
    run_logged "$RG_TRAIN_OUT/ref_$name.log" 1 "${common[@]}" --batch-size 48 --save "$ref" "$@"
    echo "PASS: reference $name: $(tail -n 1 "$RG_TRAIN_OUT/ref_$name.log" | cut -c1-120)"
    ;;
ranks | weights)
    tag=$1 np=$2 comm=$3 tol=$4
    shift 4
    only=()
    [ "$mode" = weights ] && only=(--weights-only)
    [ -f "$ref" ] || fail "no reference $ref (did the fixture test train/equiv/ref_$name fail?)"
    out="$RG_TRAIN_OUT/$tag.safetensors"
    rm -f "$out"
    run_logged "${out%.safetensors}.log" "$np" "${common[@]}" --batch-size $((48 / np)) --comm "$comm" --save "$out" "$@"
    compare "$out" "$ref" --atol "$tol" "${only[@]}" || fail "$np ranks ($comm) do not match 1 rank within $tol"
    echo "PASS: $np ranks on $comm ($*) match 1 rank at batch 48 within $tol"
    ;;
ps | psdiffer)
    tag=$1 k=$2 w=$3 comm=$4 tol=$5
    shift 5
    [ -f "$ref" ] || fail "no reference $ref (did the fixture test train/equiv/ref_$name fail?)"
    out="$RG_TRAIN_OUT/$tag.safetensors"
    rm -f "$out"
    run_logged "${out%.safetensors}.log" $((k + w)) "${common[@]}" --batch-size $((48 / w)) --comm "$comm" --servers "$k" --save "$out" "$@"
    if [ "$mode" = psdiffer ]; then
        compare "$out" "$ref" --atol "$tol" --weights-only --expect-differ || fail "the control run ($*) matched"
        echo "PASS: $k servers + $w workers ($*) differ from 1 rank beyond $tol"
        exit 0
    fi
    compare "$out" "$ref" --atol "$tol" --weights-only || fail "$k servers + $w workers ($comm, $*) do not match 1 rank within $tol"
    echo "PASS: $k servers + $w workers on $comm ($*) match 1 rank at batch 48 within $tol"
    ;;
differ)
    tag=$1 tol=$2
    shift 2
    [ -f "$ref" ] || fail "no reference $ref (did the fixture test train/equiv/ref_$name fail?)"
    out="$RG_TRAIN_OUT/$tag.safetensors"
    run_logged "${out%.safetensors}.log" 1 "${common[@]}" --batch-size 48 --save "$out" "$@"
    compare "$out" "$ref" --atol "$tol" --expect-differ || fail "the control run ($*) matched"
    echo "PASS: a run with $* differs from the reference beyond $tol"
    ;;
ranks_differ)
    tag=$1 np=$2 comm=$3 tol=$4
    shift 4
    [ -f "$ref" ] || fail "no reference $ref (did the fixture test train/equiv/ref_$name fail?)"
    out="$RG_TRAIN_OUT/$tag.safetensors"
    run_logged "${out%.safetensors}.log" "$np" "${common[@]}" --batch-size $((48 / np)) --comm "$comm" --save "$out" "$@"
    compare "$out" "$ref" --atol "$tol" --expect-differ || fail "the control run ($np ranks, $*) matched"
    echo "PASS: $np ranks with $* differ from 1 rank beyond $tol"
    ;;
*) fail "unknown mode $mode" ;;
esac
