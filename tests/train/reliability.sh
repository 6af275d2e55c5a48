#!/usr/bin/env bash
# Every bad input and fault of issue 10, run one after another: the command, its exit status and
# its first message, as the Markdown table of docs/RELIABILITY.md (written to
# $RG_TRAIN_OUT/reliability/table.md; scripts/reliability_table.sh copies it into the doc).
# The test fails when a case ends by a signal it did not ask for (exit > 128 other than the
# 130/143 of an interrupted run), hangs (60 s), exits with another status than expected, prints
# another message, or loses or damages a checkpoint it must keep.
# Every case is asserted: its exit code, its message, and never a signal or a hang.
TRAIN_TIMEOUT=60
source "$(dirname "$0")/lib.sh"
out="$RG_TRAIN_OUT/reliability"
rm -rf "$out"
mkdir -p "$out"
table="$out/table.md"
failures=0
n=0
D=$RG_TRAIN_DATA

# shorten: paths of this run shown as $OUT and $DATA, one line, at most 200 characters
src=$(cd "$HERE/../.." && pwd)
shorten() {
    # (the source tree's folder left out of a fatal message's file:line)
    sed -e 's/.*\(ringgrad-train: \)/\1/' -e "s|$out|\$OUT|g" -e "s|$D|\$DATA|g" -e "s|$src/||g" \
        -e 's/|/\\|/g' | tr -d '\r' | head -c 200
}

# case_ WHAT EXPECT-EXIT EXPECT-REGEX DISPLAY CMD...: runs CMD (output in a log), adds a row
case_() {
    local what=$1 want=$2 re=$3 shown=$4
    shift 4
    n=$((n + 1))
    local log="$out/case$n.log"
    # bash -c: the command may be one of the exported functions below
    timeout -k 5 "$TRAIN_TIMEOUT" bash -c '"$@"' _ "$@" >"$log" 2>&1
    local rc=$?
    local msg
    msg=$(tr '\r' '\n' <"$log" | grep -E -m1 "error|warning|note:|out of memory|Terminated|Interrupt|overrides|Nothing left|\"error\"" | shorten)
    [ -n "$msg" ] || msg=$(tr '\r' '\n' <"$log" | grep -v '^\s*$' | tail -n 1 | shorten)
    local verdict=ok
    if [ "$want" != info ]; then
        if [ $rc = 124 ]; then verdict="FAIL: hung"
        elif [ $rc -gt 128 ] && [ $rc != 130 ] && [ $rc != 143 ]; then verdict="FAIL: signal $((rc - 128))"
        elif [ "$rc" != "$want" ]; then verdict="FAIL: exit $rc, want $want"
        elif [ -n "$re" ] && ! grep -Eq -- "$re" "$log"; then verdict="FAIL: message"
        fi
    else
        verdict="info"
    fi
    [ "${verdict#FAIL}" != "$verdict" ] && { failures=$((failures + 1)); echo "case $n ($what): $verdict"; tail -n 5 "$log"; }
    printf '| %d | %s | `%s` | %s | %s |\n' "$n" "$what" "$shown" "$rc" "$msg" >>"$table.rows"
    [ "$verdict" = ok ] || [ "$verdict" = info ] || printf '|   | **%s** | | | |\n' "$verdict" >>"$table.rows"
}

# bg_signal SIGNALS STEP DISPLAY WHAT WANT ARGS...: a 1-rank run, signalled after STEP steps
bg_signal() {
    local sigs=$1 step=$2 shown=$3 what=$4 want=$5
    shift 5
    n=$((n + 1))
    local log="$out/case$n.log"
    RG_PROGRESS=bar "$RG_TRAIN" --data-dir "$D" "$@" >"$log" 2>&1 &
    local job=$! i
    for i in $(seq 600); do
        [ "$(tr '\r' '\n' <"$log" | sed -n 's/^ *\([0-9]*\)\/[0-9]* \[.*/\1/p' | tail -n 1)" -ge "$step" ] 2>/dev/null && break
        sleep 0.1
    done
    for s in $sigs; do kill -"$s" $job; done
    for i in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    kill -0 $job 2>/dev/null && kill -9 $job
    wait $job
    local rc=$? msg
    msg=$(tr '\r' '\n' <"$log" | grep -E -m1 "Terminated|Interrupt|error" | shorten)
    local verdict=ok
    [ "$rc" = "$want" ] || { verdict="FAIL: exit $rc, want $want"; failures=$((failures + 1)); echo "case $n: $verdict"; }
    printf '| %d | %s | `%s` | %s | %s |\n' "$n" "$what" "$shown" "$rc" "$msg" >>"$table.rows"
    [ "$verdict" = ok ] || printf '|   | **%s** | | | |\n' "$verdict" >>"$table.rows"
}

T=(timeout -k 5 "$TRAIN_TIMEOUT")
tr1() { "$RG_TRAIN" --data-dir "$D" "$@"; }
mpmd() { # "RANK0 ARGS" "RANK1 ARGS" [ENV FOR RANK 1]
    # shellcheck disable=SC2206
    local a=($1) b=($2)
    "$RG_MPIRUN" -np 1 "$RG_TRAIN" --data-dir "$D" "${a[@]}" : -np 1 ${3:+-x "$3"} "$RG_TRAIN" --data-dir "$D" "${b[@]}"
}
M=(--model mlp --batch-size 48 --epochs 1)
export -f tr1 mpmd
export D RG_TRAIN RG_MPIRUN

# ---- files to spoil
ck="$out/good.safetensors"
tr1 "${M[@]}" --max-steps 3 --save "$ck" >/dev/null 2>&1 || fail "cannot make a checkpoint"
python3 - "$ck" "$out" <<'PY'
import json, struct, sys
src, out = sys.argv[1], sys.argv[2]
blob = bytearray(open(src, "rb").read())
(n,) = struct.unpack_from("<Q", blob, 0)
h = json.loads(blob[8:8 + n])
def write(name, header, data):
    t = json.dumps(header, separators=(",", ":")).encode()
    open(out + "/" + name, "wb").write(struct.pack("<Q", len(t)) + t + data)
data = bytes(blob[8 + n:])
lo = h["fc1.bias"]["data_offsets"][0]
nan = bytearray(data); nan[lo:lo + 4] = struct.pack("<f", float("nan"))
write("nan.safetensors", h, bytes(nan))
big = dict(h); big["__metadata__"] = dict(h["__metadata__"], epoch="1000000000000")
write("epoch1e12.safetensors", big, data)
open(out + "/half.safetensors", "wb").write(blob[: len(blob) // 2])
PY
cp -r "$D" "$out/data_2pow31"
python3 - "$out/data_2pow31/train-images-idx3-ubyte" <<'PY'
import struct, sys, os
p = sys.argv[1]
if not os.path.exists(p):
    import gzip; raw = gzip.open(p + ".gz").read(); os.remove(p + ".gz")
else:
    raw = open(p, "rb").read()
open(p, "wb").write(raw[:4] + struct.pack(">I", 1 << 31) + raw[8:])
PY
mkdir -p "$out/data_loop" && cp "$D"/* "$out/data_loop/"
rm -f "$out/data_loop"/train-images-idx3-ubyte*
ln -s "$out/data_loop/loop" "$out/data_loop/train-images-idx3-ubyte.gz"
ln -s "$out/data_loop/train-images-idx3-ubyte.gz" "$out/data_loop/loop"
mkdir -p "$out/data_fifo" && cp "$D"/* "$out/data_fifo/"
rm -f "$out/data_fifo"/train-labels-idx1-ubyte*
mkfifo "$out/data_fifo/train-labels-idx1-ubyte"
long=$(printf 'x%.0s' $(seq 5000))
ck_sum=$(md5sum <"$ck")

# ---- checkpoints and NaN
case_ "NaN in a checkpoint's weights (--init)" 1 "tensor 'fc1.bias' holds a non-finite value" \
    "--init nan.safetensors" tr1 "${M[@]}" --init "$out/nan.safetensors"
case_ "NaN in a checkpoint's weights (--resume)" 1 "non-finite value" \
    "--resume nan.safetensors" tr1 "${M[@]}" --resume "$out/nan.safetensors"
case_ "training diverges (loss NaN), with --json" 1 "training diverged.*first non-finite gradient" \
    "--optim sgd --lr 1e6 --init good.safetensors --save good.safetensors --json" \
    tr1 "${M[@]}" --optim sgd --lr 1e6 --init "$ck" --save "$ck" --json
[ "$(md5sum <"$ck")" = "$ck_sum" ] || { failures=$((failures + 1)); echo "the checkpoint was overwritten"; }
tail -n 1 "$out/case$n.log" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["error"]' ||
    { failures=$((failures + 1)); echo "--json is not valid JSON with an error"; }
case_ "diverging on 2 ranks" 1 "rank 0: error: step [0-9]+ .*training diverged" \
    "mpirun -np 2 ... --optim sgd --lr 1e6" "$RG_MPIRUN" -np 2 "$RG_TRAIN" --data-dir "$D" "${M[@]}" --optim sgd --lr 1e6
case_ "checkpoint cut in half" 1 "truncated" "--resume half.safetensors" tr1 "${M[@]}" --resume "$out/half.safetensors"
case_ "checkpoint metadata epoch 1e12" 1 "checkpoint is damaged or from another run" \
    "--resume epoch1e12.safetensors" tr1 "${M[@]}" --resume "$out/epoch1e12.safetensors"
case_ "resume with another global batch" 1 "resume with --batch-size 48" \
    "--batch-size 24 --resume good.safetensors" tr1 --model mlp --batch-size 24 --epochs 1 --resume "$ck"
case_ "resume on ranks that cannot share the global batch" 1 "cannot share evenly" \
    "mpirun -np 5 ... --batch-size 10 --resume good.safetensors" "$RG_MPIRUN" -np 5 "$RG_TRAIN" --data-dir "$D" --model mlp --batch-size 10 --epochs 1 --resume "$ck"
case_ "--lr with --resume" 0 "--lr 0.5 overrides the learning rate" \
    "--resume good.safetensors --lr 0.5 --max-steps 4" tr1 "${M[@]}" --resume "$ck" --lr 0.5 --max-steps 4
case_ "--resume with another --seed" 0 "note: .* was saved by a run with --seed [0-9]+; this run's --seed 99 shuffles" \
    "--resume good.safetensors --seed 99 --max-steps 4" tr1 "${M[@]}" --resume "$ck" --seed 99 --max-steps 4
cp "$ck" "$out/done.safetensors"
tr1 "${M[@]}" --resume "$out/done.safetensors" --save "$out/done.safetensors" >/dev/null 2>&1
case_ "resume a finished run" 0 "Nothing left to train.*test_accuracy: 0\.[0-9]*[1-9]" \
    "--resume done.safetensors" tr1 "${M[@]}" --resume "$out/done.safetensors"

# ---- output paths, pipes, signals
case_ "--save into a missing folder" 1 "--save .*No such file or directory" "--save missing/x" tr1 "${M[@]}" --save "$out/missing/x"
case_ "--timeline into a missing folder" 1 "--timeline .*No such file or directory" "--timeline missing/x" tr1 "${M[@]}" --timeline "$out/missing/x"
case_ "--save under a regular file" 1 "Not a directory" "--save good.safetensors/x" tr1 "${M[@]}" --save "$ck/x"
case_ "--save names a folder" 1 "--save .*: is a folder; give a file name in it" "--save ." tr1 "${M[@]}" --save "$out"
case_ "--save path of 5,000 characters" 1 "5[0-9]{3} characters long; the limit is 4095" "--save xxxx...(5000)" tr1 "${M[@]}" --save "$out/$long"
case_ "stdout piped into head -n 1" 0 "" "ringgrad-train ... | head -n 1" \
    bash -c "set -o pipefail; \"$RG_TRAIN\" --data-dir \"$D\" --model mlp --batch-size 48 --epochs 2 --save \"$out/pipe.safetensors\" | head -n 1 >/dev/null; exit \${PIPESTATUS[0]}"
# The signalled runs are given far more epochs than they can finish (an epoch takes ~60 ms here), so
# that the signals always find them running: with 50 epochs (about 4 s) a loaded machine once kept
# the polling shell off the CPU until the run had ended (exit 0, "kill: No such process").
bg_signal TERM 5 "kill -TERM (mid-epoch, --save)" "SIGTERM: finish the step, save, 143" 143 \
    --model mlp --batch-size 16 --epochs 100000 --save "$out/term.safetensors"
[ -s "$out/term.safetensors" ] || { failures=$((failures + 1)); echo "no checkpoint after SIGTERM"; }
bg_signal "INT INT" 3 "kill -INT twice" "second SIGINT exits at once" 130 --model mlp --batch-size 16 \
    --epochs 100000

# ---- ranks that disagree
case_ "--comm mpi on rank 0, ring on rank 1" 1 "--comm/\\\$RG_COMM is mpi on rank 0, ring on rank 1" \
    "mpirun -np 1 ... --comm mpi : -np 1 ... --comm ring" mpmd "--model mlp --comm mpi" "--model mlp --comm ring"
case_ "RG_COMM=ring on rank 1 only" 1 "ring on rank 1" "mpirun -np 1 ... : -np 1 -x RG_COMM=ring ..." \
    mpmd "--model mlp" "--model mlp" RG_COMM=ring
case_ "--batch-size 16 / 32" 1 "--batch-size is 16 on rank 0, 32 on rank 1" "... --batch-size 16 : ... --batch-size 32" \
    mpmd "--model mlp --batch-size 16" "--model mlp --batch-size 32"
case_ "--lr, --optim, --seed differ" 1 "--optim is adam on rank 0, sgd on rank 1" "... --lr 0.1 --seed 1 : ... --lr 0.2 --optim sgd --seed 2" \
    mpmd "--model mlp --lr 0.1 --seed 1" "--model mlp --lr 0.2 --optim sgd --seed 2"
case_ "--save on rank 1 only" 1 "--save is unset on rank 0, set on rank 1" "... : ... --save x" \
    mpmd "--model mlp" "--model mlp --save $out/one.safetensors"
case_ "--init of a missing file" 1 "no-such.safetensors: cannot open" "mpirun -np 2 ... --init no-such.safetensors" \
    "$RG_MPIRUN" -np 2 "$RG_TRAIN" --data-dir "$D" --model mlp --init "$out/no-such.safetensors"

# ---- data
case_ "IDX header claiming 2^31 images" 1 "absurd header: 2147483648 x 28 x 28" "--data-dir data_2pow31" \
    "$RG_TRAIN" --data-dir "$out/data_2pow31" "${M[@]}"
case_ "data file is a symlink loop" 1 "Too many levels of symbolic links" "--data-dir data_loop" \
    "$RG_TRAIN" --data-dir "$out/data_loop" "${M[@]}"
case_ "--data-dir missing" 1 "Fashion-MNIST not found" "--data-dir /nonexistent" "$RG_TRAIN" --data-dir /nonexistent "${M[@]}"
case_ "data file is a FIFO" 1 "not a regular file \\(a FIFO\\)" "--data-dir data_fifo" timeout 10 "$RG_TRAIN" --data-dir "$out/data_fifo" "${M[@]}"
mkdir -p "$out/data_14x56" && cp "$D"/* "$out/data_14x56/"
python3 - "$out/data_14x56" <<'PY'
import gzip, os, struct, sys
for split in ("train", "t10k"):
    p = os.path.join(sys.argv[1], split + "-images-idx3-ubyte")
    raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
    for q in (p, p + ".gz"):
        if os.path.exists(q): os.remove(q)
    open(p, "wb").write(raw[:8] + struct.pack(">II", 14, 56) + raw[16:])
PY
case_ "images of 14x56, not 28x28 (CNN)" 1 "14x56" "--data-dir data_14x56 --model cnn" \
    "$RG_TRAIN" --data-dir "$out/data_14x56" --model cnn --batch-size 48 --max-steps 2
case_ "RG_NUM_THREADS=abc" 2 "RG_NUM_THREADS='abc': expected a whole number" "RG_NUM_THREADS=abc ringgrad-train" env RG_NUM_THREADS=abc "$RG_TRAIN" --data-dir "$D" "${M[@]}" --max-steps 1
case_ "RG_CPU_MEM_LIMIT=abc" 2 "RG_CPU_MEM_LIMIT='abc': expected a size in bytes" "RG_CPU_MEM_LIMIT=abc ringgrad-train" env RG_CPU_MEM_LIMIT=abc "$RG_TRAIN" --data-dir "$D" "${M[@]}" --max-steps 1
case_ "a step needs more memory than the host gives" 1 "out of memory allocating 41.5 MB for a float32 tensor \\(480,32,26,26\\)" \
    "RG_CPU_MEM_LIMIT=40M ringgrad-train --model cnn --batch-size 480" env RG_CPU_MEM_LIMIT=40M "$RG_TRAIN" --data-dir "$D" --model cnn --batch-size 480 --max-steps 1
case_ "the model's weights do not fit" 1 "Linear fc1: out of memory allocating 4.72 MB" \
    "RG_CPU_MEM_LIMIT=2M ringgrad-train --model cnn" env RG_CPU_MEM_LIMIT=2M "$RG_TRAIN" --data-dir "$D" --model cnn --max-steps 1
case_ "RG_STALL_SECONDS=abc" 1 "RG_STALL_SECONDS=\"abc\" is not a number of seconds" "RG_STALL_SECONDS=abc ringgrad-train" env RG_STALL_SECONDS=abc "$RG_TRAIN" --data-dir "$D" "${M[@]}" --max-steps 1

{
    echo "| # | bad input or fault | command (ringgrad-train ...) | exit | first message |"
    echo "|---|---|---|---|---|"
    cat "$table.rows"
} >"$table"
rm -f "$table.rows"
cat "$table"
[ $failures = 0 ] || fail "$failures case(s) failed"
echo "PASS: $n cases: no asserted case aborted, hung or lost a checkpoint "
