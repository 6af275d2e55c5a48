#!/usr/bin/env bash
# Configures and builds ringgrad into build/ (or $1), Release, with the CUDA backend when the
# toolkit is present. Extra arguments go to cmake, e.g. scripts/build.sh build-asan -DRG_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
