#!/bin/sh
# resnet_step.sh — a ResNet's training step (default ResNet-18, 3x64x64, batch 32, SGD momentum) in
# ringgrad and in PyTorch (torchvision's model, oneDNN), interleaved in one run.
#
#   bench/resnet_step.sh [--threads "1 2"] [--rounds 3] [--iters 5] [--clock wall|cpu]
#                        [--torch-malloc keep|default]   (see bench/common.sh)
#                        [--model "resnet18 resnet50"] [--image-size "64 224"] [--batch 32]
#                        [--also-env VAR=VALUE]
#
# Each round runs, for every model, image size and thread count, `ringgrad-bench --only resnet`
# and then bench/torch_resnet_step.py with the same model, images, batch and threads; prints the
# median over rounds of each side's median step time and the ratio (PyTorch time / ringgrad time:
# above 1, ringgrad is faster). --also-env runs ringgrad a second time in each round with VAR set
# to VALUE (an A/B of a switch such as RG_CONV_GEMM=0, interleaved with the rest) and adds its
# column. RINGGRAD_BENCH overrides the bench binary.
set -eu
. "$(dirname "$0")/common.sh"
models=resnet18 sizes=64 batch=32 also_env=""
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    --also-env) also_env=${2:?--also-env needs VAR=VALUE}; shift 2
        case $also_env in *=*) ;; *) echo "resnet_step.sh: --also-env needs VAR=VALUE" >&2; exit 2 ;; esac ;;
    --model) models=${2:?--model needs a value}; shift 2 ;;
    --image-size) sizes=${2:?--image-size needs a value}; shift 2 ;;
    --batch) batch=${2:?--batch needs a value}; shift 2 ;;
    *) common_option "$1" "${2-}" || { echo "resnet_step.sh: unknown option $1" >&2; exit 2; }
       shift 2 ;;
    esac
done
common_start resnet_step.sh
echo "ResNet training step, batch $batch: ringgrad vs PyTorch $torch_version, $rounds interleaved rounds of $iters steps, $clock clock, PyTorch malloc $torch_malloc, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$rounds" ]; do
    for m in $models; do
        for s in $sizes; do
            for t in $threads; do
                "$bench" --only resnet --raw --model "$m" --image-size "$s" --batch "$batch" \
                    --threads "$t" --iters "$iters" --clock "$clock" | grep '^raw' >>"$raw"
                if [ -n "$also_env" ]; then
                    env "$also_env" "$bench" --only resnet --raw --model "$m" --image-size "$s" \
                        --batch "$batch" --threads "$t" --iters "$iters" --clock "$clock" |
                        grep '^raw' | sed 's/^raw ringgrad /raw ringgrad_b /' >>"$raw"
                fi
                $torch_python "$here/torch_resnet_step.py" --model "$m" --image-size "$s" \
                    --batch "$batch" --threads "$t" --iters "$iters" --clock "$clock" >>"$raw"
            done
        done
    done
    r=$((r + 1))
done
/usr/bin/python3 - "$raw" "$also_env" <<'PY'
import collections, statistics, sys
also = sys.argv[2]
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[2:])
    key = (kv["model"], int(kv["size"]), int(kv["batch"]), int(kv["threads"]))
    v[key + (f[1],)].append(float(kv["step_ms"]))
print(f"{'model':<10}{'images':>10}{'batch':>7}{'threads':>9}{'ringgrad ms':>13}{'PyTorch ms':>12}"
      f"{'PyTorch/ringgrad':>18}" + (f"  ringgrad with {also}: ms, PyTorch/it" if also else ""))
for key in sorted({k[:4] for k in v}):
    rg = statistics.median(v[key + ("ringgrad",)])
    pt = statistics.median(v[key + ("torch",)])
    line = (f"{key[0]:<10}{'3x%dx%d' % (key[1], key[1]):>10}{key[2]:>7}{key[3]:>9}{rg:>13.1f}"
            f"{pt:>12.1f}{pt / rg:>18.2f}")
    if also:
        rb = statistics.median(v[key + ("ringgrad_b",)])
        line += f"  {rb:>10.1f} {pt / rb:>6.2f}"
    print(line)
PY
