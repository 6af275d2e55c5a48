#!/usr/bin/env bash
# Batches too small for BatchNorm, and options that cannot go together, end before training with
# exit 1 and a message, or train; never a signal or a hang. On a folder of 15 training and 10
# test images of 28x28 (make_data.py; ResNet-18's layer4 has 1x1 planes there):
#   --model resnet18 --batch-size 1         exit 1: one value per channel (PyTorch raises too);
#   ... --batch-size 7                      15 = 2 x 7 + 1: the last batch of one image is
#                                           dropped with a note, 2 steps an epoch;
#   ... --batch-size 1 --sync-bn, 2 ranks   trains: the statistics span both ranks' images;
#   --strategy pipeline, --micro-batches 2, --batch-size 7: the epoch's last batch (1 image) runs
#                                           as one micro-batch (it stopped the job before), 3 steps;
#   --sync-bn with ps-sync or pipeline      exit 1 (it hung: the servers and the other stage
#                                           never joined the BatchNorm allreduce).
source "$(dirname "$0")/lib.sh"
log="$RG_TRAIN_OUT/bn_batch.log"
TRAIN_TIMEOUT=120

# expect_exit RC PATTERN NP ARGS...: the run exits RC, PATTERN (fixed string) in its output
expect_exit() {
    local want=$1 pattern=$2
    shift 2
    train "$@" >"$log" 2>&1
    local rc=$?
    [ $rc = 124 ] && { tail -n 5 "$log"; fail "ringgrad-train -np $1 ${*:2}: still running after ${TRAIN_TIMEOUT} s"; }
    [ $rc = "$want" ] || { tail -n 20 "$log"; fail "ringgrad-train -np $1 ${*:2}: exit $rc, want $want"; }
    grep -qF -- "$pattern" "$log" || { tail -n 20 "$log"; fail "ringgrad-train -np $1 ${*:2}: no '$pattern'"; }
    echo "ok: -np $1 ${*:2}: exit $rc, '$pattern'"
}

export RG_PROGRESS=lines
# 15 images, not the 960 of the other tests: an epoch of ResNet-18 under the sanitizers took 6 s
RG_TRAIN_DATA="$RG_TRAIN_OUT/bn_batch_data"
python3 "$HERE/make_data.py" "$RG_TRAIN_DATA" --train 15 --test 10 >/dev/null ||
    fail "make_data.py could not write $RG_TRAIN_DATA"
expect_exit 1 "one value per channel" 1 --model resnet18 --batch-size 1 --max-steps 1
grep -qF -- "--batch-size 1 " "$log" || fail "the message does not name --batch-size 1"
expect_exit 0 "it is dropped" 1 --model resnet18 --batch-size 7 --epochs 1 --lr 0.01 --json
grep -q '"steps":2,' "$log" || fail "15 images at --batch-size 7 with the last one dropped: not 2 steps"
expect_exit 0 '"steps":2,' 2 --model resnet18 --batch-size 1 --max-steps 2 --sync-bn --json
expect_exit 0 '"steps":3,' 2 --model cnn --strategy pipeline --pipeline-stages 2 \
    --micro-batches 2 --batch-size 7 --epochs 1 --json
expect_exit 1 "takes no --sync-bn" 2 --model resnet20 --strategy ps-sync --servers 1 --sync-bn \
    --max-steps 1
expect_exit 1 "takes no --sync-bn" 2 --model resnet20 --strategy pipeline --pipeline-stages 2 \
    --sync-bn --max-steps 1
echo "PASS"
