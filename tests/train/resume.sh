#!/usr/bin/env bash
# --resume under MPI continues exactly: 2 ranks trained for 14 steps in one go, and 2 ranks trained
# for 4 steps (--save mid-epoch), then resumed to 14 (--resume, through the end of epoch 0 and its
# evaluation into epoch 1), end with bit-identical checkpoints: weights, Adam state, step, epoch.
# Shuffling and dropout stay on, so the sampler's position and the dropout streams must be
# restored too (10 steps per epoch: 960 images, 2 ranks, batch 48). Extra arguments are added to
# every run, under a name: resume.sh NAME FLAGS... (e.g. augmentation, whose random crops must
# also continue exactly). With --strategy zero1 the 4-step checkpoint is also resumed under ddp,
# and with --strategy pipeline by one process: each must end where the run did, because those
# checkpoints hold the whole optimizer state, as ddp's do.
#
# --same-only (right after NAME, not passed on) skips the checks across strategies: they compare
# within a tolerance, which holds for SGD but not always for Adam on the CNN (tests.cmake says why).
source "$(dirname "$0")/lib.sh"
tag=${1:-plain}
shift || true
same_only=0
if [ "${1-}" = --same-only ]; then same_only=1; shift; fi
common=(--model mlp --batch-size 48 --epochs 2 --seed 7 "$@")
a="$RG_TRAIN_OUT/resume_${tag}_straight.safetensors" b="$RG_TRAIN_OUT/resume_${tag}_split.safetensors"
rm -f "$a" "$b"
run_logged "$RG_TRAIN_OUT/resume_${tag}_straight.log" 2 "${common[@]}" --max-steps 14 --save "$a"
run_logged "$RG_TRAIN_OUT/resume_${tag}_first.log" 2 "${common[@]}" --max-steps 4 --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --expect-differ >/dev/null || fail "4 steps already match 14"
at4="$RG_TRAIN_OUT/resume_${tag}_at4.safetensors" # the 4-step file, kept for the checks below
cp "$b" "$at4"
run_logged "$RG_TRAIN_OUT/resume_${tag}_second.log" 2 "${common[@]}" --max-steps 14 --resume "$b" --save "$b"
python3 "$HERE/ckpt_compare.py" "$b" "$a" --meta step --meta epoch ||
    fail "the resumed run differs from the uninterrupted one"
# The same flags without --strategy and its options (--micro-batches): a ddp run.
ddp_args=()
skip=0
for x in "${common[@]}"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    if [ "$x" = --strategy ] || [ "$x" = --micro-batches ]; then skip=1; continue; fi
    ddp_args+=("$x")
done
# resumed_as NAME NP ARGS...: the 4-step file resumed to 14 steps by another kind of run, which
# must end where the uninterrupted one did (the equivalence tolerance: the strategies sum the
# gradients in other orders)
resumed_as() {
    local name=$1 np=$2 c="$RG_TRAIN_OUT/resume_${tag}_as_$1.safetensors"
    shift 2
    cp "$at4" "$c"
    run_logged "$RG_TRAIN_OUT/resume_${tag}_as_${name}.log" "$np" "$@" --max-steps 14 --resume "$c" --save "$c"
    python3 "$HERE/ckpt_compare.py" "$c" "$a" --atol 1e-5 --rtol 1e-4 --meta step --meta epoch ||
        fail "the 4-step checkpoint resumed as $name differs from the uninterrupted run"
    echo "PASS ($tag): the 4-step checkpoint resumed as $name ends where the run did"
}
if [ $same_only = 1 ]; then
    echo "($tag: --same-only, no checks across strategies)"
elif [[ " $* " == *" --strategy zero1 "* ]]; then
    # a zero1 checkpoint holds the whole optimizer state, as ddp's does
    resumed_as ddp 2 "${ddp_args[@]}"
fi
if [ $same_only = 0 ] && [[ " $* " == *" --strategy ps-sync "* ]]; then
    # the servers' shards of the weights and the state, gathered into rank 0's file: one worker
    # (2 ranks, --servers 1) is one process
    resumed_as ddp_np1 1 "${ddp_args[@]}"
fi
if [ $same_only = 0 ] && [[ " $* " == *" --strategy pipeline "* ]]; then
    # a pipeline checkpoint holds every stage's weights, dropout positions and optimizer state,
    # as one process's does: one process resumes it (dropout on: one pipeline draws the masks
    # one process does; pipeline.sh dp resumes 2 pipelines, without dropout)
    resumed_as ddp_np1 1 "${ddp_args[@]}"
    # and the other way: one process's 4-step file resumed by the pipeline's stages
    d="$RG_TRAIN_OUT/resume_${tag}_from_ddp.safetensors"
    rm -f "$d"
    run_logged "$RG_TRAIN_OUT/resume_${tag}_ddp4.log" 1 "${ddp_args[@]}" --max-steps 4 --save "$d"
    run_logged "$RG_TRAIN_OUT/resume_${tag}_from_ddp.log" 2 "${common[@]}" --max-steps 14 --resume "$d" --save "$d"
    python3 "$HERE/ckpt_compare.py" "$d" "$a" --atol 1e-5 --rtol 1e-4 --meta step --meta epoch ||
        fail "one process's checkpoint resumed by the pipeline differs from the pipeline's run"
    echo "PASS ($tag): one process's 4-step checkpoint resumed by the pipeline ends where it did"
fi
if [[ " $* " == *" --save-every 3 "* ]]; then
    # a periodic file resumes as well: the uninterrupted run's step-9 file, continued to 14
    # (mid-epoch: ps-sync's servers sent their state at that step while the others trained on)
    p="$RG_TRAIN_OUT/resume_${tag}_from_step9.safetensors"
    cp "${a%.safetensors}-step9.safetensors" "$p" || fail "no step-9 file from --save-every 3"
    run_logged "$RG_TRAIN_OUT/resume_${tag}_from_step9.log" 2 "${common[@]}" --max-steps 14 --resume "$p" --save "$p"
    python3 "$HERE/ckpt_compare.py" "$p" "$a" --meta step --meta epoch >/dev/null ||
        fail "the step-9 file resumed to 14 differs from the uninterrupted run"
    echo "PASS ($tag): the --save-every file of step 9 resumes to the same 14 steps, bit for bit"
fi
echo "PASS ($tag): 4 steps + resume to 14 = 14 steps, bit for bit, on 2 ranks"
