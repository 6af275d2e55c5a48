#!/usr/bin/env bash
# sim-cluster.sh — a cluster of N hosts simulated on this machine, for multi-host MPI runs.
#
# Each host is a network namespace with its own IP address, joined to a switch (a Linux bridge in a
# namespace of its own) by a veth pair whose two ends are shaped to a rate with tc (tbf). mpirun runs
# in a "head" namespace and starts one orted per host through an rsh agent that enters the host's
# namespace instead of ssh-ing to it. Nothing is created in the root namespace, so several clusters
# (parallel ctest runs) can exist at once, all using 192.168.77.0/24. See docs/SIM_CLUSTER.md.
#
#   rg-head            rg-switch                    rg-host1 ... rg-hostN
#   eth0 .1 ─── veth ─── h0 ┐                  ┌── eth0 .11 (tbf)
#                           br0 ── hK (tbf) ───┘    ...       .10+K
#
# Usage (as root):
#   sim-cluster.sh up N [--rate R] [--delay D] [--slots S] [--id ID]   create the cluster
#   sim-cluster.sh mpirun [--id ID] -- MPIRUN_ARGS...                   mpirun across its hosts
#   sim-cluster.sh exec K [--id ID] -- COMMAND...        run a command on host K (0 = head)
#   sim-cluster.sh down [--id ID] [--all]   remove the cluster and stale ones (--all: every rg-*)
#   sim-cluster.sh status                   list the clusters, their hosts, links and processes
#   sim-cluster.sh run N [--rate R] [--delay D] [--slots S] [--id ID] -- MPIRUN_ARGS...
#                                           up, mpirun, down; exits with mpirun's status
#   sim-cluster.sh check                    exit 0 if this machine can do it, else 77 and why
# up and run also exit 77 with "SKIPPED: <why>" where namespaces are not allowed, so a ctest with
# SKIP_RETURN_CODE 77 can call `run` directly.
# R is a tc rate: 100mbit, 1gbit, 10gbit (default: unshaped). D is a one-way latency added on every
# host's uplink (10us, 1ms), which needs the netem qdisc. S is the slots (ranks) per host (default 1).
# Without --id the cluster is named "rg" (up/mpirun/exec/down) or "rg-r<pid>" (run, unique per call).
# Example: sim-cluster.sh run 2 --rate 1gbit -- -np 2 build/bin/ringgrad-train --max-steps 20
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$HERE/sim-cluster/rsh-agent.sh"
STATE=/run/rg-sim   # one folder per cluster: owner, hosts, rate, delay, slots
SUBNET=192.168.77   # head .1, host K .10+K
MAX_HOSTS=200
SKIP=77             # "skipped" for ctest

die() { echo "sim-cluster.sh: $*" >&2; exit 1; }
host_ip() { echo "$SUBNET.$((10 + $1))"; }

# ---- naming and state ------------------------------------------------------------------------
# A cluster named C owns the namespaces C-head, C-switch, C-host1..N and the folder $STATE/C.

cluster_name() { if [ -n "$1" ]; then echo "rg-$1"; else echo rg; fi; }

# The namespaces that belong to cluster $1.
cluster_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(head|switch|host[0-9]+)\$" | sort -V || true
}

# Every cluster that has a namespace or a state folder.
all_clusters() {
    {
        ip netns list 2>/dev/null | awk '{print $1}' | sed -nE 's/^(rg(-[A-Za-z0-9]+)?)-(head|switch|host[0-9]+)$/\1/p'
        [ -d "$STATE" ] && ls "$STATE"
    } | sort -u
}

# A cluster is stale when the sim-cluster.sh that owns it (a `run`, or an `up` still building it)
# has died, killed by a timeout say, or when its state is gone. A finished `up` leaves owner "-":
# such a cluster stays until `down` names it, or until its namespaces are gone (a reboot).
is_stale() {
    local owner
    owner=$(cat "$STATE/$1/owner" 2>/dev/null) || return 0
    if [ "$owner" = - ]; then
        [ -z "$(cluster_namespaces "$1")" ]
    else
        if grep -qs sim-cluster "/proc/$owner/cmdline"; then return 1; fi
    fi
}

# ---- down --------------------------------------------------------------------------------------

# Stop what still runs in namespace $1 (orted and ranks of a killed mpirun): TERM, then KILL.
stop_processes() {
    local sig pids
    for sig in TERM KILL; do
        mapfile -t pids < <(ip netns pids "$1" 2>/dev/null)
        [ ${#pids[@]} -gt 0 ] || return 0
        kill -"$sig" "${pids[@]}" 2>/dev/null || true
        sleep 0.5
    done
}

# Delete cluster $1; its veth pairs and the bridge disappear with their namespaces.
cluster_down() {
    local c=$1 ns
    for ns in $(cluster_namespaces "$c"); do
        stop_processes "$ns"
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "${STATE:?}/$c"
}

down_stale() {
    local c ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rg-check[0-9]+$'); do
        [ -e "/proc/${ns#rg-check}" ] || ip netns del "$ns" 2>/dev/null || true # a killed `check`
    done
    for c in $(all_clusters); do
        if is_stale "$c"; then
            echo "sim-cluster.sh: removing stale cluster $c" >&2
            cluster_down "$c"
        fi
    done
}

# ---- up ----------------------------------------------------------------------------------------

# "1gbit" -> 1000000000 (bits/s). tc's decimal units: kbit = 1000 bit/s.
rate_bits() {
    local n=${1%%[kmgt]bit} mult
    case "$1" in
    *kbit) mult=1000 ;;
    *mbit) mult=1000000 ;;
    *gbit) mult=1000000000 ;;
    *tbit) mult=1000000000000 ;;
    *) mult=0 ;;
    esac
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$mult" = 0 ]; then
        die "bad rate '$1' (want e.g. 100mbit, 1gbit, 10gbit)"
    fi
    echo $((n * mult))
}

# Shape the egress of device $2 in namespace $1: rate $3 (tbf) and/or one-way latency $4 (netem).
# The token bucket holds 100 us of traffic at the rate (12.5 KB at 1gbit, 125 KB at 10gbit; at
# least two full frames), so anything bigger than a few packets moves at the rate, as through a
# real NIC; a bigger bucket lets a message of that size pass at memory speed. The queue holds 50 ms
# at the rate: from 1gbit up that is a whole TCP window (6 MB), so one flow does not overflow it
# (drops would stall a run for a retransmission at random), while several senders into one port can.
# RG_SIM_BURST and RG_SIM_LIMIT (bytes) override the two.
# TCP hands the device up to 64 KB at once (GSO); tbf cuts a packet bigger than its bucket into
# frames, which costs so much CPU here that two directions at 1gbit fell to 0.65-0.84 Gbit/s each.
# So the sender's packets are capped to fit the bucket (gso_max_size), which keeps 0.93 each way.
shape_link() {
    local ns=$1 dev=$2 rate=$3 delay=$4 bytes burst limit parent=root
    if [ -n "$rate" ]; then
        bytes=$(($(rate_bits "$rate") / 8))
        burst=${RG_SIM_BURST:-$((bytes / 10000 > 3028 ? bytes / 10000 : 3028))}
        limit=${RG_SIM_LIMIT:-$((bytes / 20 > 4 * burst ? bytes / 20 : 4 * burst))}
        ip -n "$ns" link set dev "$dev" gso_max_size $((burst * 9 / 10 < 65536 ? burst * 9 / 10 : 65536)) ||
            echo "sim-cluster.sh: cannot set gso_max_size (old iproute2?); shaping costs more CPU" >&2
        tc -n "$ns" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" limit "$limit"
        parent="parent 1:1"
    fi
    if [ -n "$delay" ]; then
        # shellcheck disable=SC2086
        tc -n "$ns" qdisc add dev "$dev" $parent handle 10: netem delay "$delay" limit 100000
    fi
}

# Can this kernel delay packets (sch_netem)? Tried on a veth in a throwaway namespace.
have_netem() {
    local ns="rg-check$$" ok=1
    ip netns add "$ns" || return 1
    if ip -n "$ns" link add vcheck0 type veth peer name vcheck1 &&
        tc -n "$ns" qdisc add dev vcheck0 root netem delay 1ms 2>/dev/null; then ok=0; fi
    ip netns del "$ns"
    return $ok
}

# Create namespace $1 with loopback up and IPv6 off (no router solicitations on the wire).
make_ns() {
    ip netns add "$1"
    ip -n "$1" link set lo up
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# Connect namespace $1 (its end: eth0 with address $2) to switch port $3 of cluster $4.
plug() {
    local ns=$1 ip=$2 port=$3 sw="$4-switch"
    ip link add eth0 netns "$ns" type veth peer name "$port" netns "$sw"
    ip -n "$sw" link set "$port" master br0 up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
}

cluster_up() {
    local c=$1 n=$2 rate=$3 delay=$4 slots=$5 owner=$6 k
    # State first, complete or not at all (written aside, then renamed): a concurrent `down` must
    # never mistake a cluster being built for a stale one.
    local tmp
    mkdir -p "$STATE"
    tmp=$(mktemp -d "$STATE/.new.XXXXXX")
    chmod 755 "$tmp"
    echo "$owner" >"$tmp/owner"
    echo "$n" >"$tmp/hosts"
    echo "${rate:-unshaped}" >"$tmp/rate"
    echo "$delay" >"$tmp/delay"
    echo "$slots" >"$tmp/slots"
    mv "$tmp" "$STATE/$c"

    make_ns "$c-switch"
    ip -n "$c-switch" link add br0 type bridge
    ip -n "$c-switch" link set br0 up
    make_ns "$c-head"
    plug "$c-head" "$SUBNET.1" h0 "$c"
    for ((k = 1; k <= n; k++)); do
        make_ns "$c-host$k"
        plug "$c-host$k" "$(host_ip "$k")" "h$k" "$c"
        shape_link "$c-host$k" eth0 "$rate" "$delay" # uplink: host -> switch
        shape_link "$c-switch" "h$k" "$rate" ""      # downlink: switch -> host
    done
}

print_cluster() {
    local c=$1 n k delay
    n=$(cat "$STATE/$c/hosts")
    delay=$(cat "$STATE/$c/delay")
    echo "cluster $c: $n hosts, links $(cat "$STATE/$c/rate")${delay:+, +$delay one way}," \
        "mpirun runs in $c-head ($SUBNET.1)"
    for ((k = 1; k <= n; k++)); do echo "  $c-host$k  $(host_ip "$k")"; done
}

# ---- mpirun ------------------------------------------------------------------------------------

# mpirun in the head namespace, one orted per host through the rsh agent. MCA settings, and why:
#   plm_rsh_agent                  "ssh" = enter the host's namespace (sim-cluster/rsh-agent.sh)
#   plm_rsh_no_tree_spawn 1        mpirun starts every orted itself (no orted-starts-orted)
#   pml ob1, btl tcp,self          MPI traffic over TCP; shared memory (vader, UCX) would bypass
#                                  the simulated network, since the "hosts" share one kernel
#   btl/oob_tcp_if_include SUBNET  use the cluster's links, never loopback or another interface
#   btl_tcp_flags (default less put)  large messages as plain sends, not emulated RDMA puts: with
#                                  puts, two ranks sending to each other at once (a 2-rank ring
#                                  allreduce) got half the link rate each way, 0.47 of 0.95 Gbit/s
# rg-mpirun adds mpi_yield_when_idle 1 (a waiting rank's busy polling would starve the kernel's
# network processing: a 4.8 MB allreduce took 140-290 ms instead of 7 ms), --bind-to none (all
# "hosts" share the same cores), --oversubscribe and --allow-run-as-root.
# mpirun refuses a parameter given twice, so one the caller sets (in MPIRUN_ARGS or
# RG_MPIRUN_FLAGS) replaces ours; so do the caller's -H / --hostfile.
# shellcheck disable=SC2054 # pairs: name value (values hold commas)
CLUSTER_MCA=(
    plm rsh plm_rsh_agent "$AGENT" plm_rsh_no_tree_spawn 1
    pml ob1 btl tcp,self btl_tcp_flags send,inplace,need-ack,need-csum,hetero-rdma
    btl_tcp_if_include "$SUBNET.0/24" oob_tcp_if_include "$SUBNET.0/24"
)

# Does the argument list $2... set MCA parameter $1 (or, for $1 = -H, name the hosts)?
caller_sets() {
    local want=$1 prev=""
    shift
    for a in "$@"; do
        case "$prev/$a" in
        --mca/"$want" | -mca/"$want" | --gmca/"$want" | -gmca/"$want") return 0 ;;
        esac
        if [ "$want" = -H ]; then
            case "$a" in -H | -host | --host | -hostfile | --hostfile | -machinefile | --machinefile)
                return 0 ;;
            esac
        fi
        prev=$a
    done
    return 1
}

cluster_mpirun() {
    local c=$1 n slots hosts="" k i
    shift
    [ -e "/run/netns/$c-head" ] || die "no cluster $c (run: sim-cluster.sh up N)"
    n=$(cat "$STATE/$c/hosts")
    slots=$(cat "$STATE/$c/slots")
    # shellcheck disable=SC2206
    local theirs=("$@" ${RG_MPIRUN_FLAGS:-}) ours=()
    for ((i = 0; i < ${#CLUSTER_MCA[@]}; i += 2)); do
        caller_sets "${CLUSTER_MCA[i]}" "${theirs[@]}" || ours+=(--mca "${CLUSTER_MCA[i]}" "${CLUSTER_MCA[i + 1]}")
    done
    for ((k = 1; k <= n; k++)); do hosts+="${hosts:+,}$(host_ip "$k"):$slots"; done
    caller_sets -H "${theirs[@]}" || ours+=(-H "$hosts")
    RG_SIM_CLUSTER=$c ip netns exec "$c-head" "$HERE/rg-mpirun" "${ours[@]}" "$@"
}

# ---- check -------------------------------------------------------------------------------------

# Why this machine cannot build a cluster (empty if it can). Tries every kind of object once, in
# a throwaway namespace.
cannot_simulate() {
    local ns="rg-check$$"
    if [ "$(id -u)" != 0 ]; then
        echo "not root"
    elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
        echo "ip or tc (iproute2) not found"
    elif ! command -v mpirun >/dev/null || ! command -v unshare >/dev/null; then
        echo "mpirun or unshare not found"
    elif ! ip netns add "$ns" 2>/dev/null; then
        echo "no network namespace support (ip netns add failed)"
    else
        { ip -n "$ns" link add vcheck0 type veth peer name vcheck1 && ip -n "$ns" link add br0 type bridge &&
            tc -n "$ns" qdisc add dev vcheck0 root tbf rate 1gbit burst 64k limit 1m &&
            ip netns exec "$ns" unshare --uts true; } >/dev/null 2>&1 ||
            echo "veth, bridge, tbf or UTS namespaces not supported"
        ip netns del "$ns" 2>/dev/null || true
    fi
}

# Exit 77 ("skipped" for ctest) with the reason if this machine cannot build a cluster.
skip_unless_possible() {
    local why
    why=$(cannot_simulate)
    if [ -n "$why" ]; then
        echo "SKIPPED: sim-cluster needs root and network namespaces: $why"
        exit $SKIP
    fi
}

# ---- status ------------------------------------------------------------------------------------

status() {
    local c ns any=0
    for c in $(all_clusters); do
        any=1
        local owner
        owner=$(cat "$STATE/$c/owner" 2>/dev/null || echo "?")
        echo "cluster $c  (hosts $(cat "$STATE/$c/hosts" 2>/dev/null || echo ?)," \
            "rate $(cat "$STATE/$c/rate" 2>/dev/null || echo ?), owner ${owner/-/up}$(is_stale "$c" && echo ', STALE'))"
        for ns in $(cluster_namespaces "$c"); do
            printf '  %-22s %-18s %s processes  %s\n' "$ns" \
                "$(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')" \
                "$(ip netns pids "$ns" 2>/dev/null | wc -l)" \
                "$(tc -n "$ns" qdisc show dev eth0 2>/dev/null | grep -o 'tbf.*' | head -1)"
        done
    done
    [ $any = 1 ] || echo "no simulated clusters"
}

# ---- command line ------------------------------------------------------------------------------

usage() { sed -n '/^# Usage/,/^# Example/p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (network namespaces need CAP_SYS_ADMIN)"
}

# Remove cluster $1 however this script ends: normally, on an error, on Ctrl-C or a timeout's
# TERM. (A KILL leaves it behind as a stale cluster, which the next up/run/down removes.)
remove_on_exit() {
    # shellcheck disable=SC2064
    trap "cluster_down '$1'" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
n="" rate="" delay="" slots=1 id="" all=0
if [[ "$cmd" =~ ^(up|run|exec)$ ]]; then
    n=${1:-}
    [[ "$n" =~ ^[0-9]+$ ]] || die "$cmd: want a host count/number, got '${n}'"
    shift
fi
while [ $# -gt 0 ]; do
    case "$1" in
    --rate | --delay | --slots | --id) [ $# -ge 2 ] || die "$1 needs a value" ;;
    esac
    case "$1" in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --id) id=$2; shift 2 ;;
    --all) all=1; shift ;;
    --) shift; break ;;
    -h | --help) usage 0 ;;
    *) die "$cmd: unknown option '$1' (mpirun arguments go after --)" ;;
    esac
done
[[ "$id" =~ ^[A-Za-z0-9]*$ ]] || die "--id: letters and digits only"
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "--slots: want a positive number"
[ -z "$rate" ] || rate_bits "$rate" >/dev/null
case "$cmd" in check | status) ;; up | run) skip_unless_possible ;; *) need_root ;; esac
if [[ "$cmd" =~ ^(up|run)$ ]]; then
    if [ "$n" -lt 1 ] || [ "$n" -gt $MAX_HOSTS ]; then die "$cmd: 1 to $MAX_HOSTS hosts"; fi
    if [ -n "$delay" ] && ! have_netem; then
        die "--delay needs the netem qdisc (CONFIG_NET_SCH_NETEM), which this kernel lacks"
    fi
fi

case "$cmd" in
check)
    skip_unless_possible
    echo "sim-cluster: this machine can simulate a cluster"
    ;;
status) status ;;
up)
    c=$(cluster_name "$id")
    down_stale
    if [ -n "$(cluster_namespaces "$c")" ]; then echo "sim-cluster.sh: replacing $c" >&2; fi
    cluster_down "$c"
    remove_on_exit "$c" # until it is complete
    cluster_up "$c" "$n" "$rate" "$delay" "$slots" $$
    echo - >"$STATE/$c/owner" # complete: from now on it lives until `down`
    trap - EXIT INT TERM HUP
    print_cluster "$c"
    ;;
down)
    if [ $all = 1 ]; then
        for c in $(all_clusters); do cluster_down "$c"; done
    else
        cluster_down "$(cluster_name "$id")"
        down_stale
    fi
    ;;
mpirun) cluster_mpirun "$(cluster_name "$id")" "$@" ;;
exec)
    [ $# -gt 0 ] || die "exec: no command"
    c=$(cluster_name "$id")
    if [ "$n" = 0 ]; then ns="$c-head"; else ns="$c-host$n"; fi
    [ -e "/run/netns/$ns" ] || die "exec: no namespace $ns"
    exec ip netns exec "$ns" "$@"
    ;;
run)
    [ $# -gt 0 ] || die "run: no mpirun arguments after --"
    c=$(cluster_name "${id:-r$$}")
    remove_on_exit "$c"
    down_stale
    cluster_up "$c" "$n" "$rate" "$delay" "$slots" $$
    print_cluster "$c" >&2
    # mpirun runs in the background so that a signal interrupts `wait` at once (bash runs traps
    # only between commands); cluster_down then stops mpirun too, as it lives in the head
    # namespace. <&0 keeps stdin (a background job's would be /dev/null).
    cluster_mpirun "$c" "$@" <&0 &
    rc=0
    wait $! || rc=$?
    exit $rc
    ;;
*) usage ;;
esac
