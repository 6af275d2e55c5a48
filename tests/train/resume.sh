#!/usr/bin/env bash
# --resume under MPI continues exactly: 2 ranks trained for 14 steps in one go, and 2 ranks trained
# for 4 steps (--save mid-epoch), then resumed to 14 (--resume, through the end of epoch 0 and its
# evaluation into epoch 1), end with bit-identical checkpoints: weights, Adam state, step, epoch.
# Shuffling and dropout stay on, so the sampler's position and the dropout streams must be
# restored too (10 steps per epoch: 960 images, 2 ranks, batch 48). Extra arguments are added to
# every run, under a name: resume.sh NAME FLAGS... (e.g. augmentation, whose random crops must
# also continue exactly).
source "$(dirname "$0")/lib.sh"
tag=${1:-plain}
shift || true
common=(--model mlp --batch-size 48 --epochs 2 --seed 7 "$@")
a="$RG_TRAIN_OUT/resume_${tag}_straight.safetensors" b="$RG_TRAIN_OUT/resume_${tag}_split.safetensors"
rm -f "$a" "$b"
run_logged "$RG_TRAIN_OUT/resume_${tag}_straight.log" 2 "${common[@]}" --max-steps 14 --save "$a"
run_logged "$RG_TRAIN_OUT/resume_${tag}_first.log" 2 "${common[@]}" --max-steps 4 --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --expect-differ >/dev/null || fail "4 steps already match 14"
run_logged "$RG_TRAIN_OUT/resume_${tag}_second.log" 2 "${common[@]}" --max-steps 14 --resume "$b" --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --meta step --meta epoch ||
    fail "the resumed run differs from the uninterrupted one"
echo "PASS ($tag): 4 steps + resume to 14 = 14 steps, bit for bit, on 2 ranks"
