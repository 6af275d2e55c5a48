#!/usr/bin/env bash
# pipeline.sh — ringgrad-train --strategy pipeline end to end: after a few SGD steps (no shuffle,
# no dropout) the checkpoint (weights and optimizer state, gathered from the stages by --save) equals
#   S=2 stages on 2 ranks            == one process at the same batch   (pipeline.sh single)
#   2 pipelines of 2 stages, 4 ranks == --strategy ddp on 2 ranks        (pipeline.sh dp)
# and a control run with lr x 1.01 must differ by more than the tolerance (SGD, MLP: 1e-6, as in
# tests/train/tests.cmake's equivalence tests). Also: 3 ranks for 2 stages is an error.
source "$(dirname "$0")/lib.sh"
mode=$1
cmp="$HERE/ckpt_compare.py"
d=(--model mlp --optim sgd --momentum 0.9 --max-steps 6 --epochs 1 --no-shuffle --dropout 0
   --batch-size 16 --threads 1)
run() { # NAME NP ARGS...
    local name=$1 np=$2
    shift 2
    train "$np" "${d[@]}" --save "$RG_TRAIN_OUT/pipe_$name.st" "$@" >"$RG_TRAIN_OUT/pipe_$name.log" 2>&1 ||
        { tail -n 20 "$RG_TRAIN_OUT/pipe_$name.log"; fail "$name: exit $?"; }
}
case $mode in
single)
    run pipe2 2 --lr 0.05 --strategy pipeline --micro-batches 3
    grep -q "stage 0: flatten..dropout1 (200960 parameters) | stage 1: fc2..fc3 (34186 parameters)" \
        "$RG_TRAIN_OUT/pipe_pipe2.log" || fail "no split line: $(head -n 3 "$RG_TRAIN_OUT/pipe_pipe2.log")"
    run one 1 --lr 0.05
    run one_control 1 --lr 0.0505
    a="$RG_TRAIN_OUT/pipe_pipe2.st"
    ;;
dp)
    run pipe4 4 --lr 0.05 --strategy pipeline --micro-batches 4
    grep -q "pipeline: 2 pipelines of 2 stages" "$RG_TRAIN_OUT/pipe_pipe4.log" || fail "no D=2 line"
    run one 2 --lr 0.05
    run one_control 2 --lr 0.0505
    a="$RG_TRAIN_OUT/pipe_pipe4.st"
    # 3 steps, then resumed to 6: the same file, bit for bit (the optimizer state of each stage
    # gathered into the checkpoint, scattered back to the stages of both pipelines)
    run pipe4_first 4 --lr 0.05 --strategy pipeline --micro-batches 4 --max-steps 3
    run pipe4_resumed 4 --lr 0.05 --strategy pipeline --micro-batches 4 \
        --resume "$RG_TRAIN_OUT/pipe_pipe4_first.st"
    /usr/bin/env python3 "$cmp" "$RG_TRAIN_OUT/pipe_pipe4_resumed.st" "$a" --meta step >/dev/null ||
        fail "3 steps + resume to 6 differs from 6 steps"
    if train 3 "${d[@]}" --strategy pipeline >"$RG_TRAIN_OUT/pipe_bad.log" 2>&1; then
        fail "3 ranks for 2 stages ran"
    fi
    grep -q "needs a multiple of --pipeline-stages ranks" "$RG_TRAIN_OUT/pipe_bad.log" ||
        fail "no message for 3 ranks: $(tail -n 3 "$RG_TRAIN_OUT/pipe_bad.log")"
    ;;
*) fail "unknown mode $mode" ;;
esac
# the whole checkpoint: weights and the optimizer's momentum, gathered from the stages
/usr/bin/env python3 "$cmp" "$a" "$RG_TRAIN_OUT/pipe_one.st" --atol 1e-6 --meta step || fail "checkpoints differ"
/usr/bin/env python3 "$cmp" "$a" "$RG_TRAIN_OUT/pipe_one_control.st" --weights-only --atol 1e-6 \
    --expect-differ || fail "the control run does not differ"
echo "PASS: $mode"
