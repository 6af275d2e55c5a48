#!/usr/bin/env bash
# No asprintf or vasprintf in ringgrad's C sources (library, tools, benchmarks, examples, tests).
# The sanitizer run's MPI tests unwind the stacks of allocations quickly (cmake/tests.cmake), and
# that unwinder stops inside libc, so tests/lsan.supp has to ignore every leak allocated inside
# libc's vasprintf (Open MPI's strings); a leak of one of our own asprintf strings would go
# unreported there. The check must also fail: on a copy of one file with a call planted.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

# calls DIR...: the lines that call asprintf or vasprintf; exit 1 when there are none
calls() {
    grep -rnE '(^|[^A-Za-z0-9_])v?asprintf[[:space:]]*\(' --include='*.c' --include='*.h' \
        --include='*.cu' --include='*.cuh' "$@"
}

cd "$root"
dirs=(core tensor autograd ops layers optim data dist models tools bench examples include tests)
if out=$(calls "${dirs[@]}"); then
    echo "$out"
    echo "FAIL: asprintf/vasprintf in ringgrad's sources: their leaks would go unreported under"
    echo "      the sanitizers (tests/lsan.supp); use rg_strbuf or snprintf into a buffer"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp core/strbuf.c "$tmp/strbuf.c"
printf 'static void planted(char **s) { (void)asprintf(s, "%%d", 1); }\n' >>"$tmp/strbuf.c"
calls "$tmp" >/dev/null || { echo "FAIL: the check misses a call planted in core/strbuf.c"; exit 1; }
echo "PASS: no asprintf in ringgrad's sources, and a planted call is caught"
