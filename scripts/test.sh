#!/usr/bin/env bash
# The full test suite: the normal build, then the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer. Exits non-zero if anything fails.
#   RG_TEST_SKIP_SANITIZE=1 scripts/test.sh   only the normal build (quicker while developing)
# With clang installed it then runs each fuzz target for RG_FUZZ_SECONDS (default 30, which keeps .ci/run under 20 minutes) through
# scripts/fuzz.sh; RG_TEST_SKIP_FUZZ=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
# Twice as many test slots as cores: most tests wait much of their time (mpirun's start-up,
# stall timeouts, signals), and at -j$(nproc) half the cores sat idle. Measured on 2 cores
# (2026-11-25): Release 222 s -> 152 s, ASan 357 s -> 277 s. Tests on N ranks take N slots
# (PROCESSORS), so at most 2x as many busy processes as cores.
jobs=$(( $(nproc) * 2 ))

echo "== build (Release)"
scripts/build.sh build
echo "== tests (Release)"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${RG_TEST_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== build (ASan + UBSan)"
  scripts/build.sh build-asan -DRG_SANITIZE=ON -DRG_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  echo "== tests (ASan + UBSan)"
  RG_ALLOC_CACHE=0 ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE nosan
fi

if [ "${RG_TEST_SKIP_FUZZ:-0}" != 1 ] && command -v clang >/dev/null; then
  echo "== fuzz (${RG_FUZZ_SECONDS:-30} s per target)"
  scripts/fuzz.sh "${RG_FUZZ_SECONDS:-30}"
fi
