#!/usr/bin/env bash
# The full test suite: the normal build, then the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer. Exits non-zero if anything fails.
#   RG_TEST_SKIP_SANITIZE=1 scripts/test.sh   only the normal build (quicker while developing)
# With clang installed it then runs each fuzz target for RG_FUZZ_SECONDS (default 20, which keeps
# .ci/run under 20 minutes) through scripts/fuzz.sh; RG_TEST_SKIP_FUZZ=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
# Three times as many test slots as cores: most tests wait much of their time (mpirun's start-up,
# stall timeouts, signals), and a test on N ranks takes N slots (PROCESSORS), so at 2x the 3-rank
# tests ran one at a time and the cores sat half idle. Measured on 2 cores: 2x instead of 1x,
# Release 222 s -> 152 s and ASan 357 s -> 277 s (2026-11-25, Zen 5); 3x instead of 2x, ASan
# 469 s -> 420 s (2026-11-28, Zen 3).
# ctest starts the longest tests first, by the seconds tests/costs.txt holds for each
# (scripts/test-costs.sh refreshes it after a run).
jobs=$(( $(nproc) * 3 ))
sanitize=1
[ "${RG_TEST_SKIP_SANITIZE:-0}" != 1 ] || sanitize=0

echo "== build (Release)"
scripts/build.sh build
if [ $sanitize = 1 ]; then
  # The sanitizer build runs beside the Release tests, at the lowest priority: it takes only the
  # CPU time the tests leave idle (about a quarter of 2 cores), so that it is mostly done when
  # they are. Its output goes to a file; it is shown if it fails. -g1: line tables and functions,
  # no variables: the sanitizers' reports read the same (inlined frames too), and the build took
  # 117 s instead of 146 s alone on 2 cores (2026-11-29).
  mkdir -p build-asan
  nice -n 19 scripts/build.sh build-asan -DRG_SANITIZE=ON -DRG_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1" \
    >build-asan/test-build.log 2>&1 &
  asan_build=$!
fi
echo "== tests (Release)"
rc=0
ctest --test-dir build --output-on-failure -j"$jobs" || rc=$?
if [ $sanitize = 1 ]; then
  echo "== build (ASan + UBSan)"
  if ! wait "$asan_build"; then
    cat build-asan/test-build.log
    exit 1
  fi
  cat build-asan/test-build.log
fi
[ $rc = 0 ] || exit $rc

fuzz=0
if [ "${RG_TEST_SKIP_FUZZ:-0}" != 1 ] && command -v clang >/dev/null; then fuzz=1; fi
if [ $sanitize = 1 ]; then
  # The fuzz targets build beside the sanitizer tests, at the lowest priority, as the sanitizer
  # build did beside the Release tests (about a minute of 2 cores when cold).
  if [ $fuzz = 1 ]; then
    nice -n 19 scripts/fuzz.sh --build-only >build-asan/fuzz-prebuild.log 2>&1 &
    fuzz_build=$!
  fi
  echo "== tests (ASan + UBSan)"
  # The CPU allocator's cache stays on: under ASan it poisons what is not in use (tensor/cpu/alloc.c),
  # and with it off every tensor was a fresh malloc, whose pages cost 1.3-1.7x the test time where
  # a page fault is slow (11 us on the Zen 5 VM of 2026-11-29). It runs each kernel test once,
  # on the kernels of the CPU's default instruction set (AVX-512 or AVX2), not again for every
  # other set (label isa-rerun: the Release run above compares every set with the generic one,
  # and scripts/valgrind.sh runs the generic kernels): those reruns were a fifth of its time.
  # Label san-twin: a test whose twin runs the same code under the sanitizers (the SGD variants of
  # the resume tests, whose Adam variants run; the optimizers' kernels have tests of their own),
  # or that checks arithmetic on the main path (the learning-rate rules, the evaluation batch's
  # bound on large images), or the build's objects.
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE 'nosan|isa-rerun|san-twin'
  # (a failed prebuild is reported by fuzz.sh's own build below)
  if [ $fuzz = 1 ]; then wait "$fuzz_build" || true; fi
fi

if [ $fuzz = 1 ]; then
  echo "== fuzz (${RG_FUZZ_SECONDS:-20} s per target)"
  scripts/fuzz.sh "${RG_FUZZ_SECONDS:-20}"
fi
