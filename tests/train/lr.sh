#!/usr/bin/env bash
# lr.sh — ringgrad-train's learning-rate rules for large batches, read back from the checkpoint's
# "optim.lr" metadata (the rate of the next step): --scale-lr multiplies --lr by k = ranks x
# --accum-steps (or by sqrt(k) with --lr-scaling sqrt), and --warmup-steps ramps from the unscaled
# rate to the scaled one, as Goyal et al. 2017 do, not from 0; without --scale-lr it ramps from 1%
# of --lr (or --warmup-start). One rank, k = 4 by accumulation. Also the AdamW default decay.
source "$(dirname "$0")/lib.sh"

lr_after() { # STEPS ARGS...: prints optim.lr of the checkpoint written after STEPS steps
    local steps=$1 out="$RG_TRAIN_OUT/lr_rules.safetensors"
    shift
    rm -f "$out"
    run_logged "$RG_TRAIN_OUT/lr_rules.log" 1 --model mlp --optim sgd --lr 0.1 --epochs 1 \
        --batch-size 8 --max-steps "$steps" --save "$out" "$@"
    python3 - "$out" <<'PY'
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack_from("<Q", blob, 0)
print(json.loads(blob[8:8 + n])["__metadata__"]["optim.lr"])
PY
}

check() { # WANT GOT WHAT
    python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-6)' "$1" "$2" ||
        fail "$3: lr $2, want $1"
    echo "ok: $3: lr $2"
}

check 0.1 "$(lr_after 1 --accum-steps 4)" "no --scale-lr: the rate as given"
check 0.4 "$(lr_after 1 --accum-steps 4 --scale-lr)" "linear rule: 0.1 x k = 4"
check 0.1 "$(lr_after 0 --accum-steps 4 --scale-lr --warmup-steps 4)" "warmup starts at the unscaled rate"
check 0.25 "$(lr_after 2 --accum-steps 4 --scale-lr --warmup-steps 4)" "warmup, step 2 of 4: 0.1 -> 0.4"
check 0.4 "$(lr_after 5 --accum-steps 4 --scale-lr --warmup-steps 4)" "after the warmup: 0.4"
check 0.15 "$(lr_after 2 --accum-steps 4 --scale-lr --lr-scaling sqrt --warmup-steps 4)" \
    "sqrt rule with warmup, step 2 of 4: 0.1 -> 0.2"
# without --scale-lr the warmup ramps from 1% of --lr (torchvision's recipe), or --warmup-start
check 0.001 "$(lr_after 0 --warmup-steps 4)" "no --scale-lr: warmup starts at 0.01 x lr"
check 0.0505 "$(lr_after 2 --warmup-steps 4)" "no --scale-lr, step 2 of 4: 0.001 -> 0.1"
check 0.075 "$(lr_after 2 --warmup-steps 4 --warmup-start 0.5)" "--warmup-start 0.5, step 2 of 4"
check 0.1 "$(lr_after 4 --warmup-steps 4)" "after the warmup: --lr"

# --optim adamw without --weight-decay decays by 0.01, torch.optim.AdamW's default: the same
# weights as --weight-decay 0.01 given, other weights than --weight-decay 0
adamw() { # NAME ARGS...: 3 AdamW steps, saved as adamw_NAME.safetensors
    local name=$1
    shift
    run_logged "$RG_TRAIN_OUT/adamw_$name.log" 1 --model mlp --optim adamw --lr 0.01 --epochs 1 \
        --batch-size 8 --max-steps 3 --save "$RG_TRAIN_OUT/adamw_$name.safetensors" "$@"
}
adamw default
adamw wd001 --weight-decay 0.01
adamw wd0 --weight-decay 0
python3 "$HERE/ckpt_compare.py" "$RG_TRAIN_OUT/adamw_default.safetensors" \
    "$RG_TRAIN_OUT/adamw_wd001.safetensors" >/dev/null || fail "adamw: the default is not 0.01"
python3 "$HERE/ckpt_compare.py" "$RG_TRAIN_OUT/adamw_default.safetensors" \
    "$RG_TRAIN_OUT/adamw_wd0.safetensors" --expect-differ >/dev/null ||
    fail "adamw: the default decays no more than --weight-decay 0"
echo "ok: --optim adamw decays by 0.01 unless --weight-decay says otherwise"
echo "PASS: learning-rate scaling and warmup"
