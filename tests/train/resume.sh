#!/usr/bin/env bash
# --resume under MPI continues exactly: 2 ranks trained for 14 steps in one go, and 2 ranks trained
# for 4 steps (--save mid-epoch), then resumed to 14 (--resume, through the end of epoch 0 and its
# evaluation into epoch 1), end with bit-identical checkpoints: weights, Adam state, step, epoch.
# Shuffling and dropout stay on, so the sampler's position and the dropout streams must be
# restored too (10 steps per epoch: 960 images, 2 ranks, batch 48). Extra arguments are added to
# every run, under a name: resume.sh NAME FLAGS... (e.g. augmentation, whose random crops must
# also continue exactly). With --strategy zero1 the 4-step checkpoint is also resumed under ddp,
# which must end where zero1 did: zero1's checkpoints hold the whole optimizer state.
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
if [[ " $* " == *" --strategy zero1 "* ]]; then
    # a zero1 checkpoint holds the whole optimizer state, as ddp's does: resumed under ddp from
    # the 4-step file, the run ends where the zero1 one did (the equivalence tolerance)
    c="$RG_TRAIN_OUT/resume_${tag}_as_ddp.safetensors"
    rm -f "$c"
    ddp_args=()
    skip=0
    for x in "${common[@]}"; do # the same flags but --strategy zero1
        if [ $skip = 1 ]; then skip=0; continue; fi
        if [ "$x" = --strategy ]; then skip=1; continue; fi
        ddp_args+=("$x")
    done
    run_logged "$RG_TRAIN_OUT/resume_${tag}_first2.log" 2 "${common[@]}" --max-steps 4 --save "$c"
    run_logged "$RG_TRAIN_OUT/resume_${tag}_as_ddp.log" 2 "${ddp_args[@]}" --max-steps 14 --resume "$c" --save "$c"
    python3 "$HERE/ckpt_compare.py" "$c" "$a" --atol 1e-5 --rtol 1e-4 --meta step --meta epoch ||
        fail "a zero1 checkpoint resumed under ddp differs from the zero1 run"
    echo "PASS ($tag): the zero1 checkpoint resumes under ddp to the same weights"
fi
echo "PASS ($tag): 4 steps + resume to 14 = 14 steps, bit for bit, on 2 ranks"
