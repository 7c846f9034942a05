#!/usr/bin/env bash
# Runs the multi-process suites and the unit tests of the lower layers again, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (--config=asan), then with ThreadSanitizer
# (--config=tsan) (docs/sanitizers.md). Any report fails its test and so this script.
# Each config has its own output directory, so the normal build is kept.
#
# Usage: bash tools/sanitizers.sh [asan|tsan ...]   (default: asan tsan)
# Extra Bazel flags (e.g. --config=ci) come from TESSERA_SANITIZER_FLAGS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(
  //tests:comm_test                       # incl. non-blocking communicators, splits
  //tests:group_test
  //tests:bad_input_test                  # incl. handles destroyed beside calls on other threads
  //tests:failure_test
  //tests:shrink_test                     # revoke and shrink after a kill and a stop
  //tests:collectives_allreduce_test
  //tests:collectives_reduce_test
  //tests:collectives_reducescatter_test
  //tests:collectives_movement_test
  //tests:collectives_tcp_test
  //tests:collectives_hosts_test
  //tests:collectives_allreduce_algos_test
  //tests:allreduce_shm_test
  //tests:topology_algorithms_test        # the algorithms on emulated layouts
  //tests:api_ucx_test
  //tests:listener_abuse_test
  //tests:deterministic_test              # the fixed-point grid on 1-8 ranks, every algorithm
  //tests:autotune_test                   # the choice measured in the job, agreed over ranks
  //comm:shrink_offer_test
  //comm:flight_recorder_test              # its lock-free writer
  //diagnosis/...
  //base/...
  //collectives/...
  //elementwise/...                       # the kernels and the half conversions
  //transport/...
)
# Left out under TSan to keep CI inside its time (docs/sanitizers.md): api_ucx_test
# (UCX stays covered there by //transport:ucx_transport_test) and the algorithms on
# emulated layouts (topology_algorithms_test; TSan runs every algorithm on emulated
# hosts in collectives_allreduce_algos_test).
declare -A skip=(
  [asan]=""
  [tsan]="-//tests:api_ucx_test -//tests:topology_algorithms_test"
)

sanitizers=("$@")
(( ${#sanitizers[@]} == 0 )) && sanitizers=(asan tsan)
status=0
for sanitizer in "${sanitizers[@]}"; do
  started="$(date +%s)"
  log="$(mktemp)"
  # shellcheck disable=SC2086  # the flags and the skip list are words
  bazel test ${TESSERA_SANITIZER_FLAGS:-} --config="${sanitizer}" -- "${targets[@]}" ${skip[${sanitizer}]} 2>&1 \
    | tee "${log}" || status=1
  echo "sanitizers: --config=${sanitizer}: $(grep -cE '^//[^ ]+ +(\(cached\) )?(PASSED|FLAKY)' "${log}" || true)" \
    "passed, $(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "${log}" || true)" \
    "failed, in $(( $(date +%s) - started )) s"
  rm -f "${log}"
done
exit "${status}"
