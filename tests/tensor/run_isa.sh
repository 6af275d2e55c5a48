#!/bin/sh
# run_isa.sh ISA BENCH TEST [ARGS...]: runs a test program with the CPU kernels of ISA
# (RG_ISA=ISA), or reports Skipped (exit 77) when this build or CPU cannot run that set, so that
# no test depends on the build machine's instruction set to pass.
isa=$1 bench=$2
shift 2
if ! "$bench" --isa-supported "$isa"; then
    echo "run_isa.sh: this build or CPU has no $isa kernels: skipped"
    exit 77
fi
RG_ISA=$isa exec "$@"
