#!/bin/bash
# No layer above the transport layer includes a backend's header (transport/shm, tcp,
# ucx, ibverbs, cuda_ipc): the communicator reaches the backends through the registry
# (transport/registry.h) and the seam (transport/transport.h, plugin.h) only. Bazel
# visibility refuses the dependency; this test names the offending line.
set -u
checked=0
offending=""
for f in "$@"; do
  checked=$((checked + 1))
  hits=$(grep -nE '#include +"transport/(shm|tcp|ucx|ibverbs|cuda_ipc)/' "$f") && offending+="$f: $hits"$'\n'
done
if [ "$checked" -lt 50 ]; then
  echo "only $checked files to check: the filegroups lost their sources" >&2
  exit 1
fi
if [ -n "$offending" ]; then
  echo "backend headers included above the transport layer:" >&2
  echo "$offending" >&2
  exit 1
fi
echo "checked $checked files above the transport layer: no backend header included"
