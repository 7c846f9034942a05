#!/bin/bash
# Times two builds of libtessera.so against each other, interleaved in one run, on the
# cases a change to the call path must not slow down: the 8-byte allreduce on 1 host x 2
# ranks and 1 host x 4 ranks (time per call), and the 32 MiB allreduce on 1 host x 2
# ranks (bus bandwidth). Each round runs every case once with each build, the order of
# the two builds alternating from round to round, so that what the machine does
# meanwhile falls on both alike. Prints each case's median over the rounds and the
# ratio new / old. Run it on a quiet machine: anything else running skews both builds,
# but not alike.
#
#   tools/ab_timing.sh --save DIR       copies bazel-bin/libtessera.so and
#                                       bazel-bin/bench/all_reduce_perf into DIR
#   tools/ab_timing.sh OLD_DIR NEW_DIR  the comparison (ROUNDS=10 by default)
#
# For example, from a checkout at the old commit and then at the new one:
#   bazel build //:tessera //bench:all_reduce_perf && tools/ab_timing.sh --save /tmp/ab/old
#   git checkout NEW && bazel build //:tessera //bench:all_reduce_perf && tools/ab_timing.sh --save /tmp/ab/new
#   tools/ab_timing.sh /tmp/ab/old /tmp/ab/new
#
# Each build runs with its own all_reduce_perf, which finds its libtessera.so through
# LD_LIBRARY_PATH. The instructions of one call, which no other load on the machine
# changes, are tools/call_walk.py's (its header has the command).
set -euo pipefail

if [ "${1:-}" = "--save" ]; then
  dir=${2:?usage: $0 --save DIR}
  mkdir -p "$dir"
  cp -fL bazel-bin/libtessera.so bazel-bin/bench/all_reduce_perf "$dir/"
  echo "saved libtessera.so and all_reduce_perf in $dir"
  exit 0
fi
old=${1:?usage: $0 OLD_DIR NEW_DIR (or --save DIR)}
new=${2:?usage: $0 OLD_DIR NEW_DIR (or --save DIR)}
rounds=${ROUNDS:-10}
for d in "$old" "$new"; do
  for f in libtessera.so all_reduce_perf; do
    [ -e "$d/$f" ] || { echo "$d/$f is missing (tools/ab_timing.sh --save $d)" >&2; exit 1; }
  done
done

# name, ranks, all_reduce_perf flags, column of its out-of-place row (6: time in us,
# 8: busbw in GB/s).
cases=(
  "8B_1x2|2|-b 8 -e 8 -n 20000 -w 2000|6"
  "8B_1x4|4|-b 8 -e 8 -n 10000 -w 1000|6"
  "32MiB_1x2_busbw|2|-b 32M -e 32M -n 20 -w 5|8"
)

# One run of case $1 with the build in $2; prints the measured value.
run_case() {
  local name ranks flags column
  IFS='|' read -r name ranks flags column <<<"$1"
  # shellcheck disable=SC2086  # flags are words
  LD_LIBRARY_PATH="$2" mpirun --allow-run-as-root --oversubscribe -np "$ranks" -x LD_LIBRARY_PATH \
    "$2/all_reduce_perf" $flags -c 0 2>/dev/null |
    awk -v c="$column" '$1 ~ /^[0-9]+$/ && NF >= 12 { print $c; exit }'
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for c in "${cases[@]}"; do
    if ((r % 2)); then order=("old" "new"); else order=("new" "old"); fi
    for build in "${order[@]}"; do
      dir=$old
      [ "$build" = new ] && dir=$new
      value=$(run_case "$c" "$dir")
      echo "${c%%|*} $build ${value:-nan}" >>"$results"
    done
  done
  echo "round $r of $rounds done" >&2
done

python3 - "$results" <<'EOF'
import statistics, sys
values = {}
for line in open(sys.argv[1]):
    case, build, value = line.split()
    values.setdefault(case, {}).setdefault(build, []).append(float(value))
print(f"{'case':18} {'old (median)':>13} {'new (median)':>13} {'new / old':>10}  rounds")
for case, builds in values.items():
    old, new = statistics.median(builds["old"]), statistics.median(builds["new"])
    unit = "GB/s" if "busbw" in case else "us"
    print(f"{case:18} {old:10.3f} {unit:4} {new:8.3f} {unit:4} {new / old:10.3f}  {len(builds['old'])}")
print("8B rows: time per call (lower is better); busbw: bus bandwidth (higher is better).")
EOF
