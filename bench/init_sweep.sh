#!/bin/bash
# The tables of docs/scale.md#creation-at-scale: bench/init_perf at 8, 16, 32, 64 and 128
# ranks, on one host and on 4 hosts emulated on this machine (TESSERA_TOPO_FILE: shared
# memory inside an emulated host, loopback TCP between).
#
#   bazel build //bench:init_perf //tools:topo_dump
#   flock -x /work/.machine.lock bash bench/init_sweep.sh [ROUNDS] [SIZES...]
#
# INIT_PERF names another init_perf binary (e.g. one built from an older commit), with
# its libtessera.so found through LD_LIBRARY_PATH. Extra mpirun options: MPIRUN_ARGS.
set -euo pipefail
rounds=${1:-3}
shift || true
sizes=${*:-8 16 32 64 128}
bin=${INIT_PERF:-bazel-bin/bench/init_perf}
layouts=$(mktemp -d)
trap 'rm -rf "$layouts"' EXIT
header=1
run() {  # the column names once, then the rows
  mpirun --allow-run-as-root --oversubscribe --bind-to none ${MPIRUN_ARGS:-} -x LD_LIBRARY_PATH "$@" \
    "$bin" -n "$rounds" | grep -v '^#' | { if ((header)); then cat; else sed 1d; fi; }
  header=0
}
echo "# one host"
for n in $sizes; do run -np "$n"; done
echo "# 4 emulated hosts (block placement)"
for n in $sizes; do
  bazel-bin/tools/topo_dump --layout "4x$((n / 4))" --out "$layouts/$n.txt" >/dev/null
  run -np "$n" -x TESSERA_TOPO_FILE="$layouts/$n.txt"
done
