#!/usr/bin/env bash
# Writes tests/costs.txt: how long each test took in the last runs of the Release build (build/)
# and of the sanitizer build (build-asan/), from CTest's own records
# (<build>/Testing/Temporary/CTestCostData.txt). cmake/tests.cmake gives each test that figure as
# its COST, and `ctest -j` starts the costly tests first. Without it a fresh clone, which has no
# records, starts the tests in the order they are declared: the end-to-end tests of tests/train,
# declared last, then ran at the end, and the cores idled while the last of them finished.
#   scripts/test-costs.sh [RELEASE_DIR [SANITIZER_DIR]]   after scripts/test.sh, to refresh it
# A test missing from the records (a new one) gets cost 0 and starts after the others; that is
# all a stale file costs.
set -euo pipefail
cd "$(dirname "$0")/.."
release=${1:-build}
sanitize=${2:-build-asan}

# costs DIR: "name seconds" for each test CTest has timed in DIR
costs() {
    local f=$1/Testing/Temporary/CTestCostData.txt
    [ -f "$f" ] || { echo "test-costs.sh: no $f (run scripts/test.sh first)" >&2; exit 1; }
    awk '$0 == "---" { exit } NF == 3 { printf "%s %.1f\n", $1, $3 }' "$f" | sort
}

out=tests/costs.txt
{
    echo "# Seconds per test in the Release and the sanitizer runs of scripts/test.sh (ctest -j,"
    echo "# $(nproc) cores, $(date -u +%Y-%m-%d)); written by scripts/test-costs.sh, read by"
    echo "# cmake/tests.cmake as each test's COST (the order in which ctest -j starts them)."
    echo "# name release sanitizer (- where the test does not run in that build)"
    join -a1 -a2 -e - -o 0,1.2,2.2 <(costs "$release") <(costs "$sanitize")
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "test-costs.sh: $(grep -vc '^#' "$out") tests in $out"
