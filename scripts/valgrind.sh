#!/usr/bin/env bash
# Runs the main paths under valgrind's leak checker: the README's C API example (CNN, 20 steps)
# and ringgrad-train (MLP, a few steps, with a checkpoint saved and resumed). Valgrind cannot run
# AVX-512 code, so this uses its own portable build (build-valgrind/, -DRG_NATIVE=OFF, the
# default: valgrind's CPU has no AVX-512, so the avx2 kernels are chosen; RG_ISA=generic would
# check the generic ones), and RG_ALLOC_CACHE=0 so that every tensor allocation is visible to it.
# Fails if valgrind reports any definitely or indirectly lost bytes, or an error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build-valgrind -DRG_NATIVE=OFF -DRG_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
export RG_ALLOC_CACHE=0 RG_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
vg=(valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --error-exitcode=99 --suppressions=tests/valgrind.supp)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== examples/train.c (CNN, 20 steps)"
"${vg[@]}" build-valgrind/tests/example_train
echo "== ringgrad-train --model mlp --max-steps 4 --save, then --resume"
"${vg[@]}" build-valgrind/bin/ringgrad-train --model mlp --max-steps 4 --save "$tmp/ck.safetensors" --json
"${vg[@]}" build-valgrind/bin/ringgrad-train --model mlp --max-steps 8 --resume "$tmp/ck.safetensors" --json
echo "valgrind: no leaks on the main paths"
