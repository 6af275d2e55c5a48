#!/usr/bin/env bash
# scaling.sh — the CNN on 1 and 2 ranks of this machine (1 thread per rank), and PyTorch DDP
# (gloo) on the same 2-rank job, interleaved run by run.
#
#   bench/scaling.sh [--repeats 5] [--steps 30] [--batch-size 128] [--out bench/results]
#                    [--no-torch]
#
# Each repeat runs, in turn:
#   rg1     build/bin/ringgrad-train --threads 1                       (one process)
#   rg2     scripts/rg-mpirun -np 2 build/bin/ringgrad-train --threads 1
#   torch1  /usr/bin/python3 bench/torch_ddp.py --np 1 --threads 1
#   torch2  /usr/bin/python3 bench/torch_ddp.py --np 2 --threads 1
# all with the CNN, Adam (lr 1e-3), batch --batch-size per rank, Fashion-MNIST, --steps steps.
# A run's throughput is ranks x batch / its median step time, leaving out the first 3 steps
# (ringgrad: bench/trace_steps.py on its --timeline trace; PyTorch: torch_ddp.py's own timer);
# ringgrad's own mean over all steps (its --json images_per_sec) is kept too. The summary gives
# per configuration the median over repeats, and
#   scaling efficiency = img/s on 2 ranks / (2 x img/s on 1 rank)
#   ringgrad / PyTorch = ringgrad's 2-rank img/s / PyTorch's 2-rank img/s.
# Results: one JSON line per run in OUT/scaling.jsonl (with the load average before it), the
# summary in OUT/scaling.json (for scripts/plot_bench.py scaling).
#
# On a shared machine, compare only what one run measured, and read the load averages it
# records (nice does not help against other login sessions: the kernel shares the CPU between
# sessions first, sched_autogroup).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
repeats=5 steps=30 batch=128 out="$ROOT/bench/results" torch=1
while [ $# -gt 0 ]; do
    case "$1" in
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "scaling.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/ringgrad-train" ] || { echo "scaling.sh: build first (cmake --build build)" >&2; exit 1; }
if [ $torch = 1 ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "scaling.sh: /usr/bin/python3 has no torch (scripts/install-deps.sh --bench); --no-torch" >&2
    torch=0
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jsonl="$out/scaling.jsonl"
: >"$jsonl"

record() { # config, ranks, JSON fields of the result
    echo "{\"config\":\"$1\",\"ranks\":$2,\"repeat\":$r,\"load_before\":$load,$3}" | tee -a "$jsonl"
}

ringgrad() { # config, ranks, launcher...
    local config=$1 ranks=$2
    shift 2
    local trace="$tmp/$config.json"
    local summary
    summary=$("$@" "$BIN/ringgrad-train" --threads 1 --max-steps "$steps" --batch-size "$batch" \
        --json --timeline "$trace" | tail -1)
    local steps_json
    steps_json=$(python3 "$ROOT/bench/trace_steps.py" "$trace" --batch-size "$batch")
    record "$config" "$ranks" "\"trace\":$steps_json,\"summary\":$summary"
}

pytorch() { # config, ranks
    local line
    line=$(/usr/bin/python3 "$ROOT/bench/torch_ddp.py" --np "$2" --threads 1 --steps "$steps" \
        --batch-size "$batch" | tail -1)
    record "$1" "$2" "\"torch\":$line"
}

for r in $(seq "$repeats"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    ringgrad rg1 1 env
    load=$(cut -d' ' -f1 /proc/loadavg)
    ringgrad rg2 2 "$ROOT/scripts/rg-mpirun" -np 2
    if [ $torch = 1 ]; then
        load=$(cut -d' ' -f1 /proc/loadavg)
        pytorch torch1 1
        load=$(cut -d' ' -f1 /proc/loadavg)
        pytorch torch2 2
    fi
done

python3 - "$jsonl" "$out/scaling.json" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def ips(r):  # images/s from the median step
    return r["trace"]["images_per_sec"] if "trace" in r else r["torch"]["images_per_sec"]
def mean_ips(r):  # images/s over every step (ringgrad's --json; torch_ddp's mean after warm-up)
    return r["summary"]["images_per_sec"] if "summary" in r else r["torch"]["images_per_sec_mean"]
med = {}
print("%-7s %5s %12s %12s %s" % ("config", "ranks", "img/s(med)", "img/s(mean)", "load"))
for c in dict.fromkeys(r["config"] for r in runs):
    rs = [r for r in runs if r["config"] == c]
    med[c] = {"ranks": rs[0]["ranks"], "images_per_sec": statistics.median(ips(r) for r in rs),
              "images_per_sec_mean": statistics.median(mean_ips(r) for r in rs),
              "runs": [ips(r) for r in rs], "loads": [r["load_before"] for r in rs]}
    print("%-7s %5d %12.1f %12.1f %s" % (c, med[c]["ranks"], med[c]["images_per_sec"],
                                       med[c]["images_per_sec_mean"],
                                       " ".join("%.1f" % l for l in med[c]["loads"])))
summary = {"configs": med}
def eff(two, one):
    return med[two]["images_per_sec"] / (2 * med[one]["images_per_sec"])
if "rg1" in med and "rg2" in med:
    summary["ringgrad_efficiency"] = round(eff("rg2", "rg1"), 3)
    print("ringgrad scaling efficiency 1 -> 2 ranks: %.2f" % summary["ringgrad_efficiency"])
if "torch1" in med and "torch2" in med:
    summary["torch_efficiency"] = round(eff("torch2", "torch1"), 3)
    summary["ringgrad_over_torch"] = round(med["rg2"]["images_per_sec"] /
                                           med["torch2"]["images_per_sec"], 3)
    print("PyTorch scaling efficiency 1 -> 2 ranks: %.2f" % summary["torch_efficiency"])
    print("ringgrad / PyTorch DDP, 2 ranks: %.2f" % summary["ringgrad_over_torch"])
json.dump(summary, open(sys.argv[2], "w"), indent=1)
EOF
