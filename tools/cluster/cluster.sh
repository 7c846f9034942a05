#!/usr/bin/env bash
# An emulated cluster on this machine: N hosts as network namespaces joined by a bridge,
# each host's link shaped with tc tbf, and Open MPI's mpirun launching ranks across them.
# See docs/cluster.md for the layout and its limits. Needs root.
#
#   cluster.sh up --hosts N [--rate 2gbit|none] [--mtu 1500] [--burst BYTES] [--name PREFIX]
#                 [--subnet 10.x.y.0/24] [--hosts-per-rack K --uplink RATE]
#   cluster.sh run --hosts N --ranks-per-host R [--name PREFIX] [--timeout S] [--pin-hosts]
#                  [--mca KEY VALUE]... [-x VAR[=VALUE]]... -- PROGRAM ARGS...
#   cluster.sh measure [--name PREFIX] [--from I] [--to J] [--seconds S]
#   cluster.sh exec [--name PREFIX] --host I -- COMMAND ARGS...
#   cluster.sh status [--name PREFIX]
#   cluster.sh down [--name PREFIX]
#
# Everything a cluster creates carries its PREFIX (default "tessera"), so clusters with
# different prefixes coexist: namespaces PREFIX-h1..PREFIX-hN (the hosts), PREFIX-switch
# (the bridge) and PREFIX-launcher (where mpirun runs), and the state directory
# $CLUSTER_STATE_ROOT/PREFIX (default /tmp/tessera-cluster/PREFIX). Nothing is added to
# the root network namespace: every interface lives inside the cluster's namespaces.
set -euo pipefail
export PATH="/usr/sbin:/sbin:${PATH}"  # ip and tc, also under Bazel's fixed PATH

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly STATE_ROOT="${CLUSTER_STATE_ROOT:-/tmp/tessera-cluster}"
readonly HOST_IFNAME=eth0      # the interface inside every host (and the launcher)
readonly LAUNCHER_OCTET=254    # the launcher's address in the subnet: .254
readonly MAX_HOSTS=200
readonly TBF_LATENCY=5ms       # longest a packet may wait in a tbf queue before a drop
readonly LEAST_BUCKET=131072   # the default bucket's floor: two of the 64 KiB segments TCP hands a veth

PYTHON=/usr/bin/python3
[[ -x "${PYTHON}" ]] || PYTHON=python3

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# --- Names and state ----------------------------------------------------------------

host_ns() { echo "${NAME}-h$1"; }
switch_ns() { echo "${NAME}-switch"; }
launcher_ns() { echo "${NAME}-launcher"; }
state_dir() { echo "${STATE_ROOT}/${NAME}"; }

# The cluster's namespaces that exist now, one a line (also those of a half-made cluster).
existing_namespaces() {
  ip netns list | awk '{print $1}' |
    grep -E "^${NAME//./[.]}-(switch|launcher|h[0-9]+)$" || true
}

check_name() {
  [[ "${NAME}" =~ ^[A-Za-z][A-Za-z0-9_.-]{0,23}$ ]] ||
    die "--name '${NAME}': a letter, then at most 23 letters, digits, '_', '.' or '-'"
}

check_root() {
  [[ "${EUID}" -eq 0 ]] || die "needs root (network namespaces, veths and tc)"
}

# Loads the cluster's configuration written by `up` (HOSTS, SUBNET, PREFIX_BASE, RATE,
# MTU, BURST) or fails naming what is missing.
load_cluster() {
  local conf
  conf="$(state_dir)/cluster.conf"
  [[ -f "${conf}" ]] ||
    die "cluster '${NAME}' is not up (no ${conf}): run cluster.sh up --hosts N --name ${NAME}"
  # shellcheck source=/dev/null
  source "${conf}"
  local ns
  for ns in "$(switch_ns)" "$(launcher_ns)"; do
    ip netns list | awk '{print $1}' | grep -qxF "${ns}" ||
      die "cluster '${NAME}' is broken: namespace ${ns} is missing (run down, then up)"
  done
}

# --- Argument checks ----------------------------------------------------------------

# Bytes per second of a tc rate (e.g. 2gbit, 500mbit); fails on anything else.
rate_bytes_per_second() {
  local number unit
  [[ "$1" =~ ^([0-9]+)(bit|kbit|mbit|gbit|tbit)$ ]] ||
    die "--rate '$1': expected a number and bit, kbit, mbit, gbit or tbit (e.g. 2gbit), or none"
  number="${BASH_REMATCH[1]}"
  unit="${BASH_REMATCH[2]}"
  ((10#${number} > 0)) || die "--rate '$1': must be above zero (or none)"
  number=$((10#${number}))
  case "${unit}" in
    bit) echo $((number / 8)) ;;
    kbit) echo $((number * 1000 / 8)) ;;
    mbit) echo $((number * 1000000 / 8)) ;;
    gbit) echo $((number * 1000000000 / 8)) ;;
    tbit) echo $((number * 1000000000000 / 8)) ;;
  esac
}

# Sets PREFIX_BASE ("10.99.0") from a private a.b.c.0/24 subnet, or fails.
parse_subnet() {
  [[ "$1" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$ ]] ||
    die "--subnet '$1': expected a.b.c.0/24"
  local a="${BASH_REMATCH[1]}" b="${BASH_REMATCH[2]}" c="${BASH_REMATCH[3]}"
  ((a <= 255 && b <= 255 && c <= 255)) || die "--subnet '$1': octet out of range"
  if ! ((a == 10 || (a == 172 && b >= 16 && b <= 31) || (a == 192 && b == 168))); then
    die "--subnet '$1': must be private (10/8, 172.16/12 or 192.168/16)"
  fi
  PREFIX_BASE="${a}.${b}.${c}"
}

check_count() {  # check_count FLAG VALUE MAX
  if ! [[ "$2" =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > $3)); then die "$1 '$2': expected 1..$3"; fi
}

# --- up -----------------------------------------------------------------------------

# bucket_bytes [RATE]: the bucket of a tbf at RATE (default: the hosts' --rate). By
# default it holds 0.5 ms at the rate (at least 128 KiB, two of the largest segments TCP
# hands a veth), so a bulk stream reaches the rate while a burst after idle gains at
# most 0.5 ms of sending; --burst sets it.
bucket_bytes() {
  local bytes
  if ((BURST > 0)); then echo "${BURST}"; return; fi
  bytes="$(rate_bytes_per_second "${1:-${RATE}}")"
  bytes=$((bytes / 2000))
  ((bytes >= LEAST_BUCKET)) || bytes=${LEAST_BUCKET}
  echo "${bytes}"
}

# shape NS DEV [RATE]: caps egress of DEV in NS at RATE (default: the hosts' --rate) with
# a token bucket. A bucket under 128 KiB (--burst) also caps the segments DEV takes at a
# quarter of it (8-64 KiB), so that the bucket holds several: tbf cuts a larger one up in
# software, at the rate's cost.
shape() {
  local burst segment rate="${3:-${RATE}}"
  burst="$(bucket_bytes "${rate}")"
  if ((burst < LEAST_BUCKET)); then
    segment=$((burst / 4))
    ((segment >= 8192)) || segment=8192
    ip -n "$1" link set dev "$2" gso_max_size "${segment}"
  fi
  tc -n "$1" qdisc replace dev "$2" root tbf rate "${rate}" burst "${burst}" latency "${TBF_LATENCY}"
}

# add_port INDEX_NAME NS ADDRESS [BRIDGE]: a veth from the switch's BRIDGE (default br0,
# the spine; port INDEX_NAME) to eth0 in NS, created directly inside the two namespaces,
# with ADDRESS/24 on eth0.
add_port() {
  local port="$1" ns="$2" address="$3" bridge="${4:-br0}"
  ip link add "${port}" netns "$(switch_ns)" mtu "${MTU}" type veth \
    peer name "${HOST_IFNAME}" netns "${ns}" mtu "${MTU}"
  ip -n "$(switch_ns)" link set "${port}" master "${bridge}" up
  ip -n "${ns}" link set lo up
  ip -n "${ns}" addr add "${address}/24" dev "${HOST_IFNAME}"
  ip -n "${ns}" link set "${HOST_IFNAME}" up
}

# new_namespace NS: an empty network namespace without IPv6 (nothing but our IPv4
# subnet is ever configured in a cluster, so nothing else can carry traffic).
new_namespace() {
  ip netns add "$1"
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# Every namespace of the cluster resolves the hosts' names (PREFIX-h1..) to their
# addresses, as a cluster's DNS would: `ip netns exec` puts /etc/netns/NS/hosts in place
# of /etc/hosts (programs such as torchrun's rendezvous look their own hostname up).
write_hosts_files() {
  local ns i
  for ns in "$(launcher_ns)" $(for ((i = 1; i <= $1; i++)); do host_ns "${i}"; done); do
    mkdir -p "/etc/netns/${ns}"
    {
      echo "127.0.0.1 localhost"
      for ((i = 1; i <= $1; i++)); do echo "${PREFIX_BASE}.${i} $(host_ns "${i}")"; done
      echo "${PREFIX_BASE}.${LAUNCHER_OCTET} $(launcher_ns)"
    } >"/etc/netns/${ns}/hosts"
  done
}

# add_racks HOSTS: a bridge per rack of HOSTS_PER_RACK hosts (rk1, rk2, ...) in the
# switch, each joined to the spine (br0) by a veth whose two ends are shaped to UPLINK
# (rkJ-up sends up, rkJ-dn sends down).
add_racks() {
  local hosts="$1" racks j
  racks=$(((hosts + HOSTS_PER_RACK - 1) / HOSTS_PER_RACK))
  for ((j = 1; j <= racks; j++)); do
    ip -n "$(switch_ns)" link add "rk${j}" mtu "${MTU}" type bridge
    ip -n "$(switch_ns)" link set "rk${j}" up
    ip -n "$(switch_ns)" link add "rk${j}-up" mtu "${MTU}" type veth peer name "rk${j}-dn" mtu "${MTU}"
    ip -n "$(switch_ns)" link set "rk${j}-up" master "rk${j}" up
    ip -n "$(switch_ns)" link set "rk${j}-dn" master br0 up
    shape "$(switch_ns)" "rk${j}-up" "${UPLINK}"
    shape "$(switch_ns)" "rk${j}-dn" "${UPLINK}"
  done
}

# The bridge host I is on: its rack's, or the spine where there are no racks.
host_bridge() {
  if ((HOSTS_PER_RACK > 0)); then echo "rk$((($1 - 1) / HOSTS_PER_RACK + 1))"; else echo br0; fi
}

cmd_up() {
  local hosts="" subnet="10.99.0.0/24"
  RATE=2gbit
  MTU=1500
  BURST=0
  HOSTS_PER_RACK=0
  UPLINK=none
  while (($#)); do
    case "$1" in
      --hosts) hosts="${2:-}"; shift 2 ;;
      --hosts-per-rack) HOSTS_PER_RACK="${2:-}"; shift 2 ;;
      --uplink) UPLINK="${2:-}"; shift 2 ;;
      --rate) RATE="${2:-}"; shift 2 ;;
      --mtu) MTU="${2:-}"; shift 2 ;;
      --burst) BURST="${2:-}"; shift 2 ;;
      --name) NAME="${2:-}"; shift 2 ;;
      --subnet) subnet="${2:-}"; shift 2 ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  check_name
  check_count --hosts "${hosts}" "${MAX_HOSTS}"
  [[ "${RATE}" == none ]] || rate_bytes_per_second "${RATE}" >/dev/null
  if ! [[ "${MTU}" =~ ^[0-9]+$ ]] || ((MTU < 576 || MTU > 65535)); then
    die "--mtu '${MTU}': expected 576..65535"
  fi
  if ! [[ "${BURST}" =~ ^[0-9]+$ ]] || ((BURST != 0 && (BURST < 16384 || BURST > 67108864))); then
    die "--burst '${BURST}': expected 16384..67108864 bytes"
  fi
  [[ "${BURST}" == 0 || "${RATE}" != none ]] || die "--burst needs a --rate"
  if ! [[ "${HOSTS_PER_RACK}" =~ ^[0-9]+$ ]] || ((HOSTS_PER_RACK > MAX_HOSTS)); then
    die "--hosts-per-rack '${HOSTS_PER_RACK}': expected 1..${MAX_HOSTS}"
  fi
  if ((HOSTS_PER_RACK > 0)); then
    [[ "${UPLINK}" != none ]] || die "--hosts-per-rack needs an --uplink rate (e.g. 2gbit)"
    rate_bytes_per_second "${UPLINK}" >/dev/null
  elif [[ "${UPLINK}" != none ]]; then
    die "--uplink needs --hosts-per-rack"
  fi
  parse_subnet "${subnet}"
  check_root

  if [[ -n "$(existing_namespaces)" || -d "$(state_dir)" ]]; then
    echo "cluster.sh: cluster '${NAME}' exists; taking it down first"
    cmd_down --name "${NAME}"
  fi
  # A failure half-way leaves nothing behind.
  trap 'echo "cluster.sh: up failed; cleaning up" >&2; cmd_down --name "${NAME}" >/dev/null 2>&1 || true' EXIT

  local dir i ns
  dir="$(state_dir)"
  mkdir -p "${dir}/launcher/tmp"

  new_namespace "$(switch_ns)"
  ip -n "$(switch_ns)" link add br0 mtu "${MTU}" type bridge
  ip -n "$(switch_ns)" link set br0 up

  ((HOSTS_PER_RACK == 0)) || add_racks "${hosts}"
  : >"${dir}/hosts"
  for ((i = 1; i <= hosts; i++)); do
    ns="$(host_ns "${i}")"
    new_namespace "${ns}"
    add_port "h${i}" "${ns}" "${PREFIX_BASE}.${i}" "$(host_bridge "${i}")"
    if [[ "${RATE}" != none ]]; then
      shape "${ns}" "${HOST_IFNAME}"   # what the host sends
      shape "$(switch_ns)" "h${i}"     # what the host receives
    fi
    mkdir -p "${dir}/h${i}/tmp"
    # address namespace hostname temp-dir: read by rsh_agent.sh and `exec`.
    echo "${PREFIX_BASE}.${i} ${ns} ${ns} ${dir}/h${i}/tmp" >>"${dir}/hosts"
  done

  # The launcher: mpirun's namespace, on the bridge, unshaped (it carries control only).
  new_namespace "$(launcher_ns)"
  add_port launcher "$(launcher_ns)" "${PREFIX_BASE}.${LAUNCHER_OCTET}"
  write_hosts_files "${hosts}"

  cat >"${dir}/cluster.conf" <<EOF
HOSTS=${hosts}
SUBNET=${subnet}
PREFIX_BASE=${PREFIX_BASE}
RATE=${RATE}
MTU=${MTU}
BURST=${BURST}
HOSTS_PER_RACK=${HOSTS_PER_RACK}
UPLINK=${UPLINK}
EOF
  trap - EXIT
  local bucket=""
  [[ "${RATE}" == none ]] || bucket=", bucket $(bucket_bytes) B"
  local racks=""
  ((HOSTS_PER_RACK == 0)) || racks=", racks of ${HOSTS_PER_RACK} host(s) with uplinks of ${UPLINK} each way"
  echo "cluster '${NAME}' up: ${hosts} host(s) ${PREFIX_BASE}.1-${hosts} (namespaces $(host_ns 1)..$(host_ns "${hosts}")), rate ${RATE} each way${bucket}, mtu ${MTU}${racks}"
}

# --- down ---------------------------------------------------------------------------

# Ends the processes still inside NS (ranks or daemons of an interrupted run), so that
# deleting it really frees the namespace and its interfaces.
stop_processes_in() {
  local -a pids
  local attempt
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    mapfile -t pids < <(ip netns pids "$1" 2>/dev/null || true)
    ((${#pids[@]})) || return 0
    if ((attempt < 6)); then
      kill -TERM "${pids[@]}" 2>/dev/null || true
    else
      kill -KILL "${pids[@]}" 2>/dev/null || true
    fi
    sleep 0.2
  done
  echo "cluster.sh: processes still in $1: $(ip netns pids "$1" 2>/dev/null | tr '\n' ' ')" >&2
}

cmd_down() {
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; shift 2 ;;
      *) die "down: unknown argument '$1'" ;;
    esac
  done
  check_name
  check_root
  local ns left
  for ns in $(existing_namespaces); do
    stop_processes_in "${ns}"
    ip netns del "${ns}"
  done
  rm -rf /etc/netns/"${NAME}"-{switch,launcher} /etc/netns/"${NAME}"-h[0-9]*
  rmdir /etc/netns 2>/dev/null || true
  rm -rf "$(state_dir)"
  rmdir "${STATE_ROOT}" 2>/dev/null || true
  left="$(existing_namespaces)"
  [[ -z "${left}" ]] || die "down: namespaces left: ${left//$'\n'/ }"
  echo "cluster '${NAME}' down"
}

# --- status -------------------------------------------------------------------------

# The first IPv4 address of eth0 in NS and the tbf of DEV in NS2 ("-" when none).
address_of() { ip -n "$1" -4 -br addr show dev "${HOST_IFNAME}" 2>/dev/null | awk '{print $3}' || true; }
tbf_of() { tc -n "$1" qdisc show dev "$2" 2>/dev/null | grep -o 'rate [^ ]* burst [^ ]*' || true; }

show_cluster() {
  local namespaces ns index
  namespaces="$(existing_namespaces)"
  if [[ -z "${namespaces}" && ! -d "$(state_dir)" ]]; then
    echo "cluster '${NAME}': not up"
    return 0
  fi
  echo "cluster '${NAME}': state $(state_dir)"
  if [[ -f "$(state_dir)/cluster.conf" ]]; then
    echo "  $(tr '\n' ' ' <"$(state_dir)/cluster.conf")"
  fi
  printf '  %-28s %-16s %-30s %s\n' namespace address "sends (tbf)" "receives (tbf)"
  for ns in ${namespaces}; do
    case "${ns}" in
      *-switch)
        printf '  %-28s %s\n' "${ns}" "bridge br0$(ip -n "${ns}" -br link show type bridge | awk '$1 != "br0" {printf ", %s", $1}')"
        local up
        for up in $(ip -n "${ns}" -br link show type veth | awk '{print $1}' | grep -E '^rk[0-9]+-(up|dn)' | sed 's/@.*//'); do
          printf '  %-28s %-16s %s\n' "  ${up}" "uplink" "$(tbf_of "${ns}" "${up}")"
        done
        ;;
      *-launcher) printf '  %-28s %-16s %s\n' "${ns}" "$(address_of "${ns}")" "unshaped" ;;
      *)
        index="${ns##*-h}"
        printf '  %-28s %-16s %-30s %s\n' "${ns}" "$(address_of "${ns}")" \
          "$(tbf_of "${ns}" "${HOST_IFNAME}")" "$(tbf_of "$(switch_ns)" "h${index}")"
        ;;
    esac
  done
}

cmd_status() {
  local given=""
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; given=1; shift 2 ;;
      *) die "status: unknown argument '$1'" ;;
    esac
  done
  check_root
  if [[ -n "${given}" ]]; then
    check_name
    show_cluster
    return 0
  fi
  # Every cluster that has a switch namespace or a state directory.
  local names
  names="$( (ip netns list | awk '{print $1}' | sed -n 's/-switch$//p'
    ls "${STATE_ROOT}" 2>/dev/null || true) | sort -u)"
  [[ -n "${names}" ]] || { echo "no cluster is up"; return 0; }
  for NAME in ${names}; do show_cluster; done
}

# --- run ----------------------------------------------------------------------------

# "ADDRESS=CPUS ..." for --pin-hosts: this machine's CPUs split among the first N hosts
# in order, each host its own share (a real host's ranks never share a core with
# another host's), or, with more hosts than CPUs, host i on CPU i mod the count.
host_cpus() {
  local hosts="$1" i k
  local -a cpus
  read -ra cpus <<<"$("${PYTHON}" -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
  local n=${#cpus[@]} list
  for ((i = 0; i < hosts; i++)); do
    if ((hosts <= n)); then
      list=""
      for ((k = i * n / hosts; k < (i + 1) * n / hosts; k++)); do list+="${list:+,}${cpus[k]}"; done
    else
      list="${cpus[i % n]}"
    fi
    printf '%s=%s ' "${PREFIX_BASE}.$((i + 1))" "${list}"
  done
}

cmd_run() {
  local hosts="" per_host="" limit=0 pin=0 i variable
  local -a mca=() exports=()
  while (($#)); do
    case "$1" in
      --hosts) hosts="${2:-}"; shift 2 ;;
      --ranks-per-host) per_host="${2:-}"; shift 2 ;;
      --name) NAME="${2:-}"; shift 2 ;;
      --timeout) limit="${2:-}"; shift 2 ;;
      --pin-hosts) pin=1; shift ;;
      --mca) (($# >= 3)) || die "run: --mca needs KEY VALUE"; mca+=(--mca "$2" "$3"); shift 3 ;;
      -x) (($# >= 2)) || die "run: -x needs VAR[=VALUE]"; exports+=(-x "$2"); shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown argument '$1' (the program follows --)" ;;
    esac
  done
  (($#)) || die "run: no program (cluster.sh run ... -- PROGRAM ARGS...)"
  check_name
  check_count --hosts "${hosts}" "${MAX_HOSTS}"
  check_count --ranks-per-host "${per_host}" 64
  [[ "${limit}" =~ ^[0-9]+$ ]] || die "--timeout '${limit}': expected whole seconds (0: none)"
  check_root
  load_cluster
  # shellcheck disable=SC2153  # HOSTS comes from cluster.conf
  ((hosts <= HOSTS)) || die "run: --hosts ${hosts} but cluster '${NAME}' has ${HOSTS} host(s)"
  for ((i = 1; i <= hosts; i++)); do
    ip netns list | awk '{print $1}' | grep -qxF "$(host_ns "${i}")" ||
      die "cluster '${NAME}' is broken: namespace $(host_ns "${i}") is missing"
  done

  # A directory of this run, shared by its ranks through the filesystem (e.g. a file
  # store), removed afterwards.
  local dir run_dir program
  dir="$(state_dir)"
  # mpirun splits the agent's command line at spaces.
  [[ "${SCRIPT_DIR}${dir}" != *[[:space:]\'\"]* ]] ||
    die "run: '${SCRIPT_DIR}' and '${dir}' must not contain spaces or quotes"
  mkdir -p "${dir}/runs"
  run_dir="$(mktemp -d "${dir}/runs/run.XXXXXX")"
  for ((i = 1; i <= hosts; i++)); do
    echo "${PREFIX_BASE}.${i} slots=${per_host}"
  done >"${run_dir}/hostfile"

  # The program as an absolute path (ranks start in this directory, but be explicit).
  program="$1"
  shift
  if [[ "${program}" == */* && "${program}" != /* ]]; then
    program="$(cd "$(dirname "${program}")" && pwd)/$(basename "${program}")"
  fi

  # tessera must listen on the cluster's interface; pass every TESSERA_* variable on.
  export TESSERA_SOCKET_IFNAME="${TESSERA_SOCKET_IFNAME:-${HOST_IFNAME}}"
  export CLUSTER_RUN_DIR="${run_dir}"
  # Read by rsh_agent.sh, which starts each host's daemon (and so its ranks) on them.
  CLUSTER_HOST_CPUS=""
  ((pin == 0)) || CLUSTER_HOST_CPUS="$(host_cpus "${hosts}")"
  export CLUSTER_HOST_CPUS
  for variable in $(compgen -e | grep -E '^TESSERA_' || true); do
    exports+=(-x "${variable}")
  done
  exports+=(-x CLUSTER_RUN_DIR)

  local -a command=(
    ip netns exec "$(launcher_ns)"
    env TMPDIR="${dir}/launcher/tmp" SHELL=/bin/sh
    mpirun --allow-run-as-root --oversubscribe --bind-to none
    -np $((hosts * per_host)) --hostfile "${run_dir}/hostfile"
    --mca plm_rsh_agent "${SCRIPT_DIR}/rsh_agent.sh ${dir}/hosts"
    --mca plm_rsh_no_tree_spawn 1
    --mca oob_tcp_if_include "${SUBNET}"
    --mca btl_tcp_if_include "${SUBNET}"
    "${mca[@]}" "${exports[@]}"
    "${program}" "$@"
  )
  if ((limit > 0)); then
    command=(timeout -k 10 "${limit}" "${command[@]}")
  fi
  local rc=0
  "${command[@]}" || rc=$?
  rm -rf "${run_dir}"
  if ((rc == 124 && limit > 0)); then
    echo "cluster.sh: run: mpirun did not finish within ${limit} s" >&2
  fi
  return "${rc}"
}

# --- exec ---------------------------------------------------------------------------

# Runs a command inside one host, as rsh_agent.sh runs mpirun's daemon there: the host's
# namespace, hostname and temp directory.
cmd_exec() {
  local host=""
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; shift 2 ;;
      --host) host="${2:-}"; shift 2 ;;
      --) shift; break ;;
      *) die "exec: unknown argument '$1' (the command follows --)" ;;
    esac
  done
  (($#)) || die "exec: no command (cluster.sh exec --host I -- COMMAND ARGS...)"
  check_name
  check_root
  load_cluster
  check_count --host "${host}" "${HOSTS}"
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner shell
  exec ip netns exec "$(host_ns "${host}")" unshare --uts \
    env TMPDIR="$(state_dir)/h${host}/tmp" \
    /bin/sh -c 'hostname "$0" && exec "$@"' "$(host_ns "${host}")" "$@"
}

# --- measure ------------------------------------------------------------------------

# One TCP stream from host I to host J for S seconds, and the idle round trip.
cmd_measure() {
  local from=1 to=2 seconds=2
  while (($#)); do
    case "$1" in
      --name) NAME="${2:-}"; shift 2 ;;
      --from) from="${2:-}"; shift 2 ;;
      --to) to="${2:-}"; shift 2 ;;
      --seconds) seconds="${2:-}"; shift 2 ;;
      *) die "measure: unknown argument '$1'" ;;
    esac
  done
  check_name
  check_root
  load_cluster
  check_count --from "${from}" "${HOSTS}"
  check_count --to "${to}" "${HOSTS}"
  [[ "${from}" != "${to}" ]] || die "measure: --from and --to must differ"
  if ! [[ "${seconds}" =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 60)); then
    die "--seconds '${seconds}': expected 1..60"
  fi

  local work port_file receiver rc=0 attempt
  work="$(mktemp -d "$(state_dir)/measure.XXXXXX")"
  port_file="${work}/port"
  timeout -k 5 $((seconds + 30)) ip netns exec "$(host_ns "${to}")" "${PYTHON}" \
    "${SCRIPT_DIR}/link_rate.py" receive --bind "${PREFIX_BASE}.${to}" --port-file "${port_file}" \
    --timeout 20 >"${work}/receiver" &
  receiver=$!
  for attempt in $(seq 100); do
    [[ -f "${port_file}" ]] && break
    sleep 0.1
  done
  [[ -f "${port_file}" ]] || { kill "${receiver}" 2>/dev/null; rm -rf "${work}"; die "measure: receiver did not start"; }
  echo "host ${from} -> host ${to} (${PREFIX_BASE}.${from} -> ${PREFIX_BASE}.${to}), rate ${RATE}, mtu ${MTU}:"
  timeout -k 5 $((seconds + 30)) ip netns exec "$(host_ns "${from}")" "${PYTHON}" \
    "${SCRIPT_DIR}/link_rate.py" send --to "${PREFIX_BASE}.${to}" --port "$(cat "${port_file}")" \
    --seconds "${seconds}" --timeout 20 || rc=$?
  wait "${receiver}" || rc=$?
  rm -rf "${work}"
  return "${rc}"
}

# --- main ---------------------------------------------------------------------------

NAME=tessera
(($#)) || usage
subcommand="$1"
shift
case "${subcommand}" in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  run) cmd_run "$@" ;;
  exec) cmd_exec "$@" ;;
  measure) cmd_measure "$@" ;;
  -h | --help | help) usage ;;
  *) die "unknown command '${subcommand}' (up, run, measure, exec, status, down)" ;;
esac
