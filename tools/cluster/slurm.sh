#!/usr/bin/env bash
# A real Slurm over an emulated cluster (cluster.sh): Debian's slurm-wlm and munge, with
# slurmctld in the cluster's launcher namespace and one slurmd in each host's namespace,
# each under the hostname Slurm knows it by, and a topology.conf of racks (a leaf switch
# per rack of --hosts-per-rack hosts, one spine above them) that tessera's fabric reads
# (docs/topology.md#the-fabric). See docs/cluster.md#slurm. Needs root.
#
#   slurm.sh up --hosts N [--hosts-per-rack K [--uplink RATE]] [--name PREFIX]
#               [cluster.sh up's options...]
#   slurm.sh srun [--name PREFIX] -- SRUN_ARGUMENTS...
#   slurm.sh exec [--name PREFIX] -- COMMAND ARGS...   (in the launcher, with SLURM_CONF)
#   slurm.sh down [--name PREFIX]
#
# `up` brings the cluster up (taking down one of the same name; with --uplink, its hosts
# in racks of K behind uplinks of RATE, as topology.conf says), then munged, slurmctld
# and the slurmds, and waits until every node is idle. `srun` runs srun in the launcher
# namespace; a task sees its host's namespace and hostname, as cluster.sh run's ranks do,
# and SLURM_CONF, so tessera finds topology.conf beside it. `down` stops Slurm and takes
# the cluster down. Everything Slurm writes (configuration, state, spools, logs, munge's
# key and socket) is in the cluster's state directory, under slurm/.
set -euo pipefail
export PATH="/usr/sbin:/sbin:${PATH}"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly CLUSTER="${SCRIPT_DIR}/cluster.sh"
readonly STATE_ROOT="${CLUSTER_STATE_ROOT:-/tmp/tessera-cluster}"
readonly LAUNCHER_OCTET=254
readonly READY_S=60  # how long `up` waits for every node to be idle

NAME=tessera

die() {
  echo "slurm.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

slurm_dir() { echo "${STATE_ROOT}/${NAME}/slurm"; }
launcher_ns() { echo "${NAME}-launcher"; }
host_ns() { echo "${NAME}-h$1"; }

# Runs COMMAND in the launcher namespace under its hostname (a UTS namespace of its own),
# with SLURM_CONF. The hosts' daemons start through cluster.sh exec, as ranks do.
in_launcher() {
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner shell
  ip netns exec "$(launcher_ns)" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$(launcher_ns)" \
    env SLURM_CONF="$(slurm_dir)/slurm.conf" "$@"
}

check_slurm() {
  local tool
  for tool in munged slurmctld slurmd srun sinfo; do
    command -v "${tool}" >/dev/null ||
      die "${tool} is missing: apt-get install slurm-wlm munge (or bash tools/install_deps.sh --slurm)"
  done
}

# The rack switches of N hosts, K a rack, and a spine above them: Slurm's tree topology.
write_topology() {
  local hosts="$1" per_rack="$2" conf="$3" rack first last racks=0
  : >"${conf}"
  for ((first = 1; first <= hosts; first += per_rack)); do
    racks=$((racks + 1))
    last=$((first + per_rack - 1 < hosts ? first + per_rack - 1 : hosts))
    rack="rack${racks}"
    if ((first == last)); then
      echo "SwitchName=${rack} Nodes=${NAME}-h${first}" >>"${conf}"
    else
      echo "SwitchName=${rack} Nodes=${NAME}-h[${first}-${last}]" >>"${conf}"
    fi
  done
  if ((racks > 1)); then
    echo "SwitchName=spine Switches=rack[1-${racks}]" >>"${conf}"
  fi
}

write_slurm_conf() {
  local hosts="$1" dir="$2" cpus
  cpus="$(nproc)"
  cat >"${dir}/slurm.conf" <<EOF
# Written by tools/cluster/slurm.sh for the emulated cluster '${NAME}'.
ClusterName=tessera
SlurmctldHost=$(launcher_ns)
AuthType=auth/munge
AuthInfo=socket=${dir}/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=${dir}/ctld
SlurmdSpoolDir=${dir}/spool/%n
SlurmctldPidFile=${dir}/slurmctld.pid
SlurmdPidFile=${dir}/slurmd.%n.pid
SlurmctldLogFile=${dir}/slurmctld.log
SlurmdLogFile=${dir}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
TopologyPlugin=topology/tree
SlurmdParameters=config_overrides
# Every emulated host sees the machine's ${cpus} CPUs; ranks may outnumber them (srun -O).
NodeName=${NAME}-h[1-${hosts}] CPUs=${cpus} State=UNKNOWN
PartitionName=emulated Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  # slurmd loads a cgroup plugin even when no plugin above uses cgroups; its guess fails
  # where /sys/fs/cgroup is a tmpfs of v1 hierarchies, so name the version.
  if [[ -d /sys/fs/cgroup/freezer ]]; then
    echo "CgroupPlugin=cgroup/v1" >"${dir}/cgroup.conf"
  else
    echo "CgroupPlugin=cgroup/v2" >"${dir}/cgroup.conf"
  fi
}

# munged in the root namespace: its socket is a file, reached from every namespace.
start_munge() {
  local dir="$1"
  dd if=/dev/urandom of="${dir}/munge.key" bs=1024 count=1 status=none
  chmod 600 "${dir}/munge.key"
  munged --force --key-file="${dir}/munge.key" --socket="${dir}/munge.socket" \
    --pid-file="${dir}/munged.pid" --log-file="${dir}/munged.log" --seed-file="${dir}/munged.seed"
}

wait_until_idle() {
  local hosts="$1" until=$((SECONDS + READY_S)) idle
  while ((SECONDS < until)); do
    idle="$(in_launcher sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)"
    ((idle == hosts)) && return 0
    sleep 1
  done
  in_launcher sinfo -N -l >&2 || true
  die "not every node became idle within ${READY_S} s (logs: $(slurm_dir)/*.log)"
}

cmd_up() {
  local hosts="" per_rack="" uplink="" pass=()
  while (($#)); do
    case "$1" in
      --hosts) hosts="${2:-}"; pass+=("$1" "${2:-}"); shift 2 ;;
      --hosts-per-rack) per_rack="${2:-}"; shift 2 ;;
      --uplink) uplink="${2:-}"; shift 2 ;;
      --name) NAME="${2:-}"; shift 2 ;;
      *) pass+=("$1" "${2:-}"); shift 2 ;;
    esac
  done
  [[ "${hosts}" =~ ^[1-9][0-9]*$ ]] || die "up: --hosts N is required"
  per_rack="${per_rack:-${hosts}}"
  [[ "${per_rack}" =~ ^[1-9][0-9]*$ ]] || die "up: --hosts-per-rack '${per_rack}': a positive number"
  [[ "${EUID}" -eq 0 ]] || die "needs root (cluster.sh, and Slurm's daemons as root)"
  check_slurm
  [[ -z "${uplink}" ]] || pass+=(--hosts-per-rack "${per_rack}" --uplink "${uplink}")
  bash "${CLUSTER}" up --name "${NAME}" "${pass[@]}"
  [[ -n "${SLURM_SH_KEEP:-}" ]] || trap 'echo "slurm.sh: up failed; taking it down" >&2; cmd_down --name "${NAME}" >/dev/null 2>&1 || true' EXIT

  local dir i
  dir="$(slurm_dir)"
  mkdir -p "${dir}/ctld"
  chmod 700 "${dir}"
  write_slurm_conf "${hosts}" "${dir}"
  write_topology "${hosts}" "${per_rack}" "${dir}/topology.conf"
  start_munge "${dir}"
  in_launcher slurmctld -i -f "${dir}/slurm.conf"
  for ((i = 1; i <= hosts; i++)); do
    mkdir -p "${dir}/spool/$(host_ns "${i}")"
    bash "${CLUSTER}" exec --name "${NAME}" --host "${i}" -- slurmd -f "${dir}/slurm.conf" -N "$(host_ns "${i}")"
  done
  wait_until_idle "${hosts}"
  trap - EXIT
  echo "slurm on '${NAME}' up: ${hosts} node(s) $(host_ns 1)..$(host_ns "${hosts}"), racks of ${per_rack}" \
    "(${dir}/topology.conf), slurmctld in $(launcher_ns)"
}

# in_slurm COMMAND [--name PREFIX] -- WORDS...: WORDS in the launcher of a cluster whose
# Slurm is up (srun: srun WORDS; exec: WORDS).
in_slurm() {
  local command="$1"
  shift
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; shift 2 ;;
      --) shift; break ;;
      *) die "${command}: unknown argument '$1' (the command's own go after --)" ;;
    esac
  done
  [[ -f "$(slurm_dir)/slurm.conf" ]] || die "Slurm is not up on '${NAME}' (slurm.sh up --hosts N --name ${NAME})"
  if [[ "${command}" == srun ]]; then
    in_launcher srun "$@"
  else
    in_launcher "$@"
  fi
}

# Stops munged (the daemons in the namespaces end with them), then the cluster.
cmd_down() {
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; shift 2 ;;
      *) die "down: unknown argument '$1'" ;;
    esac
  done
  local dir pid
  dir="$(slurm_dir)"
  for pid in "${dir}"/slurmd.*.pid "${dir}/slurmctld.pid" "${dir}/munged.pid"; do
    [[ -f "${pid}" ]] && kill "$(cat "${pid}")" 2>/dev/null || true
  done
  bash "${CLUSTER}" down --name "${NAME}"
}

main() {
  (($#)) || usage
  local command="$1"
  shift
  case "${command}" in
    up) cmd_up "$@" ;;
    srun | exec) in_slurm "${command}" "$@" ;;
    down) cmd_down "$@" ;;
    *) usage ;;
  esac
}

main "$@"
