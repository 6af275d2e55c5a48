#!/usr/bin/env bash
# fifteenth session, run 4: the CUDA tests at 9080c60 (multi-tensor SGD, BatchNorm's parameter
# gradients from its reduction, the residual add's shared gradient), then ResNet-50 steps of
# 51685ef (old) and 9080c60 (new) alternated, FP32 and TF32, and PyTorch's on the same card
set -u
out=$1
pkg=${2:-.gpu2}
GPU_CHECK_BUDGET=60 GPU_CHECK_STEPS="tests" bash scripts/gpu-check.sh "$pkg" /tmp/gt >/dev/null 2>&1
grep -E 'ok|BAD|SKIP' /tmp/gt/summary.txt
cp /tmp/gt/tests.log "$out/tests.log"; cp /tmp/gt/summary.txt "$out/summary.txt"
export LD_LIBRARY_PATH=$(grep '^LD_LIBRARY_PATH=' /tmp/gt/env.log | cut -d= -f2-) RG_NUM_THREADS=1
rm -rf /tmp/rg-old && mkdir -p /tmp/rg-old && tar -C /tmp/rg-old -xJf "$pkg/old/pkg.tar.xz"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for t in test_cuda_kernels test_cuda_ops; do
  timeout 60 "$cs" --tool memcheck --error-exitcode 9 --report-api-errors no /tmp/rg-gpu/tests/$t --jobs 4 2>&1 | grep -E 'ERROR SUMMARY|Synthesis' | sed "s/^/memcheck $t: /"
done
for i in 1 2; do
  for tf in 0 1; do
    for v in old new; do
      b=/tmp/rg-gpu/bin/ringgrad-bench; [ $v = old ] && b=/tmp/rg-old/bin/ringgrad-bench
      RG_CUDA_TF32=$tf timeout 40 $b --device cuda --only resnet --iters 7 2>&1 | grep '^raw' | sed "s/^/$v tf32=$tf /"
    done
  done
done | tee "$out/ab.txt"
for tf in "" --tf32; do
  env -u LD_LIBRARY_PATH timeout 40 python3 bench/torch_resnet_step.py --device cuda --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --iters 7 $tf 2>&1 | grep '^raw'
done | tee "$out/torch.txt"
