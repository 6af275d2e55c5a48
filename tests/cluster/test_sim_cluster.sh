#!/usr/bin/env bash
# CTest cluster/sim_cluster_smoke: bring up 2 simulated hosts at 1 Gbit/s, run a 2-rank allreduce
# across them (cluster_smoke checks the sums and that the ranks ran on 2 different hosts), tear the
# cluster down, and check that nothing of it is left.
#   test_sim_cluster.sh SIM_CLUSTER_SH CLUSTER_SMOKE
# Exit 0 pass, 1 fail, 77 skipped (not root, or no network namespaces here).
set -uo pipefail
sim=$1 smoke=$2
"$sim" check || exit $? # prints "SKIPPED: ... (why)" and exits 77 where it cannot work

id="t$$" # unique per run: parallel ctest runs never share a cluster
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# timeout sends TERM before ctest's own limit, so sim-cluster.sh still tears down by itself.
timeout 120 "$sim" run 2 --rate 1gbit --id "$id" -- -np 2 "$smoke" --hosts 2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

fail=0
if [ "$rc" != 0 ]; then
    echo "FAIL: sim-cluster.sh run exited with $rc"
    fail=1
fi
if ! grep -q '^2 ranks on 2 hosts$' "$log" || ! grep -q '^cluster_smoke: passed$' "$log"; then
    echo "FAIL: cluster_smoke did not report 2 ranks on 2 hosts and a passed allreduce"
    fail=1
fi
left=$(ip netns list | awk '{print $1}' | grep "^rg-$id-" || true)
if [ -n "$left" ]; then
    echo "FAIL: namespaces left behind: $left"
    "$sim" down --id "$id"
    fail=1
fi
[ $fail = 0 ] && echo "PASS: 2-rank allreduce across 2 simulated hosts; cluster rg-$id removed"
exit $fail
