#!/usr/bin/env bash
# Bazel's face of the fault suite (fault_suite.py): every case on an emulated cluster of
# its own, the table written to the test's outputs (fault_table.md, results.jsonl under
# bazel-testlogs/tests/faults/fault_suite_test/test.outputs/). Needs root and no
# sandbox; tagged exclusive (timing) and no-sandbox (network namespaces, iptables).
# Usage: fault_suite_test.sh CLUSTER_SH FAULT_RANK SEGV_SHIM FAULT_SUITE_PY
set -u
export PATH="/usr/sbin:/sbin:${PATH}"
if [ "${EUID}" -ne 0 ]; then
  echo "FAIL: needs root (network namespaces, iptables); CI runs as root"
  exit 1
fi
exec timeout -k 30 840 /usr/bin/python3 "${4:?}" --cluster "${1:?}" --driver "${2:?}" --shim "${3:?}"
