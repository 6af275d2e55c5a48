#!/bin/sh
# run_isa.sh ISA BENCH TEST [ARGS...]: runs a test program with the CPU kernels of ISA
# (RG_ISA=ISA), or reports Skipped (exit 77) when this build or CPU cannot run that set, so that
# no test depends on the build machine's instruction set to pass, or when that set is the one the
# CPU runs by default.
isa=$1 bench=$2
shift 2
if ! "$bench" --isa-supported "$isa"; then
    echo "run_isa.sh: this build or CPU has no $isa kernels: skipped"
    exit 77
fi
# The set the test's own run takes (RG_ISA when the whole run sets it, else the CPU's default) is
# covered by that run: running it again only doubled that test's time (about 2 minutes of
# .ci/run's 2 cores).
own=${RG_ISA:-$(env -u RG_ISA "$bench" --isa-default)}
if [ "$isa" = "$own" ]; then
    echo "run_isa.sh: $isa is the set the test's own run takes: skipped"
    exit 77
fi
RG_ISA=$isa exec "$@"
