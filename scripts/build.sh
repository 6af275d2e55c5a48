#!/usr/bin/env bash
# Configures and builds ringgrad into build/ (or $1), Release, with the CUDA backend when the
# toolkit is present. Extra arguments go to cmake, e.g. scripts/build.sh build-asan -DRG_SANITIZE=ON
#
# Prints one line per phase with the time it took; the full output of each phase goes to
# <dir>/configure.log and <dir>/build.log, and is printed only when the phase fails.
# RG_BUILD_VERBOSE=1 prints everything as it happens.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
mkdir -p "$dir"

# phase NAME LOG CMD...: runs CMD with its output in LOG; one line when it succeeds, the whole log
# when it fails (then exits with CMD's status).
phase() {
    local name=$1 log=$2 start rc=0
    shift 2
    start=$(date +%s.%N)
    if [ "${RG_BUILD_VERBOSE:-0}" = 1 ]; then
        "$@" 2>&1 | tee "$log" || rc=$?
    else
        "$@" >"$log" 2>&1 || rc=$?
    fi
    local secs
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    if [ "$rc" != 0 ]; then
        [ "${RG_BUILD_VERBOSE:-0}" = 1 ] || cat "$log" >&2
        echo "build.sh: $name failed after ${secs}s (exit $rc); full log: $log" >&2
        exit "$rc"
    fi
    echo "build.sh: $name ${secs}s $(summary "$name" "$log")"
}

# A few words on what the phase did, from its log.
summary() {
    case $1 in
    configure)
        sed -n 's/^-- ringgrad: \(.*\)$/(\1)/p' "$2" | tail -n 1 ;;
    build)
        local n
        n=$(grep -c 'Building \(C\|CUDA\|CXX\) object' "$2" || true)
        echo "($n files compiled, -j$(nproc); programs in $dir/bin)" ;;
    esac
}

phase configure "$dir/configure.log" cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
phase build "$dir/build.log" cmake --build "$dir" -j"$(nproc)"
