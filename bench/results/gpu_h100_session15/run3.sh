#!/usr/bin/env bash
# fifteenth session, run 3: which conv algorithms the TF32 step picks, and in-situ kernel times
set -u
out=$1
GPU_CHECK_STEPS="none" bash scripts/gpu-check.sh .gpu /tmp/gf >/dev/null 2>&1
w=/tmp/rg-gpu
export LD_LIBRARY_PATH=$(grep '^LD_LIBRARY_PATH=' /tmp/gf/env.log | cut -d= -f2-) RG_NUM_THREADS=1
b=$w/bin/ringgrad-bench
ls /usr/local/cuda/bin > "$out/cuda_bin.txt" 2>&1; command -v nsys ncu >> "$out/cuda_bin.txt"
RG_CUDA_TF32=1 RG_CUDA_CONV_VERBOSE=1 timeout 60 $b --device cuda --only resnet --iters 7 > "$out/choices_tf32.txt" 2>&1
grep '^raw' "$out/choices_tf32.txt"
echo "tf32 choices: $(grep -c ': graph$' "$out/choices_tf32.txt") graph, $(grep -c ': legacy$' "$out/choices_tf32.txt") legacy"
nsys=$(command -v nsys || find /usr/local/cuda* /opt -name nsys -type f 2>/dev/null | head -1)
echo "nsys: ${nsys:-none}"
if [ -n "$nsys" ]; then
  for who in rg torch; do
    if [ $who = rg ]; then set -- env RG_CUDA_TF32=1 $b --device cuda --only resnet --iters 3
    else set -- env -u LD_LIBRARY_PATH python3 bench/torch_resnet_step.py --device cuda --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --tf32 --iters 3; fi
    timeout 120 "$nsys" profile --capture-range=cudaProfilerApi --capture-range-end=stop -t cuda -o /tmp/ns_$who -f true "$@" > /tmp/ns_$who.log 2>&1
    timeout 60 "$nsys" stats -r cuda_gpu_kern_sum -f csv -o "$out/nsys_$who" /tmp/ns_$who.nsys-rep >> /tmp/ns_$who.log 2>&1
    tail -3 /tmp/ns_$who.log
  done
else
  ncu=$(command -v ncu || find /usr/local/cuda/bin -name ncu | head -1)
  timeout 150 "$ncu" --profile-from-start off --clock-control none --cache-control none --target-processes all \
    --metrics gpu__time_duration.sum --csv --log-file /tmp/p.csv env RG_CUDA_TF32=1 $b --device cuda --only resnet --iters 3 > /dev/null 2>&1
  gzip -c /tmp/p.csv > "$out/ncu_tf32_nocache.csv.gz"
fi
ls -la "$out"
