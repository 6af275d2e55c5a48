#!/bin/sh
# Open MPI's "ssh" for the simulated cluster: logging in to a host = entering its network namespace.
#
# mpirun (run through scripts/sim-cluster.sh, with --mca plm_rsh_agent <this file>) calls
#     rsh-agent.sh HOST COMMAND...
# exactly as it would call `ssh HOST COMMAND...` to start one orted per host. HOST is an address
# 192.168.77.(10+K) or a name hostK / <cluster>-hostK; RG_SIM_CLUSTER (exported by sim-cluster.sh)
# names the cluster, so the namespace is <cluster>-hostK.
#
# The command also gets its own UTS namespace with hostname <cluster>-hostK, so gethostname() and
# MPI_Get_processor_name() tell the hosts apart, as on a real cluster. The filesystem and the
# environment are shared with mpirun (there is no real remote login), so every variable of mpirun's
# environment reaches the ranks even without -x.
set -eu
PATH="$PATH:/usr/sbin:/sbin"
cluster="${RG_SIM_CLUSTER:?rsh-agent.sh: RG_SIM_CLUSTER is not set (run mpirun through scripts/sim-cluster.sh)}"
[ $# -ge 2 ] || { echo "usage: rsh-agent.sh HOST COMMAND..." >&2; exit 255; }
host=$1
shift
case "$host" in
192.168.77.*) k=$((${host##*.} - 10)) ;;
host[0-9]* | "$cluster"-host[0-9]*) k=${host##*host} ;;
*) k=0 ;;
esac
ns="$cluster-host$k"
if [ "$k" -lt 1 ] || [ ! -e "/run/netns/$ns" ]; then
    echo "rsh-agent.sh: no simulated host '$host' in cluster '$cluster'" >&2
    exit 255 # what ssh returns when it cannot connect
fi
# shellcheck disable=SC2016 # $1 and $* belong to the inner shell
# Like ssh, join the command words with spaces and let a shell parse them (mpirun quotes for that).
exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$1" && shift && eval "$*"' rsh-agent "$ns" "$@"
