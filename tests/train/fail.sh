#!/usr/bin/env bash
# Failures of a multi-rank ringgrad-train job must end the whole job quickly, with a non-zero exit
# and a message that says what went wrong, on every rank that knows; never a hang.
#   fail.sh kill        2 ranks; rank 1 gets SIGKILL in the middle of training (found through its
#                       OMPI_COMM_WORLD_RANK among the job's processes): the job ends within 20 s
#   fail.sh kill_pipeline  the same with --strategy pipeline: rank 1 is stage 1 of the GPipe
#                       pipeline, stage 0 waits on it in a send or recv
#   fail.sh ps_kill     3 ranks, --strategy ps-sync --servers 1: the server (rank 2) gets SIGKILL in
#                       the middle of training: the job ends within 20 s, as for kill
#   fail.sh mismatch    mpirun -np 1 ... --model cnn : -np 1 ... --model mlp: every rank names the
#                       differing setting; exit 1
#   fail.sh options     the same model with --accum-steps 1 on rank 0 and 2 on rank 1 (which would
#                       otherwise reduce at different steps): every rank says so; exit 1
#   fail.sh nodata      --data-dir missing on both ranks: each says so; exit 1
#   fail.sh nodata1     missing on rank 1 only: rank 1 says so, both exit 1 (no hang)
#   fail.sh oom         2 ranks whose step needs more memory than RG_CPU_MEM_LIMIT allows (as a
#                       batch too large for the host would): each rank names the tensor it could
#                       not allocate and the job ends at once with exit 1, instead of an OOM kill
#   fail.sh flags       bad flags exit 2 with the problem and a pointer to --help, alone and
#                       under mpirun; --help and --version exit 0
TRAIN_TIMEOUT=60
source "$(dirname "$0")/lib.sh"
mode=$1
log="$RG_TRAIN_OUT/fail_$mode.log"

# expect_exit WANT SECONDS CMD...: runs CMD (a program, or the function train or mpmd), killed
# after TRAIN_TIMEOUT, with its output in $log; checks its exit status and that it took less than
# SECONDS.
expect_exit() {
    local want=$1 limit=$2
    shift 2
    local start rc secs
    start=$(date +%s.%N)
    if [ "$(type -t "$1")" = function ]; then
        "$@" >"$log" 2>&1
    else
        timeout -k 5 "$TRAIN_TIMEOUT" "$@" >"$log" 2>&1
    fi
    rc=$?
    secs=$(elapsed "$start")
    tail -n 15 "$log"
    echo "-- exit $rc after ${secs}s"
    [ $rc = 124 ] && fail "hung: still running after ${TRAIN_TIMEOUT}s"
    [ $rc = "$want" ] || fail "exit status $rc, want $want"
    awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s < l) }' || fail "took ${secs}s (limit ${limit}s)"
}

# expect_line REGEX: some line of $log matches the extended regex.
expect_line() { grep -Eq -- "$1" "$log" || fail "no line of the output matches /$1/"; }

mpmd() { # mpmd "ARGS OF RANK 0" "ARGS OF RANK 1" (split at spaces)
    # shellcheck disable=SC2206
    local a=($1) b=($2)
    timeout -k 5 "$TRAIN_TIMEOUT" "$RG_MPIRUN" -np 1 "$RG_TRAIN" "${a[@]}" : -np 1 "$RG_TRAIN" "${b[@]}"
}

case $mode in
kill | kill_pipeline | ps_kill)
    np=2 vrank=1 extra=()
    [ "$mode" = kill_pipeline ] && extra=(--strategy pipeline --micro-batches 4)
    [ "$mode" = ps_kill ] && np=3 vrank=2 extra=(--strategy ps-sync --servers 1)
    # RG_PROGRESS=bar: a bar per step even into a file, so that the test sees step 3
    RG_PROGRESS=bar train $np --model cnn --batch-size 16 --epochs 1000 "${extra[@]}" >"$log" 2>&1 &
    job=$!
    # The bar is redrawn at most every few steps, so a fast machine may never print " 3/30 [":
    # wait for any step from 3 on, or a later epoch.
    past_step3=' ([3-9]|[12][0-9]|30)/30 \[|^Epoch 2/'
    for _ in $(seq 1200); do # up to 120 s for start-up and 3 steps
        grep -Eq "$past_step3" "$log" && break
        kill -0 $job 2>/dev/null || break
        sleep 0.1
    done
    grep -Eq "$past_step3" "$log" || { cat "$log"; fail "training never reached step 3"; }
    victim=$(rank_pids $job | awk -v v=$vrank '$2 == v {print $1}')
    rank0=$(rank_pids $job | awk '$2 == 0 {print $1}')
    if [ -z "$victim" ] || [ -z "$rank0" ]; then fail "cannot find the ranks' processes"; fi
    start=$(date +%s.%N)
    kill -9 "$victim"
    for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    secs=$(elapsed "$start")
    if kill -0 $job 2>/dev/null; then
        kill -- -$job 2>/dev/null; kill $job
        fail "the job still runs ${secs}s after rank $vrank was killed"
    fi
    wait $job
    rc=$?
    tail -c 2000 "$log" | tr '\r' '\n' | tail -n 12
    echo "-- exit $rc, ${secs}s after SIGKILL to rank $vrank (pid $victim)"
    [ $rc != 0 ] || fail "the job exited 0"
    awk -v s="$secs" 'BEGIN { exit !(s < 20) }' || fail "the job took ${secs}s to end (limit 20)"
    expect_line "exited on signal 9"
    for _ in $(seq 50); do # a zombie has no exe link: it has ended
        readlink "/proc/$rank0/exe" >/dev/null 2>&1 || break
        sleep 0.1
    done
    readlink "/proc/$rank0/exe" >/dev/null 2>&1 && fail "rank 0 (pid $rank0) is still running"
    ;;
mismatch)
    d="--data-dir $RG_TRAIN_DATA --max-steps 2"
    expect_exit 1 30 mpmd "$d --model cnn" "$d --model mlp"
    for r in 0 1; do
        # the settings are compared first (agree.sh); the DDP fingerprint behind them is tested
        # by tests/dist
        expect_line "^ringgrad-train: rank $r: error: the ranks' settings differ .*--model is cnn on rank 0, mlp on rank 1"
    done
    ;;
options)
    d="--data-dir $RG_TRAIN_DATA --model mlp --max-steps 2"
    expect_exit 1 30 mpmd "$d" "$d --accum-steps 2"
    for r in 0 1; do
        expect_line "^ringgrad-train: rank $r: error: the ranks' settings differ .*--accum-steps is 1 on rank 0, 2 on rank 1"
    done
    ;;
nodata)
    expect_exit 1 30 train 2 --data-dir "$RG_TRAIN_OUT/no such folder" --max-steps 2
    for r in 0 1; do
        expect_line "^ringgrad-train: rank $r: error: Fashion-MNIST not found: .*/no such folder is not a folder"
    done
    ;;
nodata1)
    expect_exit 1 30 mpmd "--data-dir $RG_TRAIN_DATA --max-steps 2" "--data-dir /nonexistent/fmnist --max-steps 2"
    expect_line "^ringgrad-train: rank 1: error: Fashion-MNIST not found: /nonexistent/fmnist"
    grep -q "rank 0: error" "$log" && fail "rank 0 reported an error of its own"
    ;;
oom)
    export RG_CPU_MEM_LIMIT=40M # the CNN's parameters, Adam and buckets fit; 480 images do not
    expect_exit 1 30 train 2 --batch-size 480 --max-steps 2 # 1, not 134: a size error, not a bug
    expect_line "^ringgrad: out of memory allocating 41.5 MB for a float32 tensor \(480,32,26,26\) on cpu, with [0-9.]+ MB already in use by tensors \([^)]* more cached\); RG_CPU_MEM_LIMIT caps them at 41.9 MB"
    # (not "MPI_ABORT was invoked": when both ranks abort at once, Open MPI's notice can be lost)
    RG_CPU_MEM_LIMIT=16M expect_exit 1 30 train 2 --batch-size 480 --max-steps 2 # no room for a bucket
    expect_line "^ringgrad-train: rank [01]: error: ddp: out of memory for bucket 0"
    # --json: the summary line still comes, its "error" the allocation that failed (one rank)
    expect_exit 1 30 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --batch-size 480 --max-steps 2 --json
    expect_line '^\{"version":.*"steps":0,.*"error":"out of memory allocating 41.5 MB for a float32 tensor \(480,32,26,26\)'
    ;;
flags)
    check_flag() { # EXPECTED-REGEX ARGS...
        local want=$1
        shift
        expect_exit 2 20 "$RG_TRAIN" "$@"
        expect_line "^ringgrad-train: $want"
        expect_line "^Try 'ringgrad-train --help'"
    }
    check_flag "unknown option '--bogus'" --bogus
    check_flag "--batch-size: 0 is out of range" --batch-size 0
    check_flag "--model: 'resnet' is not one of cnn\|mlp" --model resnet
    check_flag "--lr: 'fast' is not a number" --lr fast
    check_flag "--epochs needs a value" --epochs
    check_flag "unexpected argument 'extra'" extra
    check_flag "--resume and --init exclude each other" --resume a --init b
    check_flag "--nesterov is a form of SGD's momentum: it needs --optim sgd \(not adam\)" --nesterov --momentum 0.9
    check_flag "--nesterov needs --momentum X > 0" --optim sgd --nesterov
    check_flag "--no-wd-bn-bias needs --weight-decay X > 0" --optim sgd --no-wd-bn-bias
    check_flag "--timeline-ops needs --timeline FILE" --timeline-ops
    # the optimizer registry (optim/registry.c) checks --optim and the options it is given
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --optim lamb
    expect_line "^ringgrad-train: error: optimizer: no optimizer named 'lamb' \(known: sgd, adam, adamw\)"
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --momentum 0.9
    expect_line "^ringgrad-train: error: optimizer: adam has no option 'momentum' \(its options: lr, beta1"
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --strategy zero1 --resume x
    expect_line "^ringgrad-train: error: x: cannot open" # zero1 resumes now: the missing file
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --strategy zero1 --compress fp16
    expect_line "^ringgrad-train: error: --strategy zero1 takes no --compress"
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --strategy pipeline
    expect_line "^ringgrad-train: error: --strategy pipeline with 1 ranks, 2 stages: needs a multiple of --pipeline-stages ranks"
    # parameter servers (dist/ps.c)
    check_flag "--straggle: '1' is not RANK:MS" --straggle 1
    check_flag "--strategy: 'ps' is not one of" --strategy ps
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --strategy ps-sync
    expect_line "^ringgrad-train: error: ps-sync: parameter servers need 2 or more ranks .*this job has 1"
    # outputs that are not regular files are refused at start-up and left as they were (a
    # checkpoint is written beside its path and renamed over it)
    rm -rf "$RG_TRAIN_OUT/nonregular" && mkdir -p "$RG_TRAIN_OUT/nonregular"
    ln -s target.safetensors "$RG_TRAIN_OUT/nonregular/link.safetensors"
    mkfifo "$RG_TRAIN_OUT/nonregular/fifo"
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --model mlp \
        --save "$RG_TRAIN_OUT/nonregular/link.safetensors"
    expect_line "^ringgrad-train: error: --save .*/link.safetensors: is a symbolic link to target.safetensors; it would be replaced"
    [ -L "$RG_TRAIN_OUT/nonregular/link.safetensors" ] || fail "--save replaced the link"
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --model mlp \
        --timeline "$RG_TRAIN_OUT/nonregular/fifo"
    expect_line "^ringgrad-train: error: --timeline .*/fifo: is a FIFO"
    [ -p "$RG_TRAIN_OUT/nonregular/fifo" ] || fail "--timeline replaced the FIFO"
    # accumulation longer than an epoch would take no optimizer step
    expect_exit 1 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --model mlp --accum-steps 1000
    expect_line "^ringgrad-train: error: --accum-steps 1000 is more than the [0-9]+ batches of an epoch"
    # an MLP whose fc1 could be no tensor at all: an error, not a failed check (SIGABRT)
    expect_exit 1 20 "$RG_TRAIN" --data synthetic --image-size 16384 --channels 1024 --model mlp \
        --batch-size 1 --max-steps 1
    expect_line "^ringgrad-train: error: .*model mlp: fc1 would take 1024x16384x16384"
    expect_exit 1 30 "$RG_MPIRUN" -np 2 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --strategy ps-async --compress fp16
    expect_line "^ringgrad-train: rank 0: error: --strategy ps-async takes no --compress"
    # options that change nothing where given: one note each (rank 0 only), and the run goes on
    expect_exit 0 30 "$RG_MPIRUN" -np 2 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 \
        --model mlp --servers 2 --micro-batches 3 --keep 2 --sync-bn --lr-gamma 0.5
    for want in "--servers changes nothing without --strategy ps-sync or ps-async" \
        "--micro-batches changes nothing without --strategy pipeline" \
        "--keep changes nothing without --save-every" "--sync-bn changes nothing without a model with BatchNorm" \
        "--lr-gamma changes nothing without --lr-schedule step"; do
        [ "$(grep -c "^ringgrad-train: note: $want" "$log")" = 1 ] || fail "not one note '$want'"
    done
    RG_PROGRESS=bogus expect_exit 0 30 "$RG_TRAIN" --data synthetic --data-dir "$RG_TRAIN_DATA" \
        --max-steps 1 --epochs 1 --model mlp --straggle 5:10
    for want in "--data-dir changes nothing without --data fmnist or imagefolder" \
        "--straggle 5:10 changes nothing: this job's ranks are 0-0"; do
        [ "$(grep -c "^ringgrad-train: note: $want" "$log")" = 1 ] || fail "not one note '$want'"
    done
    want='ringgrad: warning: RG_PROGRESS="bogus" is not one of lines, bar; using the default'
    [ "$(grep -c "^$want" "$log")" = 1 ] || fail "not one warning '$want'"
    expect_exit 0 20 "$RG_TRAIN" --data-dir "$RG_TRAIN_DATA" --max-steps 1 --model mlp \
        --lr-schedule step --lr-gamma 0.5 --compress powersgd --powersgd-rank 2
    ! grep -q "note:" "$log" || fail "a note where the options act: $(grep note: "$log")"
    expect_exit 2 30 "$RG_MPIRUN" -np 2 "$RG_TRAIN" --bogus
    [ "$(grep -c "^ringgrad-train: unknown option '--bogus'" "$log")" = 2 ] || fail "not one message per rank"
    expect_exit 0 20 "$RG_TRAIN" --help
    expect_line "^Usage: ringgrad-train \[options\]"
    expect_line "^  --accum-steps K"
    # --version: the header's version (include/ringgrad/version.h, which CMake also reads)
    want=$(sed -n 's/^#define RG_VERSION_STRING "\(.*\)"$/\1/p' "$HERE/../../include/ringgrad/version.h")
    [ -n "$want" ] || fail "no RG_VERSION_STRING in version.h"
    expect_exit 0 20 "$RG_TRAIN" --version
    expect_line "^ringgrad-train $want \(built against $want\)$"
    expect_line "^CPU kernels: (avx512|avx2|generic)$"
    ;;
*) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode"
