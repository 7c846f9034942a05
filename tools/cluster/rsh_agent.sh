#!/bin/sh
# Open MPI's "remote shell" for an emulated cluster (cluster.sh run passes it to mpirun
# as --mca plm_rsh_agent "rsh_agent.sh HOSTS_FILE"). mpirun calls it as ssh would be:
#   rsh_agent.sh HOSTS_FILE [OPTIONS...] HOST COMMAND WORDS...
# It finds HOST (an address) in HOSTS_FILE (lines "address namespace hostname tmpdir",
# written by cluster.sh up) and runs the command words, joined by spaces and read by a
# shell as ssh does, inside that host: its network namespace, a UTS namespace with its
# own hostname, and its own TMPDIR (so two hosts' Open MPI session directories and
# shared-memory files never meet). Where CLUSTER_HOST_CPUS ("ADDRESS=CPUS ...", from
# cluster.sh run --pin-hosts) names HOST, everything it runs is confined to those CPUs.
set -u
PATH="/usr/sbin:/sbin:${PATH}"

hosts_file="${1:?usage: rsh_agent.sh HOSTS_FILE [OPTIONS] HOST COMMAND...}"
shift
while [ $# -gt 0 ]; do  # ssh-style options before the host, if mpirun adds any
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host="${1:?rsh_agent.sh: no host given}"
shift

line="$(awk -v host="${host}" '$1 == host { print; exit }' "${hosts_file}")"
if [ -z "${line}" ]; then
  echo "rsh_agent.sh: host ${host} is not in ${hosts_file}" >&2
  exit 255  # what ssh returns when it cannot reach a host
fi
namespace="$(echo "${line}" | awk '{print $2}')"
hostname="$(echo "${line}" | awk '{print $3}')"
tmpdir="$(echo "${line}" | awk '{print $4}')"
cpus="$(echo "${CLUSTER_HOST_CPUS:-}" | tr ' ' '\n' | awk -F= -v host="${host}" '$1 == host { print $2; exit }')"
script="hostname '${hostname}' && TMPDIR='${tmpdir}' && export TMPDIR && $*"
if [ -n "${cpus}" ]; then
  exec ip netns exec "${namespace}" unshare --uts taskset -c "${cpus}" /bin/sh -c "${script}"
fi
exec ip netns exec "${namespace}" unshare --uts /bin/sh -c "${script}"
