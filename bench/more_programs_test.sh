#!/bin/bash
# Runs nccl-tests' other programs (allgather, reduce-scatter, broadcast, reduce,
# alltoall, sendrecv; tessera's and Open MPI's) for real: each alone and under
# `mpirun -np 3`, with -c 1 at small sizes over a few types and ops, the rooted ones
# also with -r 1 and -r 2; fails unless every run exits 0 with one "#  Rank" line per
# rank, every row checked with #wrong 0 in both groups, and the footer's "0 OK". Also
# checks that -r is refused by a collective without a root (exit 2) and that a root
# outside the job stops cleanly (exit 1, error printed). Every run is bounded by
# `timeout`, so the test cannot hang.
# Usage: more_programs_test.sh program...
set -u

RUN_LIMIT_S=60
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/more_programs.XXXXXX")"
export TMPDIR="$OUT"  # Open MPI's session directory goes under TMPDIR
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME NP BIN ARGS...: alone (NP = 0) or under mpirun -np NP; exit code in $rc.
run() {
  local name="$1" np="$2" bin="$3"
  shift 3
  if [ "$np" -eq 0 ]; then
    timeout -k 5 "$RUN_LIMIT_S" "$bin" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  else
    timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np "$np" \
      "$bin" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  fi
  rc=$?
  echo "--- $name (exit $rc)"
  head -c 20000 "$OUT/$name"
  head -c 5000 "$OUT/$name.err"
}

# check NAME NRANKS ROWS ROOT: complete table, every row checked and right.
check() {
  local name="$1" nranks="$2" rows="$3" root="$4" got
  [ "$rc" -eq 0 ] || fail "$name: exit code $rc, expected 0"
  got=$(grep -c '^#  Rank ' "$OUT/$name")
  [ "$got" -eq "$nranks" ] || fail "$name: $got rank lines, expected $nranks"
  got=$(grep -vc '^#' "$OUT/$name")
  [ "$got" -eq "$rows" ] || fail "$name: $got table rows, expected $rows"
  got=$(awk -v root="$root" '!/^#/ && (NF != 13 || $5 != root || $9 != "0" || $13 != "0")' \
    "$OUT/$name" | wc -l)
  [ "$got" -eq 0 ] || fail "$name: $got rows malformed, with another root or wrong elements"
  grep -q '^# Out of bounds values : 0 OK$' "$OUT/$name" || fail "$name: footer does not say 0 OK"
}

# Sizes 64 .. 256K by 8 (64 B: at least one double per rank's block at 3 ranks): 5 rows
# per type x op (3 x 2 here). The 1M..4M rows span many pattern periods per block.
SMALL=(-b 64 -e 256K -f 8 -n 2 -w 1 -c 1 -d int8,half,double -o sum,min)
for bin in "$@"; do
  base="$(basename "$bin")"
  case "$base" in
    *broadcast_perf | *reduce_perf) root=0 rooted=1 ;;
    *) root=-1 rooted=0 ;;
  esac
  run "$base.alone" 0 "$bin" "${SMALL[@]}"
  check "$base.alone" 1 30 "$root"
  run "$base.np3" 3 "$bin" "${SMALL[@]}"
  check "$base.np3" 3 30 "$root"
  run "$base.np3_large" 3 "$bin" -b 1M -e 4M -f 4 -n 2 -w 1 -c 1
  check "$base.np3_large" 3 2 "$root"
  if [ "$rooted" -eq 1 ]; then
    for r in 1 2; do
      run "$base.np3_root$r" 3 "$bin" -r "$r" "${SMALL[@]}"
      check "$base.np3_root$r" 3 30 "$r"
    done
    run "$base.bad_root" 3 "$bin" -r 3 -b 8 -e 8
    [ "$rc" -eq 1 ] || fail "$base.bad_root: exit code $rc, expected 1"
    grep -q 'root 3 is not a rank of this job' "$OUT/$base.bad_root.err" ||
      fail "$base.bad_root: error not printed"
  else
    run "$base.no_root" 0 "$bin" -r 1
    [ "$rc" -eq 2 ] || fail "$base.no_root: exit code $rc, expected 2"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
