#!/usr/bin/env bash
# thirteenth session, last device run: tests with the graph default, then A/B legacy vs default
set -u
out=$1
GPU_CHECK_BUDGET=20 GPU_CHECK_STEPS="tests" bash scripts/gpu-check.sh .gpu /tmp/gf >/dev/null 2>&1
cat /tmp/gf/summary.txt | grep -E 'ok|BAD'
cp /tmp/gf/tests.log "$out/tests.log"
w=/tmp/rg-gpu
export LD_LIBRARY_PATH=$(grep '^LD_LIBRARY_PATH=' /tmp/gf/env.log | cut -d= -f2-) RG_NUM_THREADS=1
b=$w/bin/ringgrad-bench
for i in 1 2 3; do
  for api in legacy graph; do
    RG_CUDA_CONV_API=$api timeout 30 $b --device cuda --only cnn --iters 7 2>&1 | grep 'one GPU alone' | sed "s/^/cnn $api /"
  done
done
for i in 1 2; do
  for api in legacy graph; do
    RG_CUDA_CONV_API=$api timeout 40 $b --device cuda --only resnet --iters 7 2>&1 | grep '^raw' | sed "s/^/$api /"
  done
done
RG_CUDA_CONV_VERBOSE=1 timeout 40 $b --device cuda --only resnet --iters 3 2>&1 | grep 'graph engine' > "$out/choices.txt"
echo "resnet50 choices: $(grep -c ': graph$' "$out/choices.txt") graph, $(grep -c ': legacy$' "$out/choices.txt") legacy"
RG_CUDA_CONV_VERBOSE=1 timeout 30 $b --device cuda --only cnn --iters 3 2>&1 | grep 'graph engine' > "$out/choices_cnn.txt"
cat "$out/choices_cnn.txt"
env -u LD_LIBRARY_PATH timeout 40 python3 bench/torch_resnet_step.py --device cuda --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --iters 7 2>&1 | grep '^raw'
