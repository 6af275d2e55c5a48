#!/usr/bin/env bash
# scripts/gpu-ab.sh [PKG_DIR] [OUT_DIR]: on a GPU machine, checks a change and measures it in one
# short run, for device time that comes in minutes:
#   1. the CUDA and NCCL tests of PKG_DIR/pkg.tar.xz (scripts/gpu-check.sh's tests step), and
#      compute-sanitizer memcheck over the kernel and op tests;
#   2. ResNet-50 steps (batch 32, 224 px), FP32 and TF32, alternating the new programs with the
#      old ones of PKG_DIR/old/pkg.tar.xz (when present) GPU_AB_ROUNDS times (default 2);
#   3. PyTorch's same steps on this GPU (cudnn.benchmark, FP32 and TF32), when python3 has it.
# Writes OUT_DIR/{summary.txt,tests.log,ab.txt,torch.txt}. Make the package here with
#   scripts/gpu-pack.sh build .gpu2 && rm -rf .gpu2/data && mkdir -p .gpu2/old &&
#   cp <the old build's pkg.tar.xz> .gpu2/old/
# and carry .gpu2 (two packages without the data fit the 64 MiB a run carries). The fifteenth
# session's run 4 (bench/results/gpu_h100_session15) took 167 s with the machine's start.
set -u
pkg=${1:-.gpu2}
out=${2:-${OUT:-/tmp/gpu-ab}}
mkdir -p "$out"
rounds=${GPU_AB_ROUNDS:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
GPU_CHECK_BUDGET=60 GPU_CHECK_STEPS="tests" bash "$src/scripts/gpu-check.sh" "$pkg" /tmp/gpu-ab-t \
    >/dev/null 2>&1
grep -E 'ok|BAD|SKIP' /tmp/gpu-ab-t/summary.txt | tee "$out/summary.txt"
cp /tmp/gpu-ab-t/tests.log "$out/tests.log"
export LD_LIBRARY_PATH=$(grep '^LD_LIBRARY_PATH=' /tmp/gpu-ab-t/env.log | cut -d= -f2-) RG_NUM_THREADS=1
new=/tmp/rg-gpu # where gpu-check.sh unpacked the new programs
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for t in test_cuda_kernels test_cuda_ops; do
    [ -n "$cs" ] || break
    timeout 90 "$cs" --tool memcheck --error-exitcode 9 --report-api-errors no "$new/tests/$t" \
        --jobs 4 2>&1 | grep -E 'ERROR SUMMARY|Synthesis' | sed "s/^/memcheck $t: /" |
        tee -a "$out/summary.txt"
done
versions=new
if [ -f "$pkg/old/pkg.tar.xz" ]; then
    rm -rf /tmp/rg-old && mkdir -p /tmp/rg-old && tar -C /tmp/rg-old -xJf "$pkg/old/pkg.tar.xz"
    versions="old new"
fi
for i in $(seq "$rounds"); do
    for tf in 0 1; do
        for v in $versions; do
            b=$new/bin/ringgrad-bench
            [ "$v" = old ] && b=/tmp/rg-old/bin/ringgrad-bench
            RG_CUDA_TF32=$tf timeout 40 "$b" --device cuda --only resnet --iters 7 2>&1 |
                grep '^raw' | sed "s/^/$v tf32=$tf /"
        done
    done
done | tee "$out/ab.txt"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    for tf in "" --tf32; do
        env -u LD_LIBRARY_PATH timeout 40 python3 "$src/bench/torch_resnet_step.py" --device cuda \
            --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --iters 7 $tf 2>&1 |
            grep '^raw'
    done | tee "$out/torch.txt"
fi
