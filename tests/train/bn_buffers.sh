#!/usr/bin/env bash
# Without --sync-bn, every rank's BatchNorm buffers (running_mean, running_var,
# num_batches_tracked) are rank 0's after training, as under PyTorch DDP (broadcast_buffers): the
# trainer broadcasts them before each forward and before evaluating. ringgrad-train
# --buffer-checksum prints each rank's hash of its buffers before and after the evaluation's
# broadcast: before, the ranks differ (the last forward updated them with each rank's own batch:
# the control that the checksum can tell them apart); after, they are equal, and the same for
# --strategy ddp and zero1 (which take the same steps).
#   bn_buffers.sh STRATEGY
source "$(dirname "$0")/lib.sh"
strategy=$1
log="$RG_TRAIN_OUT/bn_buffers_$strategy.log"
run_logged "$log" 2 --model resnet20 --optim sgd --lr 0.05 --momentum 0.9 --max-steps 3 \
    --batch-size 16 --epochs 1 --strategy "$strategy" --buffer-checksum
grep "buffers" "$log"
sum() { # sum RANK WHEN: that rank's checksum
    sed -n "s/^rank $1: buffers \([0-9a-f]*\) (63 tensors, $2)$/\1/p" "$log"
}
b0=$(sum 0 "before evaluation") b1=$(sum 1 "before evaluation")
e0=$(sum 0 evaluated) e1=$(sum 1 evaluated)
[ -n "$b0" ] && [ -n "$b1" ] && [ -n "$e0" ] && [ -n "$e1" ] ||
    fail "a rank printed no checksum of its 63 buffers (21 BatchNorms x 3)"
[ "$b0" != "$b1" ] || fail "control: the ranks' buffers agree already after their own last forward"
[ "$e0" = "$e1" ] || fail "rank 1's buffers $e1 are not rank 0's $e0 after the broadcast"
[ "$e0" = "$b0" ] || fail "rank 0's buffers changed in its own broadcast"
echo "ok: rank 0 $e0, rank 1 $e1 (before the broadcast: $b1)"
