#!/usr/bin/env bash
# Runs the main paths under valgrind's leak checker: ringgrad-train training the CNN (conv,
# max-pool, dropout, Adam, the loader's threads, the comm thread, evaluation), one step of
# ResNet-20 (about 80 s), and the MLP with a checkpoint saved and resumed, on a small Fashion-MNIST-shaped folder (tests/train/make_data.py:
# 960 training and 100 test images) so that evaluation stays short. Valgrind cannot run AVX-512
# code, so this uses its own portable build (build-valgrind/, -DRG_NATIVE=OFF, the default:
# valgrind's CPU has no AVX-512, so the avx2 kernels are chosen; RG_ISA=generic would check the
# generic ones), and RG_ALLOC_CACHE=0 so that every tensor allocation is visible to it.
# Fails if valgrind reports any definitely or indirectly lost bytes, or an error.
#
# Memcheck runs the CNN about 500x slower than native (12 s a step at batch 8 on a Zen 5,
# 2026-11-25), so the README's C API example (examples/train.c: 20 steps at batch 64, over half
# an hour here) runs only with RG_VALGRIND_EXAMPLE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build-valgrind -DRG_NATIVE=OFF -DRG_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
export RG_ALLOC_CACHE=0 RG_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
vg=(valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
    --error-exitcode=99 --suppressions=tests/valgrind.supp)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tests/train/make_data.py "$tmp/data" >/dev/null
train=(build-valgrind/bin/ringgrad-train --data-dir "$tmp/data" --epochs 1 --json)
echo "== ringgrad-train --model cnn --batch-size 8 --max-steps 2 --save"
"${vg[@]}" "${train[@]}" --model cnn --batch-size 8 --max-steps 2 --save "$tmp/cnn.safetensors"
echo "== ringgrad-train --model resnet20 --batch-size 4 --max-steps 1 (BatchNorm, residual adds, 1x1 convolutions on OpenBLAS)"
"${vg[@]}" "${train[@]}" --model resnet20 --batch-size 4 --max-steps 1
echo "== ringgrad-train --model mlp --max-steps 4 --save, then --resume"
"${vg[@]}" "${train[@]}" --model mlp --batch-size 32 --max-steps 4 --save "$tmp/ck.safetensors"
"${vg[@]}" "${train[@]}" --model mlp --batch-size 32 --max-steps 8 --resume "$tmp/ck.safetensors"
if [ "${RG_VALGRIND_EXAMPLE:-0}" = 1 ]; then
    echo "== examples/train.c (CNN, 20 steps)"
    "${vg[@]}" build-valgrind/tests/example_train
fi
echo "valgrind: no leaks on the main paths"
