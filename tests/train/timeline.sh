#!/usr/bin/env bash
# ringgrad-train --timeline under 2 ranks: the file is valid Chrome-trace JSON with a row per rank
# (main and comm threads), the step's events (forward, backward, ddp_wait, optimizer) and the comm
# thread's allreduces: exactly one per gradient bucket in every step, and at least one starting
# before that step's backward has ended (the overlap DDP exists for); with --timeline-ops, the
# backward's op events in order, and each bucket's allreduce after the op that made it ready.
# The CNN with the default buckets (1 MiB first, then 25 MiB) has 2, in reverse parameter order:
# fc2, fc1.bias and fc1.weight (which takes the first past its 1 MiB and closes it), then conv2
# and conv1. The first is ready once fc1's gradients are, before conv2's backward, the bulk of it.
#   timeline.sh ps: ps-async --max-staleness 2 on 1 server + 2 workers, worker 1 straggling 50 ms:
#   the server marks one ps_apply per gradient (2 x 8) with its staleness, all <= 2, some > 0,
#   counted as --json's staleness_hist says.
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" = ps ]; then
    out="$RG_TRAIN_OUT/timeline_ps.json"
    rm -f "$out"
    run_logged "$RG_TRAIN_OUT/timeline_ps.log" 3 --model mlp --batch-size 16 --max-steps 8 \
        --strategy ps-async --max-staleness 2 --straggle 1:50 --json --timeline "$out"
    python3 - "$out" "$RG_TRAIN_OUT/timeline_ps.log" <<'PY' || fail "the ps timeline is wrong"
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
applies = [e for e in events if e.get("name") == "ps_apply"]
stale = [e["args"]["staleness"] for e in applies]
summary = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
hist = [stale.count(s) for s in range(3)]
print("ps_apply staleness:", stale, "histogram", hist, "--json", summary["staleness_hist"])
assert len(applies) == 16, len(applies)
assert all(0 <= s <= 2 for s in stale) and max(stale) > 0
assert hist == summary["staleness_hist"]
assert sorted({e["args"]["worker"] for e in applies}) == [0, 1]
PY
    echo "PASS: ps-async timeline: 16 ps_apply events, staleness within the bound, as --json counts"
    exit 0
fi
out="$RG_TRAIN_OUT/timeline.json"
rm -f "$out"
run_logged "$RG_TRAIN_OUT/timeline.log" 2 --model cnn --batch-size 16 --max-steps 3 --timeline "$out" \
    --timeline-ops
python3 "$HERE/../dist/check_timeline.py" "$out" --ranks 2 --expect forward --expect backward \
    --expect ddp_wait --expect optimizer --expect allreduce --step-allreduces 2 --overlap ||
    fail "check_timeline.py rejected $out"
# --timeline-ops: inside each backward, the CNN's ops in reverse order, one event each; the first
# bucket's allreduce starts only after fc1's backward (the second "linear") has ended, since its
# gradients become ready there, and the second only after conv1's (the last op).
python3 - "$out" "$HERE/../dist" <<'PY' || fail "the op events of --timeline-ops are wrong"
import json, sys
sys.path.insert(0, sys.argv[2])
from check_timeline import bucket_allreduces
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
want = ["cross_entropy", "linear", "dropout", "relu", "linear", "reshape", "dropout",
        "conv2d_relu_maxpool2d", "conv2d_relu"]
x = [e for e in events if e.get("ph") == "X"]
for rank in (0, 1):
    mine = [e for e in x if e["pid"] == rank]
    backwards = sorted((e for e in mine if e["name"] == "backward"), key=lambda e: e["ts"])
    ops = sorted((e for e in mine if e["cat"] == "backward op"), key=lambda e: e["ts"])
    # the buckets' allreduces (not the per-step check's); the evaluation's sums come after the
    # steps
    reduces = bucket_allreduces(mine, 2)
    assert len(backwards) == 3 and len(ops) == 3 * len(want), (rank, len(backwards), len(ops))
    for s, b in enumerate(backwards):
        inside = [e for e in ops if b["ts"] <= e["ts"] and e["ts"] + e["dur"] <= b["ts"] + b["dur"]]
        assert [e["name"] for e in inside] == want, (rank, s, [e["name"] for e in inside])
        assert all(e["tid"] == b["tid"] for e in inside)
        fc1_end = inside[4]["ts"] + inside[4]["dur"]
        conv1_end = inside[-1]["ts"] + inside[-1]["dur"]
        first, second = [e for e in reduces if e["ts"] >= b["ts"]][:2]
        assert first["ts"] >= fc1_end, (rank, s, first["ts"], fc1_end)
        assert second["ts"] >= conv1_end, (rank, s, second["ts"], conv1_end)
print("--timeline-ops: 9 ops in each of 3 backwards on 2 ranks; each bucket reduced after its op")
PY
# Into a file, rg-mpirun makes the ranks write finished lines only (RG_PROGRESS=lines), though
# their stdout is a pseudo-terminal under mpirun: no redrawn bars, no ETA.
if grep -q 'ETA:' "$RG_TRAIN_OUT/timeline.log" || grep -q $'\r' "$RG_TRAIN_OUT/timeline.log"; then
    cat "$RG_TRAIN_OUT/timeline.log"
    fail "progress bars were redrawn into a file under rg-mpirun"
fi
grep -q ' 3/30 \[.*ms/step' "$RG_TRAIN_OUT/timeline.log" || fail "no finished progress line in the log"
echo "PASS: timeline of 2 ranks, 2 buckets per step, overlapping backward"
