#!/usr/bin/env bash
# eval_batch.sh — the evaluation's batch (--eval-batch-size; --json reports it as eval_batch_size):
#   - 1000 images by default on 28x28 images;
#   - on large images at most 4 Mi input values per batch, and never fewer than --batch-size
#     (with a fixed 1000, ResNet-18 at 224 px peaked at 14 GB and ResNet-50 ran out of memory:
#     an evaluation forward keeps its whole batch's activations);
#   - the test accuracy does not depend on it, on 1 rank and on 2 (the ranks score every other
#     batch, whatever its size, and no image twice).
#   eval_batch.sh small|large   the 28x28 checks, or the large images' bound (two runs that
#                               generate 600 MB of synthetic images each: arithmetic that the
#                               sanitizer run leaves to the normal one, label san-twin)
source "$(dirname "$0")/lib.sh"
part=${1:-small}
case $part in small | large) ;; *) fail "eval_batch.sh: small or large, not '$part'" ;; esac
out="$RG_TRAIN_OUT/eval_batch"
field() { # LOG KEY: a field of the --json line
    tail -n 1 "$1" | python3 -c "import json, sys; print(json.load(sys.stdin)['$2'])" ||
        fail "no --json line in $1: $(tail -n 3 "$1")"
}
small() {
    run_logged "$out.trained.log" 1 --model mlp --max-steps 3 --json --save "$out.st"
    [ "$(field "$out.trained.log" eval_batch_size)" = 1000 ] ||
        fail "28x28 images: evaluation batch $(field "$out.trained.log" eval_batch_size), want 1000"
    acc=$(field "$out.trained.log" test_accuracy)
    for np in 1 2; do
        for eb in 7 64; do
            log="$out.np$np.eb$eb.log"
            run_logged "$log" $np --model mlp --max-steps 0 --init "$out.st" --eval-batch-size $eb --json
            [ "$(field "$log" eval_batch_size)" = $eb ] || fail "--eval-batch-size $eb not taken"
            [ "$(field "$log" test_accuracy)" = "$acc" ] ||
                fail "$np rank(s), evaluation batch $eb: test accuracy $(field "$log" test_accuracy), want $acc (batch 1000)"
        done
    done
    echo "PASS: the accuracy independent of the evaluation batch"
}

large() {
    # 1x256x256 images: 4 Mi / 65536 = 64 images per batch, or --batch-size when larger
    big=(--data synthetic --image-size 256 --model mlp --max-steps 0 --json)
    run_logged "$out.big.log" 1 "${big[@]}" --batch-size 16
    # 8,192 training images of 64 KiB: over the 64 MiB kept in memory, so made as they are read
    grep -qF "synthetic: 8,192 training and 1,366 test images of 1x256x256, 10 classes (each made as the loader reads it)" "$out.big.log" ||
        fail "256x256 synthetic images: not the lazy set in: $(head -2 "$out.big.log")"
    [ "$(field "$out.big.log" eval_batch_size)" = 64 ] ||
        fail "256x256 images: evaluation batch $(field "$out.big.log" eval_batch_size), want 64"
    run_logged "$out.big100.log" 1 "${big[@]}" --batch-size 100
    [ "$(field "$out.big100.log" eval_batch_size)" = 100 ] ||
        fail "256x256 images, --batch-size 100: evaluation batch $(field "$out.big100.log" eval_batch_size), want 100"
    echo "PASS: evaluation batches of large images bounded"
}

"$part"
