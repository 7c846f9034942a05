#!/bin/bash
# Runs a *_perf program for real: alone (one rank) and under `mpirun -np 2` and `-np 3`,
# over data types and ops at a few small sizes, and fails unless every run exits 0
# with the full nccl-tests table, one "#  Rank" line per rank and no wrong element.
# Also checks -h (exit 0) and bad flags (usage printed once, exit 2), which must not
# need a job. Every run is bounded by `timeout`, so the test cannot hang.
# Usage: perf_programs_test.sh path/to/program [TYPES [OPS]]
#   TYPES, OPS: as -d and -o take them ("all", or a comma-separated list); default all.
set -u

BIN="${1:?usage: perf_programs_test.sh path/to/program [TYPES [OPS]]}"
TYPES="${2:-all}"
OPS="${3:-all}"
RUN_LIMIT_S=60    # per run; a normal run takes about a second
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/perf_programs.XXXXXX")"
export TMPDIR="$OUT"  # Open MPI's session directory goes under TMPDIR
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME NP ARGS...: runs the program alone (NP = 0) or under mpirun -np NP, bounded
# by RUN_LIMIT_S; stdout in $OUT/NAME, stderr in $OUT/NAME.err, exit code in $rc.
run() {
  local name="$1" np="$2"
  shift 2
  if [ "$np" -eq 0 ]; then
    timeout -k 5 "$RUN_LIMIT_S" "$BIN" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  else
    timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np "$np" \
      "$BIN" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  fi
  rc=$?
  echo "--- $name (exit $rc)"
  head -c 40000 "$OUT/$name"
  head -c 5000 "$OUT/$name.err"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$name: did not finish within ${RUN_LIMIT_S} s"
  fi
}

# check_table NAME NRANKS ROWS: a complete, correct table for NRANKS ranks.
check_table() {
  local name="$1" nranks="$2" rows="$3" got
  [ "$rc" -eq 0 ] || fail "$name: exit code $rc, expected 0"
  got=$(grep -c '^#  Rank ' "$OUT/$name")
  [ "$got" -eq "$nranks" ] || fail "$name: $got rank lines, expected $nranks"
  grep -q "^# nRanks $nranks " "$OUT/$name" || fail "$name: no '# nRanks $nranks' header"
  grep -q '^#       size         count      type   redop    root     time   algbw   busbw #wrong' \
    "$OUT/$name" || fail "$name: no column header"
  got=$(grep -vc '^#' "$OUT/$name")
  [ "$got" -eq "$rows" ] || fail "$name: $got table rows, expected $rows"
  # 13 fields per row, root -1, no wrong element in either group.
  got=$(awk '!/^#/ && (NF != 13 || $5 != -1 || $9 != "0" || $13 != "0")' "$OUT/$name" | wc -l)
  [ "$got" -eq 0 ] || fail "$name: $got rows malformed or with wrong elements"
  grep -q '^# Out of bounds values : 0 OK$' "$OUT/$name" || fail "$name: footer does not say 0 OK"
  grep -q '^# Avg bus bandwidth    : ' "$OUT/$name" || fail "$name: no average bus bandwidth"
}

# count_names LIST TOTAL: how many names a -d/-o list holds ("all" = TOTAL).
count_names() {
  if [ "$1" = all ]; then echo "$2"; else echo "$1" | tr ',' '\n' | wc -l; fi
}

# Sizes 8, 64, 512, 4K, 32K: 5 rows for each type x op.
SMALL=(-b 8 -e 32K -f 8 -n 2 -w 1 -c 1 -d "$TYPES" -o "$OPS")
SMALL_ROWS=$((5 * $(count_names "$TYPES" 10) * $(count_names "$OPS" 5)))

run alone 0 "${SMALL[@]}"
check_table alone 1 "$SMALL_ROWS"

run np2 2 "${SMALL[@]}"
check_table np2 2 "$SMALL_ROWS"

run np3 3 "${SMALL[@]}"
check_table np3 3 "$SMALL_ROWS"

# In-place and out-of-place over several periods of the test pattern, float sum.
run np2_large 2 -b 1M -e 4M -f 4 -n 2 -w 1
check_table np2_large 2 2

run help 0 -h
[ "$rc" -eq 0 ] || fail "help: exit code $rc, expected 0"
grep -q '^USAGE: ' "$OUT/help" || fail "help: no usage printed"

run bad_flag 0 -b 8 --no-such-flag
[ "$rc" -eq 2 ] || fail "bad_flag: exit code $rc, expected 2"
grep -q -- "unknown flag '--no-such-flag'" "$OUT/bad_flag.err" || fail "bad_flag: flag not named"
grep -q '^USAGE: ' "$OUT/bad_flag.err" || fail "bad_flag: no usage printed"

run bad_flag_np2 2 -d float7
[ "$rc" -ne 0 ] || fail "bad_flag_np2: exit code 0"
got=$(grep -c '^USAGE: ' "$OUT/bad_flag_np2.err")
[ "$got" -eq 1 ] || fail "bad_flag_np2: usage printed $got times, expected once (rank 0)"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
