#!/usr/bin/env bash
# --resume under MPI continues exactly: 2 ranks trained for 26 steps in one go, and 2 ranks trained
# for 9 steps (--save mid-epoch), then resumed to 26 (--resume, through the end of epoch 0 and its
# evaluation into epoch 1), end with bit-identical checkpoints: weights, Adam state, step, epoch.
# Shuffling and dropout stay on, so the sampler's position and the dropout streams must be
# restored too (20 steps per epoch: 960 images, 2 ranks, batch 24).
source "$(dirname "$0")/lib.sh"
common=(--model mlp --batch-size 24 --epochs 2 --seed 7)
a="$RG_TRAIN_OUT/resume_straight.safetensors" b="$RG_TRAIN_OUT/resume_split.safetensors"
rm -f "$a" "$b"
run_logged "$RG_TRAIN_OUT/resume_straight.log" 2 "${common[@]}" --max-steps 26 --save "$a"
run_logged "$RG_TRAIN_OUT/resume_first.log" 2 "${common[@]}" --max-steps 9 --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --expect-differ >/dev/null || fail "9 steps already match 26"
run_logged "$RG_TRAIN_OUT/resume_second.log" 2 "${common[@]}" --max-steps 26 --resume "$b" --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --meta step --meta epoch ||
    fail "the resumed run differs from the uninterrupted one"
echo "PASS: 9 steps + resume to 26 = 26 steps, bit for bit, on 2 ranks"
