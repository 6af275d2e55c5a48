#!/usr/bin/env bash
# header.sh — the two lines rank 0 prints before the first epoch: the model and its parameter
# count, the data, and how the run is laid out (ranks, threads, kernels, strategy and comm, the
# batch per rank and per step, steps per epoch). The expected values are counted here, not read
# from the trainer: the CNN has conv1 1x32x3x3 + 32, conv2 32x64x3x3 + 64, fc1 9216x128 + 128 and
# fc2 128x10 + 10 parameters; make_data.py writes 960 training and 100 test images.
source "$(dirname "$0")/lib.sh"
out="$RG_TRAIN_OUT/header"
params=$((1 * 32 * 9 + 32 + 32 * 64 * 9 + 64 + 9216 * 128 + 128 + 128 * 10 + 10))
commas=$(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$params") # 1,199,882
data="Fashion-MNIST: 960 training and 100 test images of 1x28x28, 10 classes"

expect() { # LOG TEXT: the log holds TEXT (fixed string), before "Epoch 1/"
    local head
    head=$(sed '/^Epoch 1\//q' "$1")
    grep -qF -- "$2" <<<"$head" || fail "$1: no '$2' before the first epoch in: $head"
}

run_logged "$out.np1.log" 1 --model cnn --threads 1 --batch-size 48 --max-steps 1
expect "$out.np1.log" "ringgrad-train: cnn, $commas parameters; $data"
expect "$out.np1.log" "ringgrad-train: 1 rank x 1 thread, cpu ("
expect "$out.np1.log" "; batch 48 a rank, 48 a step; 20 steps an epoch"

run_logged "$out.np2.log" 2 --model cnn --threads 1 --batch-size 24 --accum-steps 2 --max-steps 1
expect "$out.np2.log" "ringgrad-train: 2 ranks x 1 thread, cpu ("
expect "$out.np2.log" "ddp over mpi; batch 24 a rank, 96 a step (2 batches accumulated); 20 batches an epoch, 10 steps"
[ "$(grep -c "parameters;" "$out.np2.log")" = 1 ] || fail "the header printed by more than rank 0"

run_logged "$out.ps.log" 3 --model mlp --threads 1 --batch-size 48 --strategy ps-sync --servers 1 --max-steps 1
expect "$out.ps.log" "ps-sync (2 workers, 1 server) over mpi; batch 48 a worker, 96 a step; 10 steps an epoch"
echo "PASS: the header names the model, the data and the run's layout"
