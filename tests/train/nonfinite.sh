#!/usr/bin/env bash
# A run that diverges (SGD at lr 1e6 makes the loss NaN within a few steps) stops at that step
# with a message naming the step, the rank and the first non-finite gradient, exits 1, prints a
# --json line that is valid JSON (null for the non-finite numbers, an "error" field), and leaves
# the last checkpoint as it was (issue 10).
#   nonfinite.sh 1    alone
#   nonfinite.sh 2    on 2 ranks: one message (from the first rank that saw it), both exit 1
#   nonfinite.sh 2 NAME FLAGS...   the same with FLAGS added (--strategy pipeline: each stage
#                     sees its own gradients, and the others learn of them through the flags)
source "$(dirname "$0")/lib.sh"
np=$1
name=${2:-}
shift 2 || shift $#
TRAIN_TIMEOUT=120
out="$RG_TRAIN_OUT/nonfinite_np$np$name"
ck="$out.safetensors"
rm -f "$ck"
common=(--model mlp --batch-size 48 --epochs 1 --seed 3 "$@")
run_logged "$out.first.log" "$np" "${common[@]}" --max-steps 2 --save "$ck"
before=$(md5sum <"$ck")
train "$np" "${common[@]}" --optim sgd --lr 1e6 --init "$ck" --save "$ck" --json >"$out.log" 2>"$out.err"
rc=$?
cat "$out.err"
tail -n 1 "$out.log"
[ $rc = 1 ] || fail "exit $rc, want 1"
[ "$(grep -c "training diverged" "$out.err")" = 1 ] || fail "not exactly one 'training diverged' message"
if [ "$np" = 1 ]; then prefix="ringgrad-train: error:"; else prefix="ringgrad-train: rank 0: error:"; fi
grep -Eq "^$prefix step [0-9]+ \(epoch 0\): training diverged: the loss is (nan|inf|-inf) on ranks? 0.*; first non-finite gradient: fc[0-9]\.(weight|bias)" "$out.err" ||
    fail "the message does not name the step, the rank and the tensor"
tail -n 1 "$out.log" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["error"] and "training diverged" in j["error"], j
assert j["train_loss"] is None, j
' || fail "the --json line is not valid JSON with an error field"
[ "$(md5sum <"$ck")" = "$before" ] || fail "the checkpoint was overwritten"
echo "PASS: divergence on $np rank(s) stops with a clear message and keeps the checkpoint"
