#!/usr/bin/env bash
# ringgrad-bench --ops: a step's wall time per op at 1 and 2 threads, from the trace recorder (the
# bench's marks and the library's op events, rg_trace_set_ops). For the CNN (--only cnn): the
# table has the step's rows (every forward op, backward with each op the CNN's tape holds, the
# optimizer), each column's parts add up to its step within 3% (the rest is the step's own
# bookkeeping: a row that went missing, or an op traced twice, breaks the sum), and the
# convolutions' rows carry most of the step. For ResNet-20 (--only resnet), whose forward rows come
# from the library's layer events, one row per op name: the same sums, and as many Conv2d calls
# forward as conv2d backward (21: a stem, 9 blocks of 2, 2 downsample 1x1s).
#   bench_ops.sh RINGGRAD_BENCH
set -uo pipefail
bench=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
check() { # check MODE ARGS...: ringgrad-bench ARGS --ops, its table checked for MODE
    local mode=$1
    shift
    timeout 120 "$bench" "$@" --ops >"$out" 2>&1 ||
        { cat "$out"; echo "FAIL: ringgrad-bench $* --ops: exit $?"; exit 1; }
    cat "$out"
    python3 - "$mode" "$out" <<'PY' || exit 1
import re, sys
mode, path = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("the step's wall time per op"))
rows = {}  # label -> (depth, calls a step, ms at 1 thread, ms at 2)
for l in lines[head + 2:]:
    m = re.match(r"^( *)(\S.*?)(?: \((\d+)\))?\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+x\s+-?[0-9.]+$", l)
    if not m:
        break
    rows[m.group(2)] = (len(m.group(1)) // 2, int(m.group(3) or 1), float(m.group(4)),
                        float(m.group(5)))
if mode == "cnn":
    want = ["step", "fwd conv1 + relu", "fwd conv2 + relu + pool", "fwd fc1", "backward",
            "tape walk, hooks", "bwd conv2d_relu_maxpool2d", "bwd conv2d_relu", "bwd linear",
            "bwd linear #2", "bwd cross_entropy", "adam, zero_grad"]
else:
    want = ["step", "forward", "backward", "fwd Conv2d", "fwd BatchNorm2d+ReLU",
            "fwd BatchNorm2d+add+ReLU", "bwd conv2d", "bwd batch_norm2d_relu", "sgd, zero_grad"]
missing = [w for w in want + ["step outside the rows above"] if w not in rows]
assert not missing, "rows missing: %r (have %r)" % (missing, sorted(rows))
if mode == "resnet":
    assert rows["fwd Conv2d"][1] == rows["bwd conv2d"][1] == 21, (rows["fwd Conv2d"],
                                                                  rows["bwd conv2d"])
for col in (2, 3):
    step = rows["step"][col]
    parts = sum(v[col] for k, v in rows.items() if v[0] == 1 and k != "step outside the rows above")
    assert step > 0 and abs(parts - step) <= 0.03 * step, (col, parts, step)
    bwd = sum(v[col] for k, v in rows.items() if v[0] == 2 and not k.startswith(("fwd ", "between")))
    assert abs(bwd - rows["backward"][col]) <= 0.01 + 0.01 * rows["backward"][col], (col, bwd)
    if mode == "cnn":
        conv = sum(rows[k][col] for k in ("fwd conv1 + relu", "fwd conv2 + relu + pool",
                                           "bwd conv2d_relu_maxpool2d", "bwd conv2d_relu"))
        assert conv > 0.5 * step, (col, conv, step)
print("ok: %s, %d rows; the parts add up to the step at 1 and 2 threads" % (mode, len(rows)))
PY
}
check cnn --only cnn --step-only --iters 2
check resnet --only resnet --model resnet20 --image-size 16 --batch 4 --iters 2
echo "PASS"
