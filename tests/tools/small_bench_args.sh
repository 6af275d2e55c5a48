#!/usr/bin/env bash
# The small MPI and loader benchmarks' arguments (bench/args.h): --help is the usage and exit 0;
# a bad number, an unknown option or a missing value is exit 2 and a message naming it, before
# MPI starts (atoi once read "--threads -3" as -3 threads, "--factor nan" stopped after one size,
# and "--max 100G" crashed in an unchecked calloc).
#   small_bench_args.sh BIN_DIR
set -uo pipefail
bin=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$out"; exit 1; }
# expect RC PATTERN PROGRAM ARGS... -- the program exits RC and prints PATTERN
expect() {
    local rc=$1 pattern=$2 prog=$3
    shift 3
    timeout 60 "$bin/$prog" "$@" >"$out" 2>&1
    local got=$?
    [ "$got" -eq "$rc" ] || fail "$prog $*: exit $got, expected $rc"
    grep -qF -- "$pattern" "$out" || fail "$prog $*: no '$pattern' in the output"
    echo "ok: $prog $*"
}
for p in allreduce_bench overlap_bench collectives_bench loader_bench cluster_bench; do
    expect 0 "usage: $p" $p --help
    expect 2 "unknown option '--bogus'" $p --bogus 1
done
expect 2 "--factor needs a number from 1.01 to 1024, not 'nan'" allreduce_bench --factor nan
expect 2 "--rounds needs a whole number from 1 to" allreduce_bench --rounds 0
expect 2 "need --min <= --max <= 16G" allreduce_bench --max 100G
expect 2 "need --min <= --max <= 16G (got 1073741824 and 4096 bytes)" allreduce_bench --min 1G --max 4K
expect 2 "a value is missing after '--rounds'" allreduce_bench --rounds
expect 2 "--threads needs a whole number from 1 to 1024, not '-3'" overlap_bench --threads -3
expect 2 "--bucket-mb needs a number from 0.001" overlap_bench --bucket-mb -1
expect 2 "--iters needs a whole number from 1 to 1000000, not 'x'" collectives_bench --iters x
expect 2 "--augment takes none, flip-crop or rrc, not 'bogus'" loader_bench --augment bogus
expect 2 "--batch needs a whole number" loader_bench --batch 0
expect 2 "--reps needs a whole number from 1 to 64, not '0'" cluster_bench --reps 0
echo PASS
