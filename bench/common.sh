# common.sh — sourced by bench/*.sh: the options they share, the bench binary and a scratch file.
#
# Defines here (the bench/ folder), bench (RINGGRAD_BENCH or build/bin/ringgrad-bench), the
# shared options' values threads, rounds, iters and clock, and two functions:
#   common_option NAME VALUE   takes one shared option (returns 1 for an unknown one)
#   common_start SCRIPT        checks the binary, makes $raw (removed on exit), sets $torch_version
here=$(cd "$(dirname "$0")" && pwd)
bench=${RINGGRAD_BENCH:-$here/../build/bin/ringgrad-bench}
threads="1 2" rounds=3 iters=5 clock=wall

common_option() {
    [ -n "${2-}" ] || { echo "$(basename "$0"): $1 needs a value" >&2; exit 2; }
    case $1 in
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --iters) iters=$2 ;;
    --clock) clock=$2 ;;
    *) return 1 ;;
    esac
}

common_start() {
    [ -x "$bench" ] || { echo "$1: $bench not found (build first)" >&2; exit 1; }
    raw=$(mktemp)
    trap 'rm -f "$raw"' EXIT
    torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
}
