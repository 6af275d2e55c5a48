#!/usr/bin/env bash
# ringgrad-train --timeline under 2 ranks: the file is valid Chrome-trace JSON with a row per rank
# (main and comm threads), the step's events (forward, backward, ddp_wait, optimizer) and the comm
# thread's allreduces: exactly one per gradient bucket in every step, and at least one starting
# before that step's backward has ended (the overlap DDP exists for).
# The CNN with the default buckets (1 MiB first, then 25 MiB) has 2, in reverse parameter order:
# fc2, fc1.bias and fc1.weight (which takes the first past its 1 MiB and closes it), then conv2
# and conv1. The first is ready once fc1's gradients are, before conv2's backward, the bulk of it.
source "$(dirname "$0")/lib.sh"
out="$RG_TRAIN_OUT/timeline.json"
rm -f "$out"
run_logged "$RG_TRAIN_OUT/timeline.log" 2 --model cnn --batch-size 16 --max-steps 3 --timeline "$out"
python3 "$HERE/../dist/check_timeline.py" "$out" --ranks 2 --expect forward --expect backward \
    --expect ddp_wait --expect optimizer --expect allreduce --step-allreduces 2 --overlap ||
    fail "check_timeline.py rejected $out"
# Into a file, rg-mpirun makes the ranks write finished lines only (RG_PROGRESS=lines), though
# their stdout is a pseudo-terminal under mpirun: no redrawn bars, no ETA.
if grep -q 'ETA:' "$RG_TRAIN_OUT/timeline.log" || grep -q $'\r' "$RG_TRAIN_OUT/timeline.log"; then
    cat "$RG_TRAIN_OUT/timeline.log"
    fail "progress bars were redrawn into a file under rg-mpirun"
fi
grep -q ' 3/30 \[.*ms/step' "$RG_TRAIN_OUT/timeline.log" || fail "no finished progress line in the log"
echo "PASS: timeline of 2 ranks, 2 buckets per step, overlapping backward"
