#!/usr/bin/env bash
# Models take their input shape from the data (rg_model_new_for): on a 32x32 IDX set (made here
# from the small data folder by padding each 28x28 image with 2 pixels of background),
#   --model cnn     exits 1 before training, with a message naming the data folder and the shape
#                   (its fc1 takes 28x28 images only), not a signal;
#   --model mlp     trains: its fc1 takes the data's 1x32x32 inputs;
#   --model resnet20 --label-smoothing 0.1 trains a step on them too.
source "$(dirname "$0")/lib.sh"
dir="$RG_TRAIN_OUT/data32"
log="$RG_TRAIN_OUT/shape.log"
python3 - "$RG_TRAIN_DATA" "$dir" <<'PY' || fail "could not write the 32x32 data"
import os, struct, sys
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for prefix in ("train", "t10k"):
    with open(os.path.join(src, prefix + "-images-idx3-ubyte"), "rb") as f:
        _, n, h, w = struct.unpack(">IIII", f.read(16))
        data = f.read()
    rows = []
    for i in range(n):
        img = data[i * h * w:(i + 1) * h * w]
        pad = bytes(32 * 2)
        body = b"".join(b"\0\0" + img[r * w:(r + 1) * w] + b"\0\0" for r in range(h))
        rows.append(pad + body + pad)
    with open(os.path.join(out, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 32, 32) + b"".join(rows))
    with open(os.path.join(src, prefix + "-labels-idx1-ubyte"), "rb") as f:
        labels = f.read()
    with open(os.path.join(out, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(labels)
PY

timeout -k 5 60 "$RG_TRAIN" --data-dir "$dir" --model cnn --max-steps 1 >"$log" 2>&1
rc=$?
cat "$log"
[ $rc = 1 ] || fail "--model cnn on 32x32 images: exit $rc, want 1"
grep -q "data32.*1x32x32" "$log" || fail "the message does not name the data folder and 1x32x32"
grep -q "model cnn" "$log" || fail "the message does not name the model"

for model in "mlp" "resnet20 --label-smoothing 0.1"; do
    # shellcheck disable=SC2086 # the model's flags are words
    timeout -k 5 300 "$RG_TRAIN" --data-dir "$dir" --model $model --max-steps 1 --batch-size 16 \
        >"$log" 2>&1 || { tail -n 5 "$log"; fail "--model $model on 32x32 images failed"; }
    echo "PASS: --model $model trains on 1x32x32 images: $(tail -n 1 "$log" | cut -c1-100)"
done
echo "PASS: --model cnn on 32x32 images exits 1 naming the data and its shape"
