#!/usr/bin/env bash
# ringgrad-train --timeline under 2 ranks: the file is valid Chrome-trace JSON with a row per rank
# (main and comm threads), the step's events (forward, backward, ddp_wait, optimizer) and the comm
# thread's allreduces: exactly one per gradient bucket in every step, and at least one starting
# before that step's backward has ended (the overlap DDP exists for).
# The CNN with --bucket-mb 1 has 3 buckets, in reverse parameter order: fc2 and fc1.bias (the
# first bucket, 1 MiB at most), fc1.weight (4.5 MiB: over the cap, alone), conv2 and conv1.
source "$(dirname "$0")/lib.sh"
out="$RG_TRAIN_OUT/timeline.json"
rm -f "$out"
run_logged "$RG_TRAIN_OUT/timeline.log" 2 --model cnn --batch-size 16 --max-steps 3 --bucket-mb 1 --timeline "$out"
python3 "$HERE/../dist/check_timeline.py" "$out" --ranks 2 --expect forward --expect backward \
    --expect ddp_wait --expect optimizer --expect allreduce --step-allreduces 3 --overlap ||
    fail "check_timeline.py rejected $out"
echo "PASS: timeline of 2 ranks, 3 buckets per step, overlapping backward"
