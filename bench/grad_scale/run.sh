#!/usr/bin/env bash
# run.sh — what folding DDP's 1/N into the optimizer costs the optimizer (issue 11): callgrind
# instruction counts of the Adam and SGD update loops over 1M floats, before (core/kernels.h at
# 2699648, no grad scale) and after (the working tree: g *= grad_scale as the kernel reads g).
# AVX2 build (-march=x86-64-v3): valgrind 3.19 cannot run AVX-512. The loops are the bodies of
# tensor/cpu/optim.c without OpenMP. Prints each loop's instructions (kernel + loop).
#   bench/grad_scale/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/grad_scale"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git -C "$ROOT" show 2699648:core/kernels.h >"$T/kernels_old.h"
cp "$ROOT/core/kernels.h" "$T/kernels_new.h"
FL=(-O3 -march=x86-64-v3 -g -I"$T" -I"$ROOT" -I"$ROOT/include")
gcc "${FL[@]}" -DKHEADER='"kernels_old.h"' -DNAME=adam_old -DNAME2=sgd_old -c "$HERE/step.c" -o "$T/old.o"
gcc "${FL[@]}" -DKHEADER='"kernels_new.h"' -DNAME=adam_new -DNAME2=sgd_new -c "$HERE/step.c" -o "$T/new.o"
gcc "${FL[@]}" "$HERE/cg.c" "$T/old.o" "$T/new.o" -o "$T/cg" -lm
valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$T/cg" >/dev/null 2>&1
callgrind_annotate --threshold=100 "$T/cg.out" | grep -E "=> .*:(adam|sgd)_(old|new) "
