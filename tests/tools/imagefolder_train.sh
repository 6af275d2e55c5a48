#!/usr/bin/env bash
# The whole image path on real data: ringgrad-export-images writes the first 300 Fashion-MNIST
# images of each split as PNG files, and ringgrad-train trains on them with --data imagefolder
# (lazy decoding, 2 workers, flip-crop, normalisation), alone and on 2 ranks. Then bad inputs:
# a damaged PNG, a header claiming 100000x100000 pixels, a FIFO and an empty class folder each
# stop the run before training with exit 1 and a message naming the file -- no signal, no hang.
# Skipped (77) when Fashion-MNIST is not installed.
#   imagefolder_train.sh MPIRUN RINGGRAD_TRAIN RINGGRAD_EXPORT_IMAGES
set -uo pipefail
mpirun=$1 train=$2 export_images=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out.txt
fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$out"; exit 1; }

"$export_images" --limit 300 "$tmp/fm" >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "not installed\|install it" "$out"; then
    echo "SKIPPED: Fashion-MNIST is not installed"; exit 77
fi
[ $rc -eq 0 ] || fail "export exited $rc"
[ "$(find "$tmp/fm/train" -name '*.png' | wc -l)" -eq 300 ] || fail "not 300 training PNGs"
# a second export into the same folder would leave the first one's extra files: refused
"$export_images" --limit 100 "$tmp/fm" >"$out" 2>&1
[ $? -eq 1 ] && grep -q "$tmp/fm/train is not empty" "$out" || fail "export over an export: not refused"
[ "$(find "$tmp/fm/train" -name '*.png' | wc -l)" -eq 300 ] || fail "the refused export changed files"
# the exporter's own usage errors: exit 2, naming the option
"$export_images" --out "$tmp/x" >"$out" 2>&1
[ $? -eq 2 ] && grep -q "unknown option '--out'" "$out" || fail "export --out: not exit 2 naming it"
"$export_images" "$tmp/x" --limit >"$out" 2>&1
[ $? -eq 2 ] && grep -q "a value is missing after '--limit'" "$out" || fail "export --limit without N"

args=(--data imagefolder --data-dir "$tmp/fm" --batch-size 32 --max-steps 4 --epochs 1
      --augment flip-crop --normalize fmnist --workers 2 --json)
RG_PROGRESS=lines timeout 300 "$train" "${args[@]}" >"$out" 2>&1 || fail "1 rank exited $?"
grep -q '"steps":4' "$out" || fail "1 rank: no JSON summary with 4 steps"
grep -q "indexing $tmp/fm/train: 300 images" "$out" || fail "no indexing line"
RG_PROGRESS=lines timeout 300 $mpirun -np 2 "$train" "${args[@]}" --batch-size 16 >"$out" 2>&1 ||
    fail "2 ranks exited $?"
grep -q '"world_size":2' "$out" || fail "2 ranks: no JSON summary"

# expect NAME PATTERN -- the run fails with exit 1 and PATTERN in its output
expect() {
    local name=$1 pattern=$2
    timeout 120 "$train" "${args[@]}" >"$out" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && fail "$name: still running after 120 s"
    [ $rc -ge 128 ] && fail "$name: killed by a signal (exit $rc)"
    [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1"
    grep -qF -- "$pattern" "$out" || fail "$name: no '$pattern' in the output"
    echo "ok: $name"
}
cls=$tmp/fm/train/3_Dress
f=$(ls "$cls" | head -1)
head -c 100 "$cls/$f" >"$tmp/cut.png" && cp "$cls/$f" "$tmp/good.png" && mv "$tmp/cut.png" "$cls/$f"
# a truncated PNG passes indexing (its header is whole) and fails in the loader: reported
# after the epoch, every rank stops
expect "truncated PNG" "$cls/$f: cannot decode the image"
mv "$tmp/good.png" "$cls/$f"
printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\x01\x86\xa0\0\x01\x86\xa0\x08\x02\0\0\0' >"$cls/huge.png"
expect "huge header" "$cls/huge.png: the header claims 100000x100000 pixels"
rm "$cls/huge.png"
mkfifo "$cls/pipe.png"
expect "FIFO" "$cls/pipe.png: is a FIFO"
rm "$cls/pipe.png"
mkdir "$tmp/fm/val/10_Empty"
expect "empty class folder" "$tmp/fm/val/10_Empty: class folder with no images"
rmdir "$tmp/fm/val/10_Empty"
mv "$tmp/fm/val/3_Dress" "$tmp/dress"
expect "a class folder missing from val" "'3_Dress' is only in $tmp/fm/train; both need the same classes"
mv "$tmp/dress" "$tmp/fm/val/3_Dress"
echo "PASS"
