#!/usr/bin/env bash
# End-to-end test of a real Slurm over the emulated cluster (slurm.sh), for real:
# munged, slurmctld and a slurmd per emulated host, and srun launching tessera.
#   - up: 4 hosts in racks of 2 (uplinks of 2 Gbit/s); sinfo shows the 4 nodes idle;
#   - srun -N 4 -n 4 all_reduce_perf: exit 0, no wrong element, one rank on each host,
#     and every rank read the racks from Slurm's topology.conf (TESSERA_DEBUG=INFO: "racks
#     of 2 hosts"), which it does not with TESSERA_TOPOLOGY_CONF=none;
#   - a task that fails makes srun fail;
#   - down leaves no namespace, daemon or state directory behind.
# Needs root, Debian's slurm-wlm and munge, and no sandbox (tags no-sandbox, exclusive).
# Every step has a time limit and everything is taken down on any exit.
# Usage: slurm_test.sh SLURM_SH ALL_REDUCE_PERF
set -u

SLURM="${1:?usage: slurm_test.sh SLURM_SH ALL_REDUCE_PERF}"
PERF="${2:?}"
export PATH="/usr/sbin:/sbin:${PATH}"

NAME="sl$$"
STEP_LIMIT_S=120
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/slurm_test.XXXXXX")"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

cleanup() {
  timeout -k 5 60 bash "${SLURM}" down --name "${NAME}" >/dev/null 2>&1
}
trap cleanup EXIT

step() {
  timeout -k 5 "${STEP_LIMIT_S}" "$@"
}

if ! step bash "${SLURM}" up --hosts 4 --hosts-per-rack 2 --rate 2gbit --uplink 2gbit --name "${NAME}" >"${OUT}/up.log" 2>&1; then
  cat "${OUT}/up.log"
  echo "FAIL: slurm.sh up"
  exit 1
fi
cat "${OUT}/up.log"

idle="$(step bash "${SLURM}" exec --name "${NAME}" -- sinfo -h -N -t idle -o '%N' | sort -u | tr '\n' ' ')"
[[ "${idle}" == "${NAME}-h1 ${NAME}-h2 ${NAME}-h3 ${NAME}-h4 " ]] || fail "idle nodes: '${idle}'"

run_perf() {  # run_perf LOG [srun options...]
  local log="$1"
  shift
  step bash "${SLURM}" srun --name "${NAME}" -- -N 4 -n 4 "$@" "${PERF}" -b 8 -e 1M -f 32 >"${log}" 2>&1
}

if ! run_perf "${OUT}/perf.log" --export=ALL,TESSERA_DEBUG=INFO; then
  cat "${OUT}/perf.log"
  fail "srun all_reduce_perf failed"
fi
grep -q "Out of bounds values : 0 OK" "${OUT}/perf.log" || fail "all_reduce_perf found wrong elements"
for h in 1 2 3 4; do
  grep -qE "^#  Rank +[0-9]+ Pid +[0-9]+ on +${NAME}-h${h}\$" "${OUT}/perf.log" || fail "no rank on ${NAME}-h${h}"
done
racks="$(grep -c "racks of 2 hosts" "${OUT}/perf.log")"
[[ "${racks}" == 4 ]] || fail "${racks} of 4 ranks read racks of 2 hosts from topology.conf"

if ! run_perf "${OUT}/none.log" --export=ALL,TESSERA_DEBUG=INFO,TESSERA_TOPOLOGY_CONF=none; then
  cat "${OUT}/none.log"
  fail "srun all_reduce_perf with TESSERA_TOPOLOGY_CONF=none failed"
fi
racks="$(grep -c "no racks" "${OUT}/none.log")"
[[ "${racks}" == 4 ]] || fail "${racks} of 4 ranks knew of no racks with TESSERA_TOPOLOGY_CONF=none"

if step bash "${SLURM}" srun --name "${NAME}" -- -N 2 -n 2 /bin/false >/dev/null 2>&1; then
  fail "srun of a failing task returned 0"
fi

state="${CLUSTER_STATE_ROOT:-/tmp/tessera-cluster}/${NAME}"
step bash "${SLURM}" down --name "${NAME}" >/dev/null 2>&1 || fail "slurm.sh down"
sleep 1
ip netns list | grep -q "^${NAME}-" && fail "namespaces left: $(ip netns list | grep "^${NAME}-" | tr '\n' ' ')"
pgrep -f "${state}/slurm" >/dev/null && fail "daemons left: $(pgrep -af "${state}/slurm")"
[[ -e "${state}" ]] && fail "state directory left: ${state}"

if ((failures > 0)); then
  echo "${failures} failure(s); logs in ${OUT}"
  exit 1
fi
echo "PASS"
