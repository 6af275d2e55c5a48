#!/usr/bin/env bash
# ringgrad-bench --only cnn --ops: the CNN step's wall time per op at 1 and 2 threads, from the
# trace recorder (the bench's forward marks and the library's --timeline-ops events). Checks that
# the table has the step's rows (every forward op, backward with each op the CNN's tape holds, the
# optimizer), that each column's parts add up to its step within 3% (the rest is the step's own
# bookkeeping: a row that went missing, or an op traced twice, breaks the sum), and that the
# convolutions' rows carry most of the step; and --only resnet --ops, whose forward rows come from
# the library's layer events (a Conv2d forward for every conv2d backward).
#   bench_ops.sh RINGGRAD_BENCH
set -uo pipefail
bench=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 120 "$bench" --only cnn --step-only --ops --iters 2 >"$out" 2>&1 ||
    { cat "$out"; echo "FAIL: ringgrad-bench --only cnn --step-only --ops: exit $?"; exit 1; }
cat "$out"
python3 - "$out" <<'PY' || exit 1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("the step's wall time per op"))
rows = {}
for l in lines[head + 2:]:
    m = re.match(r"^( *)(\S.*?)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+x\s+-?[0-9.]+$", l)
    if not m:
        break
    rows[m.group(2)] = (len(m.group(1)) // 2, float(m.group(3)), float(m.group(4)))
want = ["step", "fwd conv1 + relu", "fwd conv2 + relu + pool", "fwd fc1", "backward",
        "tape walk, hooks", "bwd conv2d_relu_maxpool2d", "bwd conv2d_relu", "bwd linear",
        "bwd linear #2", "bwd cross_entropy", "adam, zero_grad", "step outside the rows above"]
missing = [w for w in want if w not in rows]
assert not missing, "rows missing: %r (have %r)" % (missing, sorted(rows))
for col in (1, 2):
    step = rows["step"][col]
    parts = sum(v[col] for k, v in rows.items() if v[0] == 1 and k != "step outside the rows above")
    ops = sum(v[col] for v in rows.values() if v[0] == 2)
    assert step > 0 and abs(parts - step) <= 0.03 * step, (col, parts, step)
    assert abs(ops - rows["backward"][col]) <= 1e-6 + 0.01 * rows["backward"][col], (col, ops)
    conv = sum(rows[k][col] for k in ("fwd conv1 + relu", "fwd conv2 + relu + pool",
                                       "bwd conv2d_relu_maxpool2d", "bwd conv2d_relu"))
    assert conv > 0.5 * step, (col, conv, step)
print("ok: %d rows; parts add up to the step at 1 and 2 threads" % len(rows))
PY
# --only resnet --ops: one row per op name; the forward's layers (leaf Conv2d and the fused
# groups) come from the library's forward events, as many Conv2d calls forward as conv2d backward
timeout 120 "$bench" --only resnet --model resnet20 --image-size 16 --batch 4 --iters 2 --ops \
    >"$out" 2>&1 || { cat "$out"; echo "FAIL: ringgrad-bench --only resnet --ops: exit $?"; exit 1; }
cat "$out"
python3 - "$out" <<'PY' || exit 1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("the step's wall time per op"))
rows = {}
for l in lines[head + 2:]:
    m = re.match(r"^( *)(\S.*?)(?: \((\d+)\))?\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+x\s+-?[0-9.]+$", l)
    if not m:
        break
    rows[m.group(2)] = (len(m.group(1)) // 2, int(m.group(3) or 1), float(m.group(4)), float(m.group(5)))
want = ["step", "forward", "backward", "fwd Conv2d", "fwd BatchNorm2d+ReLU",
        "fwd BatchNorm2d+add+ReLU", "bwd conv2d", "bwd batch_norm2d_relu", "sgd, zero_grad"]
missing = [w for w in want if w not in rows]
assert not missing, "rows missing: %r (have %r)" % (missing, sorted(rows))
# resnet20: 19 convolutions (a stem, 9 blocks of 2) and 2 downsample 1x1s
assert rows["fwd Conv2d"][1] == rows["bwd conv2d"][1] == 21, (rows["fwd Conv2d"], rows["bwd conv2d"])
for col in (2, 3):
    step = rows["step"][col]
    parts = sum(v[col] for k, v in rows.items() if v[0] == 1 and k != "step outside the rows above")
    assert step > 0 and abs(parts - step) <= 0.03 * step, (col, parts, step)
    inside = sum(v[col] for k, v in rows.items() if v[0] == 2 and k.startswith("fwd "))
    assert inside <= rows["forward"][col] * 1.001 + 0.01, (col, inside, rows["forward"][col])
print("ok: resnet20, %d rows; 21 Conv2d forward and 21 conv2d backward a step" % len(rows))
PY
echo "PASS"
