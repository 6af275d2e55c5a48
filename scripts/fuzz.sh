#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, -fsanitize=fuzzer,address,undefined) in
# build-fuzz/ and runs each for a bounded time on a copy of its seed corpus. A crash leaves the
# input in build-fuzz/crashes/<target>/; keep it as tests/fuzz/<target>/regressions/<name> (after
# fixing the bug) so that the normal test suite replays it from then on. Exits non-zero on a crash.
#   scripts/fuzz.sh [SECONDS]     default 60 per target; RG_FUZZ_TARGETS="idx" to pick targets
#   scripts/fuzz.sh --build-only  only build them (scripts/test.sh does that beside other work)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
secs=${1:-60}
if ! command -v clang >/dev/null; then
    echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it); skipped"
    exit 0
fi
dir=build-fuzz
targets=${RG_FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
# only the library and the fuzz targets (the rest of the suite is for gcc)
mkdir -p "$dir"
CC=clang cmake -S . -B "$dir" -DRG_FUZZ=ON -DRG_SANITIZE=ON -DRG_CUDA=OFF -DRG_NATIVE=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$dir/fuzz-configure.log" 2>&1 ||
    { cat "$dir/fuzz-configure.log"; exit 1; }
# shellcheck disable=SC2046
cmake --build "$dir" -j"$(nproc)" $(for t in $targets; do echo --target "fuzz_$t"; done) \
    >"$dir/fuzz-build.log" 2>&1 || { tail -n 40 "$dir/fuzz-build.log"; exit 1; }
[ $build_only = 0 ] || exit 0
# run_target T: one target for $secs on its corpus; its summary line, or its log's tail and a
# non-zero exit on a crash.
run_target() {
    local t=$1 corpus="$dir/corpus/$1" crashes="$dir/crashes/$1"
    mkdir -p "$corpus" "$crashes"
    cp -n tests/fuzz/"$t"/* "$corpus"/ 2>/dev/null || true
    [ -d tests/fuzz/"$t"/regressions ] && cp -n tests/fuzz/"$t"/regressions/* "$corpus"/ 2>/dev/null
    # -rss_limit_mb: a reader must not allocate what the file only promises
    if ! RG_NUM_THREADS=1 OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 \
        LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" "$dir/fuzz/fuzz_$t" \
        -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
        -artifact_prefix="$crashes/" -print_final_stats=1 "$corpus" >"$dir/fuzz_$t.log" 2>&1; then
        tail -n 40 "$dir/fuzz_$t.log"
        echo "fuzz.sh: $t FAILED; inputs in $crashes"
        return 1
    fi
    echo "fuzz.sh: $t: $(grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" \
        "$dir/fuzz_$t.log" | tr '\n' ' ')"
}

# One target per core at a time, each on one thread for $secs: the same work per target as one
# after another, in less wall time.
echo "fuzz.sh: $(echo "$targets" | wc -w) targets, ${secs}s each, $(nproc) at a time"
status=0
pids=()
for t in $targets; do
    run_target "$t" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$(nproc)" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
