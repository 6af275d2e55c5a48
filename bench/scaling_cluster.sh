#!/usr/bin/env bash
# scaling_cluster.sh — ringgrad-train's images/s on N simulated hosts (scripts/sim-cluster.sh, one
# rank per host) for each strategy, against 1 rank without a network and against PyTorch DDP
# (gloo) started on the same simulated hosts, interleaved run by run.
#
#   bench/scaling_cluster.sh [--hosts "2"] [--rate 1gbit] [--repeats 3] [--steps 30]
#                            [--batch-size 128] [--strategies "ddp powersgd fp16 zero1 ring"]
#                            [--no-torch] [--out bench/results] [--name scaling_cluster]
#
# Each repeat runs, in turn:
#   rg1          build/bin/ringgrad-train --threads 1                  (one process, no mpirun)
#   torch1       bench/torch_ddp.py --np 1 --threads 1
#   rgN-STRAT    ringgrad-train --threads 1 on N hosts, per strategy: ddp (float32 buckets),
#                powersgd (--compress powersgd), fp16 (--compress fp16), zero1 (--strategy zero1),
#                ring (--comm ring)
#   torchN       bench/torch_ddp.py --mpi on the same N hosts (gloo over their eth0)
# all with the CNN, Adam (lr 1e-3), batch --batch-size per rank, Fashion-MNIST, --steps steps.
# A run's images/s is ranks x batch / its median step time, the first 3 steps left out (ringgrad:
# bench/trace_steps.py on its --timeline trace; PyTorch: torch_ddp.py's own timer). Summary, per
# configuration the median over repeats, and
#   scaling efficiency = img/s on N hosts / (N x img/s of the same framework on 1 rank)
#   ringgrad / PyTorch = ringgrad's img/s / PyTorch's on the same N hosts.
# Results: one JSON line per run in OUT/NAME.jsonl (with the load average before it), the
# summary in OUT/NAME.json. The simulated hosts share this machine's cores (rg-mpirun's
# --bind-to none lets them spread): on 2 cores, 3 and 4 hosts each get a fraction of a core, so
# their efficiency measures the machine, not the network. Needs root (exits 77 otherwise).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
SIM="$ROOT/scripts/sim-cluster.sh"
hosts=2 rate=1gbit repeats=3 steps=30 batch=128 strategies="ddp powersgd fp16 zero1 ring" torch=1
out="$ROOT/bench/results" name=scaling_cluster
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "scaling_cluster.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$BIN/ringgrad-train" ] || { echo "scaling_cluster.sh: build first" >&2; exit 1; }
if ! "$SIM" check >/dev/null 2>&1; then
    echo "scaling_cluster.sh: SKIPPED: $("$SIM" check 2>&1 | tail -1)" >&2
    exit 77
fi
if [ $torch = 1 ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "scaling_cluster.sh: /usr/bin/python3 has no torch; --no-torch" >&2
    torch=0
fi
mkdir -p "$out"
jsonl="$out/$name.jsonl"
: >"$jsonl"
tmp=$(mktemp -d)
clusters=()
cleanup() {
    for c in "${clusters[@]}"; do "$SIM" down --id "$c" >/dev/null 2>&1 || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
for n in $hosts; do
    "$SIM" up "$n" --rate "$rate" --id "sc$n$$" >/dev/null
    clusters+=("sc$n$$")
done

record() { # config, strategy, ranks, JSON fields of the result
    local line="{\"config\":\"$1\",\"strategy\":\"$2\",\"ranks\":$3,\"rate\":\"$rate\",\"repeat\":$r,\"load_before\":$load,$4}"
    echo "$line" >>"$jsonl"
    echo "$line" | python3 -c 'import json,sys
r = json.loads(sys.stdin.read())
ips = r["trace"]["images_per_sec"] if "trace" in r else r["torch"]["images_per_sec"]
print("%-14s repeat %d: %7.1f img/s (load %.1f)" % (r["config"], r["repeat"], ips, r["load_before"]),
      file=sys.stderr)'
}

strategy_args() {
    case "$1" in
    ddp) ;;
    powersgd) echo --compress powersgd ;;
    fp16) echo --compress fp16 ;;
    zero1) echo --strategy zero1 ;;
    ring) echo --comm ring ;;
    *) echo "scaling_cluster.sh: unknown strategy $1" >&2; exit 2 ;;
    esac
}

ringgrad() { # config, strategy, ranks, launcher...
    local config=$1 strategy=$2 ranks=$3
    shift 3
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2046 # the strategy's options are words
    "$@" "$BIN/ringgrad-train" --threads 1 --max-steps "$steps" --batch-size "$batch" \
        $(strategy_args "$strategy") --timeline "$tmp/trace.json" >/dev/null
    record "$config" "$strategy" "$ranks" \
        "\"trace\":$(python3 "$ROOT/bench/trace_steps.py" "$tmp/trace.json" --batch-size "$batch")"
}

pytorch() { # config, ranks, torch_ddp.py's own options (one word), launcher...
    local config=$1 ranks=$2 opts=$3 line
    shift 3
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086 # opts are words
    line=$("$@" /usr/bin/python3 "$ROOT/bench/torch_ddp.py" --threads 1 --steps "$steps" \
        --batch-size "$batch" $opts | tail -1)
    record "$config" pytorch "$ranks" "\"torch\":$line"
}

for r in $(seq "$repeats"); do
    ringgrad rg1 ddp 1 env
    if [ $torch = 1 ]; then pytorch torch1 1 "--np 1" env; fi
    for n in $hosts; do
        on=("$SIM" mpirun --id "sc$n$$" -- -np "$n")
        for s in $strategies; do ringgrad "rg$n-$s" "$s" "$n" "${on[@]}"; done
        if [ $torch = 1 ]; then
            pytorch "torch$n" "$n" "--mpi --master-addr 192.168.77.11" "${on[@]}" \
                -x GLOO_SOCKET_IFNAME=eth0
        fi
    done
done

python3 - "$jsonl" "$out/$name.json" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def ips(r):
    return r["trace"]["images_per_sec"] if "trace" in r else r["torch"]["images_per_sec"]
med = {}
for c in dict.fromkeys(r["config"] for r in runs):
    rs = [r for r in runs if r["config"] == c]
    med[c] = {"ranks": rs[0]["ranks"], "strategy": rs[0]["strategy"],
              "images_per_sec": statistics.median(ips(r) for r in rs),
              "runs": [ips(r) for r in rs], "loads": [r["load_before"] for r in rs]}
print("%-14s %5s %10s %6s %8s  %s" % ("config", "ranks", "img/s", "eff", "/torchN", "runs; loads"))
for c, m in med.items():
    base = med.get("torch1" if m["strategy"] == "pytorch" else "rg1")
    m["efficiency"] = round(m["images_per_sec"] / (m["ranks"] * base["images_per_sec"]), 3) \
        if base else None
    t = med.get("torch%d" % m["ranks"])
    m["over_torch"] = round(m["images_per_sec"] / t["images_per_sec"], 3) \
        if t and m["ranks"] > 1 else None
    print("%-14s %5d %10.1f %6s %8s  %s; %s" % (
        c, m["ranks"], m["images_per_sec"], m["efficiency"], m["over_torch"] or "-",
        " ".join("%.0f" % v for v in m["runs"]), " ".join("%.1f" % l for l in m["loads"])))
json.dump({"configs": med}, open(sys.argv[2], "w"), indent=1)
EOF
echo "scaling_cluster.sh: load now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
