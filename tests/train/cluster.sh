#!/usr/bin/env bash
# ringgrad-train on 2 simulated hosts (scripts/sim-cluster.sh: network namespaces, 1 Gbit/s
# links): 10 steps of the CNN, one rank per host; the --json summary must say world_size 2,
# 10 steps and a finite loss. Exit 77 (skipped) where namespaces are not allowed.
#   cluster.sh SIM_CLUSTER_SH
source "$(dirname "$0")/lib.sh"
sim=$1
"$sim" check || exit $?
log="$RG_TRAIN_OUT/cluster.log"
# timeout sends TERM before CTest's own limit, so sim-cluster.sh still tears the cluster down.
timeout 240 "$sim" run 2 --rate 1gbit --id "tr$$" -- -np 2 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" \
    --max-steps 10 --batch-size 32 --json >"$log" 2>&1
rc=$?
tail -n 5 "$log" | tr '\r' '\n' | tail -n 5
[ $rc = 0 ] || fail "sim-cluster.sh run exited $rc"
tail -n 1 "$log" | python3 -c '
import json, math, sys
s = json.loads(sys.stdin.read())
assert s["world_size"] == 2, "world_size %r" % s["world_size"]
assert s["steps"] == 10, "steps %r" % s["steps"]
assert isinstance(s["train_loss"], float) and math.isfinite(s["train_loss"]), "loss %r" % s["train_loss"]
print("summary: world_size 2, 10 steps, train_loss %.4f" % s["train_loss"])
' || fail "bad --json summary"
echo "PASS: 2 ranks on 2 simulated hosts"
