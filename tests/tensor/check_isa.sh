#!/bin/sh
# check_isa.sh BUILD_DIR: the portable build keeps wide vector instructions inside the kernels
# that are chosen at run time (tensor/cpu/isa_impl.h, cmake/isa.cmake).
#   1. The library's other objects and the programs' objects use no ymm/zmm register, except
#      functions whose name ends in _f16c (dist/host_reduce.c, compiled for AVX+F16C, called only
#      after a CPU check).
#   2. The generic copy of the kernels uses none either, and the avx2 copy no zmm.
#   3. Every global symbol a copy defines carries that copy's suffix (_generic, _avx2, _avx512):
#      one left out would be defined three times.
# Skipped (77) in a -DRG_NATIVE=ON build, where everything targets the build machine.
set -eu
b=$1
[ -d "$b/CMakeFiles/ringgrad_isa_generic.dir" ] || { echo "not a portable build: skipped"; exit 77; }
fail=0
base_objs=$(find "$b/CMakeFiles/ringgrad_objects.dir" "$b/CMakeFiles/ringgrad-train.dir" \
                 "$b/CMakeFiles/ringgrad-bench.dir" -name '*.o' 2>/dev/null || true)
for o in $base_objs; do
    bad=$(objdump -d --no-show-raw-insn "$o" | awk '
        /^[0-9a-f]+ <.*>:$/ { fn = $2 }
        /%[yz]mm[0-9]/ { if (!(fn in seen)) { seen[fn] = 1; print fn } }' |
        grep -v '_f16c>:$' | grep -v '^<peak_avx' || true)
    if [ -n "$bad" ]; then
        echo "FAIL: $o uses ymm/zmm registers outside the dispatched kernels:"; echo "$bad"; fail=1
    fi
done
for o in $(find "$b/CMakeFiles/ringgrad_isa_generic.dir" -name '*.o'); do
    if objdump -d "$o" | grep -q '%[yz]mm[0-9]'; then echo "FAIL: generic copy $o uses ymm/zmm"; fail=1; fi
done
for o in $(find "$b/CMakeFiles/ringgrad_isa_avx2.dir" -name '*.o'); do
    if objdump -d "$o" | grep -q '%zmm[0-9]'; then echo "FAIL: avx2 copy $o uses zmm"; fail=1; fi
done
for isa in generic avx2 avx512; do
    d="$b/CMakeFiles/ringgrad_isa_$isa.dir"
    [ -d "$d" ] || continue
    bad=$(nm --defined-only -g $(find "$d" -name '*.o') | awk 'NF == 3 { print $3 }' |
          grep -v "_$isa\$" || true)
    if [ -n "$bad" ]; then echo "FAIL: $isa copy defines unsuffixed symbols:"; echo "$bad"; fail=1; fi
done
n=$(echo "$base_objs" | wc -w)
[ "$n" -gt 50 ] || { echo "FAIL: found only $n objects under $b/CMakeFiles"; fail=1; }
[ $fail = 0 ] && echo "check_isa.sh: $n objects without wide registers outside the kernels"
exit $fail
