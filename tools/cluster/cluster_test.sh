#!/usr/bin/env bash
# End-to-end test of the emulated cluster (cluster.sh), for real: namespaces, shaped
# veths, and mpirun launching tessera's and Open MPI's benchmarks across the hosts.
#   - up (twice: the second replaces the first), status, a second cluster beside it
#     (with a smaller bucket: --burst; in racks whose uplinks carry half a host's rate,
#     measured across them), a --burst out of range and an --uplink without racks refused;
#   - the shaped link carries about its rate and no more (one TCP stream);
#   - all_reduce_perf on 2 hosts x 2 ranks and 3 hosts x 1 rank: exit 0, no wrong
#     element, ranks grouped by host as placed (TESSERA_DEBUG=INFO), listening on the
#     cluster's addresses, and bytes through the hosts' tbf queues;
#   - mpi_all_reduce_perf on 2 hosts x 2 ranks over btl tcp + vader;
#   - ranks are not bound to cores (the hosts share this machine's cores), unless
#     --pin-hosts gives each host its share of them;
#   - run returns the program's failure, refuses more hosts than the cluster has;
#   - down ends processes left inside the hosts and leaves no namespace, interface or
#     state directory behind.
# Needs root and no sandbox (tags no-sandbox, exclusive). Every step has a time limit
# and the cluster is taken down on any exit.
# Usage: cluster_test.sh CLUSTER_SH ALL_REDUCE_PERF MPI_ALL_REDUCE_PERF
set -u

CLUSTER="${1:?usage: cluster_test.sh CLUSTER_SH ALL_REDUCE_PERF MPI_ALL_REDUCE_PERF}"
TESSERA_PERF="${2:?}"
MPI_PERF="${3:?}"
export PATH="/usr/sbin:/sbin:${PATH}"

# Unique per run: parallel runs (other checkouts, CI) never share names.
NAME="ct$$"
OTHER="${NAME}b"
RATE_MB=250               # --rate 2gbit, in MB/s
STEP_LIMIT_S=90           # any one step; a normal one takes a few seconds
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cluster_test.XXXXXX")"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

cleanup() {
  timeout -k 5 60 bash "${CLUSTER}" down --name "${NAME}" >/dev/null 2>&1
  timeout -k 5 60 bash "${CLUSTER}" down --name "${OTHER}" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted"; exit 1' TERM INT HUP

# step NAME COMMAND...: runs COMMAND bounded by STEP_LIMIT_S; its stdout, then its
# stderr, in $OUT/NAME, shown in the log; exit code in $rc. The two are written apart
# and joined after: with TESSERA_DEBUG=INFO the ranks' log lines (stderr) once landed
# inside a line of the benchmark's table (stdout), and the table lost a row.
step() {
  local name="$1"
  shift
  timeout -k 10 "${STEP_LIMIT_S}" "$@" >"${OUT}/${name}.stdout" 2>"${OUT}/${name}.stderr"
  rc=$?
  cat "${OUT}/${name}.stdout" "${OUT}/${name}.stderr" >"${OUT}/${name}"
  echo "--- ${name} (exit ${rc})"
  head -c 20000 "${OUT}/${name}"
  if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then
    fail "${name}: did not finish within ${STEP_LIMIT_S} s"
  fi
}

expect_exit() {  # expect_exit NAME CODE
  [ "${rc}" -eq "$2" ] || fail "$1: exit code ${rc}, expected $2"
}

# Bytes sent so far by the tbf on DEV in namespace NS.
tbf_sent_bytes() {
  tc -n "$1" -s qdisc show dev "$2" | awk '/Sent/ { print $2; exit }'
}

# check_table NAME NRANKS: a benchmark table with NRANKS ranks and no wrong element.
check_table() {
  local name="$1" nranks="$2"
  expect_exit "${name}" 0
  grep -q "^# nRanks ${nranks} " "${OUT}/${name}" || fail "${name}: no '# nRanks ${nranks}' header"
  grep -q '^# Out of bounds values : 0 OK$' "${OUT}/${name}" || fail "${name}: no '0 OK' footer"
  local rows
  rows=$(grep -c '^ *[0-9]' "${OUT}/${name}")
  [ "${rows}" -ge 7 ] || fail "${name}: ${rows} table rows, expected 7 (8 B .. 2 MiB)"
}

# check_placement NAME HOSTS PER_HOST: the "#  Rank r Pid p on HOST" lines put
# PER_HOST ranks on each of the hosts NAME-h1..NAME-hHOSTS.
check_placement() {
  local name="$1" hosts="$2" per_host="$3" i got
  for ((i = 1; i <= hosts; i++)); do
    got=$(grep -cE "^#  Rank +[0-9]+ Pid +[0-9]+ on +${NAME}-h${i}$" "${OUT}/${name}")
    [ "${got}" -eq "${per_host}" ] || fail "${name}: ${got} rank(s) on ${NAME}-h${i}, expected ${per_host}"
  done
}

# check_tessera_hosts NAME HOSTS PER_HOST: tessera's INFO lines show every rank seeing
# PER_HOST rank(s) on its host, HOSTS distinct host identities (hostname + network
# namespace), and every rank listening on a cluster address.
check_tessera_hosts() {
  local name="$1" hosts="$2" per_host="$3" nranks=$(($2 * $3)) ready got
  ready="$(grep -E "INFO rank [0-9]+ of ${nranks} ready: " "${OUT}/${name}")"
  got=$(grep -c . <<<"${ready}")
  [ "${got}" -eq "${nranks}" ] || fail "${name}: ${got} 'ready' lines, expected ${nranks}"
  got=$(grep -c ", ${per_host} rank(s) on this host, " <<<"${ready}")
  [ "${got}" -eq "${nranks}" ] ||
    fail "${name}: ${got} rank(s) saw ${per_host} rank(s) on their host, expected ${nranks}"
  got=$(sed -n 's/.* ready: host \([^,]*\),.*/\1/p' <<<"${ready}" | sort -u | grep -c "^${NAME}-h[0-9]*/net:")
  [ "${got}" -eq "${hosts}" ] || fail "${name}: ${got} distinct cluster host identities, expected ${hosts}"
  got=$(grep -c "listening on 10\.99\.0\.[0-9]*:" <<<"${ready}")
  [ "${got}" -eq "${nranks}" ] || fail "${name}: ${got} rank(s) listening on the cluster subnet, expected ${nranks}"
}

if [ "${EUID}" -ne 0 ]; then
  echo "FAIL: needs root (network namespaces); CI runs as root"
  exit 1
fi
# Clusters left by earlier runs of this test that were killed before their clean-up
# (named ct<pid> after a process that no longer exists) are taken down first.
for stale in $(ip netns list | sed -n 's/^\(ct[0-9]*\)b\{0,1\}-switch.*/\1/p' | sort -u); do
  if ! kill -0 "${stale#ct}" 2>/dev/null; then
    echo "taking down ${stale}, left by an earlier run"
    timeout -k 5 60 bash "${CLUSTER}" down --name "${stale}" >/dev/null 2>&1
    timeout -k 5 60 bash "${CLUSTER}" down --name "${stale}b" >/dev/null 2>&1
  fi
done
links_before="$(ip -o link show | awk -F': ' '{print $2}' | sort)"

# --- Bring-up ---------------------------------------------------------------------
step up_first bash "${CLUSTER}" up --hosts 2 --rate 2gbit --name "${NAME}"
expect_exit up_first 0
step up_again bash "${CLUSTER}" up --hosts 3 --rate 2gbit --name "${NAME}" --subnet 10.99.0.0/24
expect_exit up_again 0
grep -q "exists; taking it down first" "${OUT}/up_again" || fail "up_again: did not replace the cluster"
step status bash "${CLUSTER}" status --name "${NAME}"
expect_exit status 0
got=$(grep -cE "^  ${NAME}-h[0-9]+ +10\.99\.0\.[0-9]+/24 +rate 2Gbit .* rate 2Gbit " "${OUT}/status")
[ "${got}" -eq 3 ] || fail "status: ${got} shaped hosts listed, expected 3"
[ "$(ip -o link show | awk -F': ' '{print $2}' | sort)" = "${links_before}" ] ||
  fail "up changed the root namespace's interfaces"

# A second cluster with another prefix and the same subnet coexists with the first. Its
# links have a smaller bucket (--burst), and with it segments of a quarter of it; its 3
# hosts are in racks of 2 whose uplinks run at half a host's rate.
step other_up bash "${CLUSTER}" up --hosts 3 --rate 1gbit --burst 65536 --name "${OTHER}" \
  --hosts-per-rack 2 --uplink 500mbit
expect_exit other_up 0
for end in "${OTHER}-h1 eth0" "${OTHER}-switch h2"; do
  read -r ns dev <<<"${end}"
  tc -n "${ns}" qdisc show dev "${dev}" | grep -q "rate 1Gbit burst 6[45][0-9.]*[Kb]" ||
    fail "other_up: ${dev} in ${ns}: $(tc -n "${ns}" qdisc show dev "${dev}"), expected a 64 KiB bucket"
  ip -n "${ns}" -d link show dev "${dev}" | grep -q "gso_max_size 16384 " ||
    fail "other_up: ${dev} in ${ns} takes segments other than 16 KiB"
done
step burst_refused bash "${CLUSTER}" up --hosts 2 --burst 100 --name "${OTHER}x"
expect_exit burst_refused 2
ip netns list | grep -q "^${OTHER}x-" && fail "burst_refused: left namespaces behind"
step other_measure bash "${CLUSTER}" measure --name "${OTHER}" --seconds 1
expect_exit other_measure 0
for up in rk1-up rk1-dn rk2-up rk2-dn; do
  tc -n "${OTHER}-switch" qdisc show dev "${up}" | grep -q "rate 500Mbit" ||
    fail "other_up: uplink ${up}: $(tc -n "${OTHER}-switch" qdisc show dev "${up}"), expected 500 Mbit/s"
done
# Host 1 to host 3 crosses both racks' uplinks: about 62 MB/s, not the hosts' 125.
step other_measure_racks bash "${CLUSTER}" measure --name "${OTHER}" --from 1 --to 3 --seconds 1
expect_exit other_measure_racks 0
mb=$(sed -n 's/^received .*: \([0-9]*\)\.[0-9] MB\/s$/\1/p' "${OUT}/other_measure_racks")
if [ -z "${mb}" ] || [ "${mb}" -gt 66 ] || [ "${mb}" -lt 25 ]; then
  fail "other_measure_racks: '${mb}' MB/s across 62.5 MB/s uplinks (expected 40%..105%)"
fi
step uplink_refused bash "${CLUSTER}" up --hosts 2 --uplink 1gbit --name "${OTHER}x"
expect_exit uplink_refused 2
step other_down bash "${CLUSTER}" down --name "${OTHER}"
expect_exit other_down 0

# --- The link rate ------------------------------------------------------------------
step measure bash "${CLUSTER}" measure --name "${NAME}" --from 1 --to 2 --seconds 2
expect_exit measure 0
mb=$(sed -n 's/^received .*: \([0-9]*\)\.[0-9] MB\/s$/\1/p' "${OUT}/measure")
if [ -z "${mb}" ]; then
  fail "measure: no rate reported"
elif [ "${mb}" -gt $((RATE_MB * 105 / 100)) ] || [ "${mb}" -lt $((RATE_MB * 40 / 100)) ]; then
  fail "measure: ${mb} MB/s through a ${RATE_MB} MB/s link (expected 40%..105%)"
fi

# --- tessera ------------------------------------------------------------------------
FLAGS=(-b 8 -e 8M -f 8 -c 1 -n 2 -w 1)
sent_before=$(tbf_sent_bytes "${NAME}-h1" eth0)
step tessera_2x2 env TESSERA_DEBUG=INFO bash "${CLUSTER}" run --name "${NAME}" --hosts 2 \
  --ranks-per-host 2 --timeout 80 -- "${TESSERA_PERF}" "${FLAGS[@]}"
check_table tessera_2x2 4
check_placement tessera_2x2 2 2
check_tessera_hosts tessera_2x2 2 2
sent=$(($(tbf_sent_bytes "${NAME}-h1" eth0) - sent_before))
[ "${sent}" -ge 1000000 ] || fail "tessera_2x2: only ${sent} bytes left host 1 through its shaped link"

step tessera_3x1 env TESSERA_DEBUG=INFO bash "${CLUSTER}" run --name "${NAME}" --hosts 3 \
  --ranks-per-host 1 --timeout 80 -- "${TESSERA_PERF}" "${FLAGS[@]}"
check_table tessera_3x1 3
check_placement tessera_3x1 3 1
check_tessera_hosts tessera_3x1 3 1

# --- Open MPI (ob1: tcp between hosts, vader within one) ----------------------------
step mpi_2x2 bash "${CLUSTER}" run --name "${NAME}" --hosts 2 --ranks-per-host 2 --timeout 80 \
  --mca pml ob1 --mca btl tcp,vader,self -- "${MPI_PERF}" "${FLAGS[@]}"
check_table mpi_2x2 4
check_placement mpi_2x2 2 2

# --- No binding: every emulated host's daemon would pin its first rank to core 0 -----
step binding bash "${CLUSTER}" run --name "${NAME}" --hosts 2 --ranks-per-host 1 --timeout 60 \
  -- /bin/sh -c 'grep "^Cpus_allowed_list:" /proc/self/status'
expect_exit binding 0
mine="$(grep '^Cpus_allowed_list:' /proc/self/status)"
got=$(grep -cxF "${mine}" "${OUT}/binding")
[ "${got}" -eq 2 ] || fail "binding: ${got} of 2 ranks may run on every CPU (${mine}), expected 2"

# --pin-hosts: each host's ranks on that host's share of the CPUs (3 hosts: with fewer
# CPUs than hosts, host i on CPU i mod the count), both ranks of a host on the same.
step pinned bash "${CLUSTER}" run --name "${NAME}" --hosts 3 --ranks-per-host 2 --timeout 60 --pin-hosts \
  -- /bin/sh -c 'echo "$(hostname) $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
expect_exit pinned 0
pin_check="$(python3 - "${OUT}/pinned" "${NAME}" <<'PY'
import os, sys
def cpus_of(text):  # "0-2,5" -> {0, 1, 2, 5}
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
mine = sorted(os.sched_getaffinity(0))
n, hosts = len(mine), 3
for i in range(hosts):
    want = set(mine[i * n // hosts:(i + 1) * n // hosts]) if hosts <= n else {mine[i % n]}
    got = [cpus_of(line.split()[1]) for line in open(sys.argv[1]) if line.startswith("%s-h%d " % (sys.argv[2], i + 1))]
    if got != [want, want]:
        print("host %d's ranks on %s, expected both on %s" % (i + 1, got, sorted(want)))
PY
)"
[ -z "${pin_check}" ] || fail "pinned: ${pin_check}"

# --- run's errors -------------------------------------------------------------------
step run_fails bash "${CLUSTER}" run --name "${NAME}" --hosts 2 --ranks-per-host 1 --timeout 60 -- /bin/false
[ "${rc}" -ne 0 ] || fail "run_fails: exit code 0 for a failing program"
step run_too_many bash "${CLUSTER}" run --name "${NAME}" --hosts 4 --ranks-per-host 1 -- /bin/true
[ "${rc}" -ne 0 ] || fail "run_too_many: exit code 0 for 4 hosts on a 3-host cluster"
grep -q "has 3 host(s)" "${OUT}/run_too_many" || fail "run_too_many: the error does not say why"

# --- Tear-down ----------------------------------------------------------------------
# A process still running inside a host (an interrupted rank) must not keep it alive.
timeout -k 5 120 bash "${CLUSTER}" exec --name "${NAME}" --host 1 -- sleep 100 &
straggler=$!
sleep 1
step down bash "${CLUSTER}" down --name "${NAME}"
expect_exit down 0
sleep 0.5
if kill -0 "${straggler}" 2>/dev/null; then
  fail "down: a process running inside host 1 survived"
  kill "${straggler}" 2>/dev/null
fi
left="$(ip netns list | grep -E "^(${NAME}|${OTHER})-" || true)"
[ -z "${left}" ] || fail "down: namespaces left: ${left}"
[ "$(ip -o link show | awk -F': ' '{print $2}' | sort)" = "${links_before}" ] ||
  fail "down: the root namespace's interfaces differ from before up"
state="${CLUSTER_STATE_ROOT:-/tmp/tessera-cluster}/${NAME}"
[ ! -e "${state}" ] || fail "down: ${state} is left"
step status_after bash "${CLUSTER}" status --name "${NAME}"
grep -q "not up" "${OUT}/status_after" || fail "status_after: cluster still listed"

if [ "${failures}" -ne 0 ]; then
  echo "${failures} check(s) failed"
  exit 1
fi
echo "PASS"
