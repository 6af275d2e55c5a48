#!/usr/bin/env bash
# Runs tests/train/reliability.sh (every bad input and fault of issue 10) against build B (default
# build) and puts its table into docs/RELIABILITY.md between the markers. Fails when a case fails.
#   scripts/reliability_table.sh [B]
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build}
export RG_TRAIN="$PWD/$b/bin/ringgrad-train" RG_MPIRUN="$PWD/scripts/rg-mpirun"
export RG_TRAIN_OUT="$PWD/$b/tests/train" RG_TRAIN_DATA="$PWD/$b/tests/train/data"
[ -d "$RG_TRAIN_DATA" ] || python3 tests/train/make_data.py "$RG_TRAIN_DATA"
tests/train/reliability.sh
python3 - "$RG_TRAIN_OUT/reliability/table.md" docs/RELIABILITY.md <<'PY'
import sys, datetime
table, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
a, b = "<!-- table: scripts/reliability_table.sh -->", "<!-- end of table -->"
head, rest = doc.split(a, 1)
tail = rest.split(b, 1)[1]
stamp = "Generated %s UTC.\n\n" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
open(sys.argv[2], "w").write(head + a + "\n" + stamp + table + b + tail)
PY
echo "reliability_table.sh: docs/RELIABILITY.md updated"
