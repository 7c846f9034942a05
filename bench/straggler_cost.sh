#!/bin/bash
# What straggler detection costs a call (docs/diagnosis.md#stragglers): all_reduce_perf
# with the recording on (TESSERA_STRAGGLER_WINDOW=1000, the default) and off (=0), the
# same binary, interleaved in one run. Each round runs every case once each way, the
# order alternating from round to round, so that what the machine does meanwhile falls
# on both alike. Prints each case's median time per call over the rounds, the ratio
# on / off of the medians and of the means, and the spread of the rounds' own ratios. Needs root (the emulated hosts); run it on a quiet machine.
#
#   bazel build //bench:all_reduce_perf
#   bench/straggler_cost.sh [ROUNDS]   (default 8; CASES="8B_1x2 ..." picks cases)
#
# Cases: 8 B and 64 MiB, on 1 host x 2 ranks (mpirun) and on 2 emulated hosts x 2 ranks
# (tools/cluster, links unshaped, each host's ranks on a core of their own).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
perf="$(cd "${here}/.." && pwd)/bazel-bin/bench/all_reduce_perf"
cluster="${here}/../tools/cluster/cluster.sh"
rounds=${1:-8}
[[ -x "${perf}" ]] || { echo "straggler_cost.sh: ${perf} is missing (bazel build //bench:all_reduce_perf)" >&2; exit 1; }

# name|ranks per host|hosts|all_reduce_perf flags
all_cases=(
  "8B_1x2|2|1|-b 8 -e 8 -n 20000 -w 2000 -D 300"
  "64MiB_1x2|2|1|-b 64M -e 64M -n 10 -w 2"
  "8B_2x2|2|2|-b 8 -e 8 -n 5000 -w 500 -D 300"
  "64MiB_2x2|2|2|-b 64M -e 64M -n 5 -w 1"
)
selected=()
for c in "${all_cases[@]}"; do
  if [[ -z "${CASES:-}" || " ${CASES} " == *" ${c%%|*} "* ]]; then selected+=("${c}"); fi
done

name="sc$$"
results="$(mktemp)"
up=0
cleanup() {
  rm -f "${results}"
  ((up == 0)) || bash "${cluster}" down --name "${name}" >/dev/null
}
trap cleanup EXIT
for c in "${selected[@]}"; do
  IFS='|' read -r _ _ hosts _ <<<"${c}"
  if ((hosts > 1 && up == 0)); then
    bash "${cluster}" up --name "${name}" --hosts 2 --rate none --subnet 10.97.0.0/24 >/dev/null
    up=1
  fi
done

# One run of case $1 with TESSERA_STRAGGLER_WINDOW=$2; prints its out-of-place time in us.
run_case() {
  local per_host hosts flags
  IFS='|' read -r _ per_host hosts flags <<<"$1"
  # shellcheck disable=SC2086  # flags are words
  if ((hosts == 1)); then
    TESSERA_STRAGGLER_WINDOW=$2 mpirun --allow-run-as-root --oversubscribe -np "${per_host}" \
      -x TESSERA_STRAGGLER_WINDOW "${perf}" ${flags} -c 0 2>/dev/null
  else
    TESSERA_STRAGGLER_WINDOW=$2 bash "${cluster}" run --name "${name}" --hosts "${hosts}" \
      --ranks-per-host "${per_host}" --pin-hosts --timeout 120 -- "${perf}" ${flags} -c 0 2>/dev/null
  fi | awk '$1 ~ /^[0-9]+$/ && NF >= 12 { print $6; exit }'
}

for ((r = 1; r <= rounds; r++)); do
  for c in "${selected[@]}"; do
    if ((r % 2)); then order=(1000 0); else order=(0 1000); fi
    for window in "${order[@]}"; do
      value="$(run_case "${c}" "${window}")"
      echo "${c%%|*} ${window} ${value:-nan}" >>"${results}"
    done
  done
  echo "round ${r} of ${rounds} done" >&2
done

python3 - "${results}" <<'EOF'
import statistics, sys
values = {}
for line in open(sys.argv[1]):
    case, window, value = line.split()
    values.setdefault(case, {}).setdefault(window, []).append(float(value))
# all_reduce_perf prints times under 100 us to 0.01 us (3% of an 8-byte call on one
# host): the mean over the rounds resolves finer than the median there.
print(f"{'case':10} {'off (median us)':>16} {'on (median us)':>15} {'on / off':>9} {'of means':>9}  rounds  "
      "on/off per round (min-max)")
for case, runs in values.items():
    off, on = statistics.median(runs["0"]), statistics.median(runs["1000"])
    means = statistics.mean(runs["1000"]) / statistics.mean(runs["0"])
    pairs = [a / b for a, b in zip(runs["1000"], runs["0"])]
    print(f"{case:10} {off:16.2f} {on:15.2f} {on / off:9.3f} {means:9.3f}  {len(runs['0']):6}  "
          f"{min(pairs):.3f}-{max(pairs):.3f}")
EOF
