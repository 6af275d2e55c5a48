# common.sh — sourced by bench/*.sh: the options they share, the bench binary and a scratch file.
#
# Defines here (the bench/ folder), bench (RINGGRAD_BENCH or build/bin/ringgrad-bench), the
# shared options' values threads, rounds, iters and clock, and two functions:
#   common_option NAME VALUE   takes one shared option (returns 1 for an unknown one)
#   common_start SCRIPT        checks the binary, makes $raw (removed on exit), sets $torch_version
# and torch_python, the command that runs the PyTorch side (see --torch-malloc below).
#
# --torch-malloc keep|default (default keep). PyTorch's CPU tensors come from glibc's malloc, which
# hands large freed blocks back to the kernel (its mmap threshold and heap trimming), so that every
# step faults its activations in again, page by page. Where a page fault is slow that, not the
# kernels, sets PyTorch's time: on the Zen 5 VM of 2026-11-29 a fault took 11 us a 4 KiB page
# (0.4 GB/s of first touch) and the CNN step took 265-440 ms instead of 104. "keep" runs PyTorch
# with MALLOC_MMAP_MAX_=0 (no block from mmap: every one from the heap, reused once freed) and
# MALLOC_TRIM_THRESHOLD_ at 64 GiB (the heap never handed back), so that glibc keeps and reuses
# freed memory, as ringgrad's arena does; "default" measures PyTorch as it comes. Raising the mmap
# threshold instead (to 32 MiB, glibc's largest) was enough for the CNN's tensors, not for
# ResNet-50's at 224 px (100 MB activations): its step took 17.7-21.3 s, and 7.0-7.2 s this way.
here=$(cd "$(dirname "$0")" && pwd)
bench=${RINGGRAD_BENCH:-$here/../build/bin/ringgrad-bench}
threads="1 2" rounds=3 iters=5 clock=wall torch_malloc=keep

common_option() {
    [ -n "${2-}" ] || { echo "$(basename "$0"): $1 needs a value" >&2; exit 2; }
    case $1 in
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --iters) iters=$2 ;;
    --clock) clock=$2 ;;
    --torch-malloc)
        case $2 in keep | default) torch_malloc=$2 ;; *)
            echo "$(basename "$0"): --torch-malloc takes keep or default, not '$2'" >&2
            exit 2 ;;
        esac ;;
    *) return 1 ;;
    esac
}

common_start() {
    [ -x "$bench" ] || { echo "$1: $bench not found (build first)" >&2; exit 1; }
    if [ "$clock" = cpu ]; then # one thread's CPU time misses the other threads' work
        for t in $threads; do
            [ "$t" = 1 ] || { echo "$1: --clock cpu times one thread: give --threads 1" >&2; exit 2; }
        done
    fi
    raw=$(mktemp)
    trap 'rm -f "$raw"' EXIT
    torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
    torch_python=/usr/bin/python3
    [ "$torch_malloc" = default ] ||
        torch_python="env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 /usr/bin/python3"
}
