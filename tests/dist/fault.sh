#!/usr/bin/env bash
# A failing rank must end the whole job: non-zero exit, within a time limit, with a message.
#   fault.sh MPIRUN PROGRAM MODE NP SECONDS PATTERN
# runs `MPIRUN -np NP PROGRAM MODE` (see fault_prog.c) and checks that it exits non-zero within
# SECONDS, that its output matches the extended regex PATTERN, and that no rank is left running.
set -uo pipefail
mpirun=$1 prog=$2 mode=$3 np=$4 limit=$5 pattern=$6

start=$(date +%s.%N)
out=$(timeout -k 5 "$limit" "$mpirun" -np "$np" "$prog" "$mode" 2>&1)
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
echo "$out" | tail -n 40
echo "-- mode $mode: exit $rc after ${elapsed}s"

fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 124 ] && fail "the job hung: still running after ${limit}s"
[ "$rc" -eq 0 ] && fail "the job exited 0"
grep -Eq -- "$pattern" <<<"$out" || fail "no line matches /$pattern/" # no pipe: see install.sh
sleep 1
# "$" too: without it, mode exit matched the ranks of fault_exit0 when the two ran at once
if pgrep -f -- "^$prog $mode\$" >/dev/null; then
  fail "ranks are still running: $(pgrep -af -- "^$prog $mode\$")"
fi
echo "PASS"
