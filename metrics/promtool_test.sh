#!/usr/bin/env bash
# The /metrics page as Prometheus itself parses it: `promtool check metrics` (Debian's
# prometheus package) fails on a malformed line or family and warns on names and help
# that break its conventions; this test takes a warning as a failure too.
set -euo pipefail
sample="$1"
promtool=/usr/bin/promtool
if [[ ! -x "${promtool}" ]]; then
  echo "promtool_test: ${promtool} is missing: install Debian's prometheus (bash tools/install_deps.sh)" >&2
  exit 1
fi
page="$("${sample}")"
grep -q '^tessera_straggler{comm="0123456789abcdef",rank="0",straggler="3",straggler_host="node-b"} 0.91$' <<<"${page}"
grep -q '^tessera_call_duration_seconds_bucket{.*kind="allreduce",le="+Inf"} 1000$' <<<"${page}"
if ! report="$("${promtool}" check metrics <<<"${page}" 2>&1)"; then
  echo "promtool check metrics failed:"; echo "${report}"; exit 1
fi
if [[ -n "${report}" ]]; then
  echo "promtool check metrics warned:"; echo "${report}"; exit 1
fi
echo "promtool_test: the page passes promtool check metrics"
