#!/usr/bin/env bash
# sim-cluster.sh — a pretend cluster on one machine, to run ringgrad over TCP between "hosts".
#
# Each host is a network namespace (rgsim-1 .. rgsim-N, with its own hostname) whose eth0 is
# 192.168.77.<i>/24, joined by veth pairs to a bridge (rgsim-br, 192.168.77.254 on this side,
# where mpirun runs). Every link is shaped with tc tbf in both directions, so bandwidth is what
# a real 1 or 10 Gbit/s network gives, not what memory gives. mpirun starts its daemons inside
# the namespaces through this script as its rsh agent, and the ranks talk TCP.
#
#   sudo scripts/sim-cluster.sh up N [RATE]        create N hosts (RATE: 1gbit (default), 10gbit)
#   sudo scripts/sim-cluster.sh mpirun N [RATE] -- PROGRAM ARGS...
#                                                  up, run one rank per host, down (even on error)
#   sudo scripts/sim-cluster.sh down               remove every rgsim-* namespace, link, bridge
#   scripts/sim-cluster.sh check                   exit 0 if this machine can make the cluster
#   scripts/sim-cluster.sh rsh HOST COMMAND...     the rsh agent mpirun calls (not for people)
#
# Example: sudo scripts/sim-cluster.sh mpirun 4 10gbit -- build/bin/allreduce_bench --max 64M
# Needs root (ip netns, tc), iproute2 and unshare. Everything it makes is named rgsim-*.
set -euo pipefail

NET=192.168.77
BR=rgsim-br
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "sim-cluster: $*" >&2; exit 1; }

# tbf on one device: RATE, a burst of a few ms worth of bytes, at most 20 ms of queue.
shape() {
  local ns=$1 dev=$2 rate=$3
  ${ns:+ip netns exec "$ns"} tc qdisc replace dev "$dev" root tbf rate "$rate" burst 1mb latency 20ms
}

up() {
  local n=$1 rate=${2:-1gbit}
  [ "$(id -u)" = 0 ] || die "needs root"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "N must be 1..200"
  if ip -o addr | grep -q " $NET\."; then die "$NET.0/24 is in use here (sim-cluster.sh down?)"; fi
  ip link add "$BR" type bridge
  ip addr add "$NET.254/24" dev "$BR"
  ip link set "$BR" up
  for i in $(seq 1 "$n"); do
    local ns=rgsim-$i
    ip netns add "$ns"
    ip link add "rgsim-$i" type veth peer name eth0 netns "$ns"
    ip link set "rgsim-$i" master "$BR" up
    ip netns exec "$ns" ip addr add "$NET.$i/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    shape "" "rgsim-$i" "$rate"  # bridge -> host
    shape "$ns" eth0 "$rate"     # host -> bridge
  done
  echo "sim-cluster: $n hosts $NET.1..$NET.$n at $rate, mpirun side $NET.254"
}

down() {
  for ns in $(ip netns list | awk '/^rgsim-/ {print $1}'); do ip netns del "$ns"; done
  for l in $(ip -o link show | awk -F': ' '{print $2}' | grep -o '^rgsim-[^@]*' || true); do
    ip link del "$l" 2>/dev/null || true
  done
}

# mpirun's rsh agent: `rsh HOST CMD...` runs CMD (a shell command line) on host 192.168.77.<i>,
# that is inside namespace rgsim-<i>, under its own hostname so Open MPI sees N nodes.
rsh() {
  local host=$1
  shift
  [[ "$host" =~ ^$NET\.([0-9]+)$ ]] || die "rsh: unknown host $host"
  local i=${BASH_REMATCH[1]}
  exec ip netns exec "rgsim-$i" unshare --uts sh -c "hostname rgsim-$i && exec sh -c \"\$0\"" "$*"
}

run_mpi() {
  local n=$1 rate=1gbit
  shift
  if [ "${1:-}" != "--" ]; then rate=$1; shift; fi
  [ "${1:-}" = "--" ] || die "usage: mpirun N [RATE] -- PROGRAM ARGS..."
  shift
  down
  trap down EXIT
  up "$n" "$rate"
  local hosts
  hosts=$(seq -s, -f "$NET.%g:1" 1 "$n")
  "$here/rg-mpirun" -np "$n" -H "$hosts" \
    --mca plm_rsh_agent "$here/sim-cluster.sh rsh" \
    --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" \
    --mca oob_tcp_if_include "$NET.0/24" "$@"
}

# Root, network namespaces, veth, bridges and tbf: all that up() needs.
check() {
  [ "$(id -u)" = 0 ] || return 1
  ip netns add rgsim-probe 2>/dev/null || return 1
  local ok=0
  ip link add rgsim-probe type veth peer name eth0 netns rgsim-probe 2>/dev/null &&
    tc qdisc replace dev rgsim-probe root tbf rate 1gbit burst 1mb latency 20ms 2>/dev/null &&
    ip link add rgsim-probr type bridge 2>/dev/null || ok=1
  ip link del rgsim-probr 2>/dev/null || true
  ip link del rgsim-probe 2>/dev/null || true
  ip netns del rgsim-probe
  return $ok
}

case "${1:-}" in
  check) check ;;
  up) shift; up "$@" ;;
  down) down ;;
  rsh) shift; rsh "$@" ;;
  mpirun) shift; run_mpi "$@" ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
