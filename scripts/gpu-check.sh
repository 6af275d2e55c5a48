#!/usr/bin/env bash
# scripts/gpu-check.sh [PKG_DIR] [OUT_DIR]: on a GPU machine, from the package that
# scripts/gpu-pack.sh made (default .gpu), runs in this order, each under its own time limit:
#   1. the CUDA tests (tests/cuda) and the NCCL tests in a world of one (test_nccl, mpi_nccl,
#      mpi_nccl_ddp without mpirun); with 2 or more GPUs and an mpirun, the NCCL tests across
#      ranks, bus bandwidth and a data-parallel epoch;
#   2. ringgrad-bench --device cuda (GEMM and conv against cuBLAS/cuDNN, the CNN and ResNet-50
#      steps, NCCL), with cuDNN's algorithms timed and by its heuristic, and the same steps in
#      PyTorch (bench/torch_*_step.py --device cuda, when the machine's python3 has it);
#   3. ringgrad-train on the GPU for one epoch of Fashion-MNIST, the CNN and resnet20;
#   3b. (cpu) the host's CPU kernels: the per-kernel-set CPU tests with RG_ISA at the host's best
#      set (AVX-512 on the Xeons lent so far), the CNN step, and Winograd's shapes against the
#      direct passes;
#   4. compute-sanitizer's memcheck and racecheck over the kernel, op and comm tests;
#   5. ncu's kernel times of two ResNet-50 steps, ringgrad's and PyTorch's (profile.txt). Under
#      ncu our convolution race picks other algorithms than in a plain run (ncu intercepts every
#      launch, which charges a plan of several kernels more): read the convolutions' share from
#      RG_CUDA_CONV_VERBOSE=1 of a plain run, the other families from the profile
#      (docs/PERFORMANCE.md, fifteenth session).
# Writes OUT_DIR/{summary,env,tests,bench,train,cpu,sanitizer,profile}.{txt,log}; the summary is
# printed last. GPU_CHECK_BUDGET (seconds, default 330) stops starting new steps after it;
# GPU_CHECK_STEPS (default "tests multigpu bench torch train cpu sanitizer profile") picks the steps;
# GPU_CHECK_PROFILE (default "ringgrad torch") whose steps the profile step times: ringgrad,
# torch, and ringgrad-tf32 / torch-tf32 for the same steps with TF32.
set -u
pkg=$(cd "${1:-.gpu}" && pwd)
out=${2:-${OUT:-/tmp/gpu-check}}
mkdir -p "$out"
budget=${GPU_CHECK_BUDGET:-330}
steps=" ${GPU_CHECK_STEPS:-tests multigpu bench torch train cpu sanitizer profile} "
want() { [[ $steps == *" $1 "* ]]; }
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

w=/tmp/rg-gpu
rm -rf "$w" && mkdir -p "$w/ldp"
tar -C "$w" -xJf "$pkg/pkg.tar.xz"
# The tests find their data files under the source tree they were built in (RG_SOURCE_DIR).
src=$(cd "$(dirname "$0")/.." && pwd)
built_in=$(cat "$pkg/source_dir" 2>/dev/null)
if [ -n "$built_in" ] && [ ! -e "$built_in" ]; then mkdir -p "$(dirname "$built_in")" && ln -s "$src" "$built_in"; fi

{
    echo "== machine"; date -u; uname -a; grep -m1 'model name' /proc/cpuinfo; nproc
    nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo "== libraries"
} >"$out/env.log" 2>&1
# Our libraries only where the machine has none of that name.
for f in "$w"/lib/*; do
    n=$(basename "$f")
    if ! ldconfig -p | awk '{print $1}' | grep -q -x -F "$n"; then ln -s "$f" "$w/ldp/$n"; echo "carried: $n" >>"$out/env.log"; fi
done
dirs=$w/ldp
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    p=$(ldconfig -p | awk -v n="$n" '$1 == n {print $NF; exit}')
    [ -n "$p" ] || p=$(find /usr/local /opt /usr/lib -name "$n" 2>/dev/null | head -1)
    echo "$n -> ${p:-MISSING}" >>"$out/env.log"
    [ -n "$p" ] && dirs=$dirs:$(dirname "$(readlink -f "$p")"):$(dirname "$p")
done
export LD_LIBRARY_PATH=$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$out/env.log"
ldd "$w"/bin/* "$w"/tests/* 2>&1 | grep -E 'not found|cudnn|nccl|cublas|cudart' | sed 's/ (0x.*//' | sort | uniq -c >>"$out/env.log"
export RG_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
grep -E 'NVIDIA|Driver|MISSING|not found' "$out/env.log" | head -8 | tee -a "$summary"

run() { # run NAME LIMIT CMD...: one step, its log appended to tests.log
    local name=$1 limit=$2 s
    shift 2
    if [ "$(elapsed)" -gt "$budget" ]; then note "SKIP  $name (budget)"; return; fi
    s=$(date +%s)
    timeout -k 5 "$limit" "$@" >"$w/step.log" 2>&1
    local rc=$?
    local tail1
    tail1=$(grep -E 'Synthesis|SKIPPED|FAIL|passed|failed' "$w/step.log" | tail -1)
    { echo "==== $name: $* (rc $rc)"; cat "$w/step.log"; } >>"$out/tests.log"
    note "$(printf '%-4s %-28s rc=%-3s %4ss  %s' "$([ $rc = 0 ] && echo ok || echo BAD)" "$name" "$rc" "$(($(date +%s) - s))" "$tail1")"
}

# 1. tests
if want tests; then
    for t in test_cuda_link test_block_cache test_cuda_kernels test_cuda_ops test_cuda_alloc \
             test_cuda_per_thread cuda_streams test_cuda_comm test_nccl; do
        run "$t" 90 "$w/tests/$t" --jobs 8
    done
    RG_CUDA_ALLOC_CACHE=0 run test_cuda_alloc_nocache 120 "$w/tests/test_cuda_alloc" --jobs 8
    run mpi_nccl_np1 120 "$w/tests/mpi_nccl"
    run mpi_nccl_ddp_np1 120 "$w/tests/mpi_nccl_ddp"
fi

# 1b. with 2 or more GPUs and an mpirun: the NCCL tests across ranks (2 and all GPUs), bus
#     bandwidth, and one epoch of data-parallel training (not run yet: the GPUs lent so far came
#     one at a time)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if want multigpu && [ "${ngpu:-0}" -ge 2 ] && command -v mpirun >/dev/null; then
    mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH
         -x RG_NUM_THREADS -x NCCL_DEBUG -np)
    for np in $(printf '%s\n' 2 "$ngpu" | sort -un); do
        run "mpi_nccl_np$np" 180 "${mpi[@]}" "$np" "$w/tests/mpi_nccl"
        run "mpi_nccl_ddp_np$np" 180 "${mpi[@]}" "$np" "$w/tests/mpi_nccl_ddp"
    done
    if [ "$(elapsed)" -lt "$budget" ]; then
        echo "==== mpirun -np $ngpu ringgrad-bench --device cuda --only comm" >>"$out/bench.log"
        timeout -k 5 180 "${mpi[@]}" "$ngpu" "$w/bin/ringgrad-bench" --device cuda --only comm \
            --iters 7 >>"$out/bench.log" 2>&1
        note "bench comm, $ngpu GPUs rc=$?"
    fi
    if [ -f "$pkg/data/train-images-idx3-ubyte.gz" ] && [ "$(elapsed)" -lt "$budget" ]; then
        timeout -k 5 180 "${mpi[@]}" "$ngpu" "$w/bin/ringgrad-train" --device cuda --epochs 1 \
            --data-dir "$pkg/data" --json >>"$out/train.log" 2>&1
        note "train, $ngpu GPUs rc=$?: $(grep -E '^\{' "$out/train.log" | tail -1 | cut -c1-300)"
    fi
elif want multigpu; then
    note "multigpu: skipped (${ngpu:-0} GPU, mpirun $(command -v mpirun >/dev/null && echo found || echo missing))"
fi

# 2. the bench: every part (cuDNN's algorithms timed per shape, the default), then the conv and
#    ResNet parts with cuDNN's heuristic, then ResNet-50 with TF32
bench() { # bench LIMIT ARGS...: ringgrad-bench --device cuda, appended to bench.log
    local limit=$1 s
    shift
    [ "$(elapsed)" -lt "$budget" ] || { note "SKIP  bench $* (budget)"; return; }
    s=$(date +%s)
    echo "==== ringgrad-bench --device cuda $* (${RG_CUDA_CONV_ALGO:-find}, ${RG_CUDA_CONV_API:-graph} API, TF32 ${RG_CUDA_TF32:-0})" >>"$out/bench.log"
    timeout -k 5 "$limit" "$w/bin/ringgrad-bench" --device cuda "$@" >>"$out/bench.log" 2>&1
    note "bench $* rc=$? $(($(date +%s) - s))s"
}
if want bench; then
    RG_CUDA_CONV_VERBOSE=1 bench 240 --iters 7 --max-mb 64
    RG_CUDA_CONV_ALGO=heuristic bench 120 --iters 7 --only conv
    RG_CUDA_CONV_ALGO=heuristic bench 120 --iters 7 --only resnet
    RG_CUDA_TF32=1 bench 120 --iters 7 --only resnet
    RG_CUDA_CONV_API=legacy bench 150 --iters 7 --only resnet
    RG_CUDA_CONV_API=legacy RG_CUDA_TF32=1 bench 150 --iters 7 --only resnet
    grep -E '^raw ringgrad-cuda' "$out/bench.log" | tee -a "$summary"
fi

# 2b. the same steps in PyTorch on this GPU (the machine's python3)
torch_step() { # torch_step SCRIPT ARGS...
    [ "$(elapsed)" -lt "$budget" ] || { note "SKIP  torch $* (budget)"; return; }
    env -u LD_LIBRARY_PATH timeout -k 5 90 python3 "$src/bench/$1" --device cuda --iters 7 "${@:2}" \
        >>"$out/bench.log" 2>&1 || note "torch $* failed"
}
if ! want torch; then
    :
elif python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    torch_step torch_cnn_step.py --batch 64
    torch_step torch_cnn_step.py --batch 128
    torch_step torch_resnet_step.py --model resnet50 --image-size 224 --batch 32
    torch_step torch_resnet_step.py --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --phases
    torch_step torch_resnet_step.py --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --tf32
    grep -E '^raw torch' "$out/bench.log" | cut -c1-200 | tee -a "$summary"
else
    note "no PyTorch with CUDA here"
fi

# 3. training on the GPU, one epoch of Fashion-MNIST
if want train && [ -f "$pkg/data/train-images-idx3-ubyte.gz" ] && [ "$(elapsed)" -lt "$budget" ]; then
    s=$(date +%s)
    timeout -k 5 120 "$w/bin/ringgrad-train" --device cuda --epochs 1 --data-dir "$pkg/data" \
        --json >>"$out/train.log" 2>&1
    note "train --device cuda rc=$? $(($(date +%s) - s))s: $(grep -E '^\{' "$out/train.log" | tail -1 | cut -c1-400)"
    # resnet20, the recipe of docs/PERFORMANCE.md's CPU run (88.4% after one epoch there)
    s=$(date +%s)
    timeout -k 5 150 "$w/bin/ringgrad-train" --device cuda --model resnet20 --optim sgd --lr 0.1 \
        --momentum 0.9 --weight-decay 5e-4 --lr-schedule cosine --warmup-steps 50 --epochs 1 \
        --batch-size 128 --data-dir "$pkg/data" --json >>"$out/train.log" 2>&1
    note "train resnet20 --device cuda rc=$? $(($(date +%s) - s))s: $(grep -E '^\{' "$out/train.log" | tail -1 | cut -c1-400)"
fi

# 3b. the CPU kernels of this host's best set (the GPU hosts lent so far are AVX-512 Xeons, which
#     the project's CPU machines often are not): the tests that run once per kernel set, with
#     RG_ISA set to it; then the CNN step against its GEMM floor and PyTorch's on the CPU, and the
#     3x3 shapes that Winograd takes against the direct passes (RG_CONV_WINOGRAD=0), alternated.
if want cpu; then
    isa=$(env -u RG_ISA "$w/bin/ringgrad-bench" --isa-default 2>/dev/null)
    note "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc --all) cores, kernels $isa"
    for t in test_conv2d test_gradcheck test_elementwise test_kernels test_dropout test_maxpool2d \
             test_batchnorm2d test_bcast test_reduce test_cross_entropy test_matmul test_layers \
             test_reference test_optim test_dist; do
        RG_ISA=$isa run "cpu $t ($isa)" 120 "$w/tests/$t" --jobs 8
    done
    for round in 1 2; do
        [ "$(elapsed)" -lt "$budget" ] || { note "SKIP  cpu bench round $round (budget)"; break; }
        {
            echo "==== round $round: ringgrad-bench --only cnn --iters 5 --ops (RG_ISA=$isa)"
            RG_ISA=$isa timeout -k 5 120 "$w/bin/ringgrad-bench" --only cnn --iters 5 --ops
            for t in 1 2; do
                env -u LD_LIBRARY_PATH timeout -k 5 60 python3 "$src/bench/torch_cnn_step.py" \
                    --threads "$t" --iters 5 || echo "torch_cnn_step.py failed"
            done
            for layer in cnn.conv2 r18.l1.3x3 r18.l2.3x3 r18.l3.3x3; do
                for wg in 1 0; do
                    echo "==== RG_CONV_WINOGRAD=$wg --layer $layer"
                    RG_ISA=$isa RG_CONV_WINOGRAD=$wg timeout -k 5 60 "$w/bin/ringgrad-bench" \
                        --only conv --layer "$layer" --threads 1 --iters 5 | grep -E "^1 "
                done
            done
        } >>"$out/cpu.log" 2>&1
        note "cpu bench round $round rc=$?: $(grep -E '^[12] ' "$out/cpu.log" | grep -v -E 'forward|bwd' | tail -2 | tr -s ' ' | tr '\n' ';')"
    done
fi

# 4. compute-sanitizer, while time is left
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if want sanitizer && [ -n "$cs" ]; then
    for tool in memcheck racecheck; do
        for t in ${GPU_CHECK_SANITIZE:-test_cuda_ops test_cuda_kernels test_cuda_comm}; do
            [ "$(elapsed)" -lt "$budget" ] || break
            s=$(date +%s)
            # --report-api-errors no: NCCL probes its kernels for other GPUs with
            # cudaFuncGetAttributes and handles the "no kernel image" errors itself (24 of them
            # in test_cuda_comm on the first H200 run, all inside libnccl); ours are all checked
            timeout -k 5 120 "$cs" --tool $tool --target-processes all --error-exitcode 9 \
                --report-api-errors no "$w/tests/$t" --jobs 4 >"$w/step.log" 2>&1
            rc=$?
            { echo "==== $tool $t (rc $rc)"; cat "$w/step.log"; } >>"$out/sanitizer.log"
            note "$tool $t rc=$rc $(($(date +%s) - s))s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$w/step.log" | sort | uniq -c | tr '\n' ' ' | cut -c1-160)"
        done
    done
fi

# 5. kernel times of two ResNet-50 steps, ours and PyTorch's (ncu, the range each program opens
#    with cudaProfilerStart; about a minute each)
ncu=$(command -v ncu || find /usr/local/cuda/bin -name ncu 2>/dev/null | head -1)
kernel_table() { # kernel_table CSV: total and the 25 largest kernels, by ncu's gpu__time_duration
    python3 - "$1" <<'PY'
import collections, csv, sys
scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
         "second": 1e3, "s": 1e3}
tot, cnt = collections.Counter(), collections.Counter()
with open(sys.argv[1], newline="") as f:
    rows = [r for r in csv.reader(f) if len(r) > 5]
first = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
if first is None:
    sys.exit("no kernel rows")
head = rows[first]
k, u, v = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
for r in rows[first + 1:]:
    if r[u] not in scale:
        sys.exit(f"unknown time unit {r[u]!r} in ncu's CSV")
    try:
        ms = float(r[v].replace(",", "")) * scale[r[u]]
    except ValueError:
        continue
    tot[r[k]] += ms / 2  # two steps
    cnt[r[k]] += 1
print(f"  {sum(tot.values()):8.2f} ms a step in {sum(cnt.values()) // 2} kernels")
for name, ms in tot.most_common(25):
    print(f"  {ms:8.3f} ms {cnt[name] // 2:5d}x  {name[:110]}")
PY
}
if want profile && [ -n "$ncu" ]; then
    for who in ${GPU_CHECK_PROFILE:-ringgrad torch}; do
        [ "$(elapsed)" -lt "$budget" ] || break
        s=$(date +%s)
        math=FP32
        case $who in
        ringgrad) set -- "$w/bin/ringgrad-bench" --device cuda --only resnet --iters 3 ;;
        ringgrad-tf32)
            math=TF32
            set -- env RG_CUDA_TF32=1 "$w/bin/ringgrad-bench" --device cuda --only resnet --iters 3 ;;
        torch | torch-tf32)
            set -- env -u LD_LIBRARY_PATH python3 "$src/bench/torch_resnet_step.py" --device cuda \
                --model resnet50 --image-size 224 --batch 32 --cudnn-benchmark --phases --iters 3
            if [ "$who" = torch-tf32 ]; then math=TF32; set -- "$@" --tf32; fi ;;
        *)
            note "profile: unknown GPU_CHECK_PROFILE entry '$who' (ringgrad, torch, ringgrad-tf32," \
                "torch-tf32)"
            continue ;;
        esac
        timeout -k 5 300 "$ncu" --profile-from-start off --clock-control none --target-processes all \
            --metrics gpu__time_duration.sum --csv --log-file "$w/prof.csv" "$@" >"$w/prof.err" 2>&1
        rc=$?
        { echo "==== $who: ResNet-50, batch 32, 224 px, $math, two steps (rc $rc)"
          kernel_table "$w/prof.csv" 2>&1 || tail -5 "$w/prof.err"; } >>"$out/profile.txt"
        gzip -c "$w/prof.csv" >"$out/profile-$who.csv.gz" 2>/dev/null
        note "profile $who rc=$rc $(($(date +%s) - s))s: $(grep 'ms a step' "$out/profile.txt" | tail -1)"
    done
fi

note "total $(elapsed)s"
echo "---- bench (conv and cnn)"
grep -E '^(r18|r50|cnn)\.|images/s' "$out/bench.log" 2>/dev/null
echo "---- summary"
cat "$summary"
