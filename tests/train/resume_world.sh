#!/usr/bin/env bash
# Resume keeps the global batch and the sample order, whatever the number of ranks (issue 10):
# 2 ranks (batch 48) for 4 steps, then 1 rank (batch 96) to step 9, then 3 ranks (batch 32) to
# step 15 (across the epoch boundary: 10 steps per epoch) give the weights and momentum of one
# uninterrupted 15-step run on 1 rank within the N-rank equivalence tolerance of SGD (1e-6, see
# tests.cmake). Shuffling stays on: the order is global, so each rank's share follows from it.
# Then what must fail or be said:
#   - another global batch (1 rank at batch 48; 5 ranks cannot share 96) is an error naming it
#   - --lr with --resume overrides the saved rate and prints a line saying so
#   - resuming a finished run evaluates and reports a real test accuracy
# resume_world.sh [NAME FLAGS...]: FLAGS added to the resumed runs (--strategy zero1: its
# checkpoints carry the whole optimizer state, so the 2 -> 1 -> 3 chain holds under it too).
source "$(dirname "$0")/lib.sh"
tag=${1:-}
shift || true
common=(--model mlp --optim sgd --lr 0.05 --momentum 0.9 --dropout 0 --epochs 2 --seed 7 --bucket-mb 0.05)
chain=("${common[@]}" "$@")
a="$RG_TRAIN_OUT/resume_world${tag}_straight.safetensors" b="$RG_TRAIN_OUT/resume_world${tag}_split.safetensors"
o="$RG_TRAIN_OUT/resume_world$tag"
rm -f "$a" "$b"
run_logged "$o.straight.log" 1 "${common[@]}" --batch-size 96 --max-steps 15 --save "$a"
run_logged "$o.np2.log" 2 "${chain[@]}" --batch-size 48 --max-steps 4 --save "$b"
run_logged "$o.np1.log" 1 "${chain[@]}" --batch-size 96 --max-steps 9 --resume "$b" --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --expect-differ >/dev/null || fail "9 steps already match 15"
run_logged "$o.np3.log" 3 "${chain[@]}" --batch-size 32 --max-steps 15 --resume "$b" --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --atol 1e-6 --meta step --meta epoch ||
    fail "2 -> 1 -> 3 ranks differ from the uninterrupted run"

expect_fail() { # REGEX NP ARGS...
    local re=$1
    shift
    train "$@" >"$o.bad.log" 2>&1
    local rc=$?
    grep "error" "$o.bad.log" | head -n 2
    [ $rc = 1 ] || fail "exit $rc, want 1"
    grep -Eq -- "$re" "$o.bad.log" || fail "no line matches /$re/"
}
expect_fail "error: .*saved with a global batch of 96 images per step; this run has 48 .*resume with --batch-size 96" \
    1 "${common[@]}" --batch-size 48 --resume "$b"
expect_fail "error: .*saved with a global batch of 96 images per step, which 5 ranks .*cannot share evenly" \
    5 "${common[@]}" --batch-size 19 --resume "$b"

run_logged "$o.lr.log" 1 "${common[@]}" --batch-size 96 --resume "$b" --lr 0.001 --max-steps 16
grep -q "^ringgrad-train: --lr 0.001 overrides the learning rate 0.05 saved in" "$o.lr.log" ||
    fail "no line says that --lr overrides the checkpoint"

run_logged "$o.finish.log" 1 "${common[@]}" --batch-size 96 --resume "$b" --save "$b"
run_logged "$o.finished.log" 1 "${common[@]}" --batch-size 96 --resume "$b" --json
tail -n 1 "$o.finished.log" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["test_accuracy"] is not None and j["test_accuracy"] > 0.2, j
' || fail "resuming a finished run does not report its test accuracy"
echo "PASS${tag:+ ($tag)}: 2 -> 1 -> 3 ranks = 1 uninterrupted run; impossible resumes fail; --lr overrides"
