#!/bin/bash
# Runs tests/pmix_share_main under a real `mpirun -np 3` (Open MPI's PMIx server) and
# fails unless every rank of every round printed OK with rank 0's digest, the timeout
# and no-launcher cases report the right error, and every mpirun exits 0. Every run is
# bounded by `timeout`, so the test cannot hang.
# Usage: pmix_share_test.sh [path/to/pmix_share_main]
set -u

BIN="${1:-tests/pmix_share_main}"
NP=3
RUN_LIMIT_S=60          # per mpirun; a normal run takes about a second
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/pmix_share.XXXXXX")"
export TMPDIR="$OUT"    # Open MPI's session directory goes under TMPDIR
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run_mpirun NAME ARGS...: runs the program under mpirun; output in $OUT/NAME.
run_mpirun() {
  local name="$1"
  shift
  timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np "$NP" \
    "$BIN" "$@" >"$OUT/$name" 2>&1
  local rc=$?
  echo "--- $name (mpirun exit $rc)"
  cat "$OUT/$name"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$name: mpirun did not finish within ${RUN_LIMIT_S} s"
  elif [ "$rc" -ne 0 ]; then
    fail "$name: mpirun exited $rc"
  fi
}

# check_rounds NAME ROUNDS: every round 0..ROUNDS-1 printed by all NP ranks, one digest.
check_rounds() {
  local name="$1" rounds="$2" round count digests
  for ((round = 0; round < rounds; round++)); do
    count=$(grep -cE "^rank [0-9]+ round $round bytes [0-9]+ digest [0-9a-f]+ OK$" "$OUT/$name")
    digests=$(grep -E "^rank [0-9]+ round $round bytes " "$OUT/$name" |
      awk '{print $8}' | sort -u | wc -l)
    [ "$count" -eq "$NP" ] || fail "$name: round $round: $count of $NP ranks printed OK"
    [ "$digests" -eq 1 ] || fail "$name: round $round: ranks received $digests different blobs"
  done
  local total
  total=$(grep -cE "^rank [0-9]+ round " "$OUT/$name")
  [ "$total" -eq $((rounds * NP)) ] || fail "$name: $total round lines, expected $((rounds * NP))"
}

if [ ! -x "$BIN" ]; then
  echo "FAIL: $BIN is not an executable"
  exit 1
fi

# Several shares in one process, without MPI.
run_mpirun share --mode=share --rounds=5 --timeout_ms=20000
check_rounds share 5

# With MPI: a share before MPI_Init, three inside (checked against MPI_Bcast), one after.
run_mpirun mpi --mode=mpi --rounds=3 --timeout_ms=20000
check_rounds mpi 5

# MPI initialises PMIx first.
run_mpirun mpi-first --mode=mpi-first --rounds=3 --timeout_ms=20000
check_rounds mpi-first 4

# One rank never joins: the others must time out (2 s), naming the fence.
run_mpirun absent --mode=absent --timeout_ms=2000
count=$(grep -cE "^rank [0-9]+ timeout OK after [0-9]+ ms: timeout: .*PMIx_Fence timed out" \
  "$OUT/absent")
[ "$count" -eq $((NP - 1)) ] ||
  fail "absent: $count of $((NP - 1)) ranks reported the fence timeout"
grep -q "^rank $((NP - 1)) absent OK$" "$OUT/absent" ||
  fail "absent: the absent rank did not finish"

# Not started by a PMIx launcher: InvalidUsage, no hang.
env -u PMIX_NAMESPACE -u PMIX_RANK timeout -k 5 "$RUN_LIMIT_S" "$BIN" --mode=no-launcher \
  >"$OUT/no-launcher" 2>&1
rc=$?
echo "--- no-launcher (exit $rc)"
cat "$OUT/no-launcher"
[ "$rc" -eq 0 ] || fail "no-launcher: exited $rc"
grep -q "^no-launcher OK: invalid usage: .*not started by a PMIx launcher" "$OUT/no-launcher" ||
  fail "no-launcher: no InvalidUsage report"

# PMIx variables that name no server: PMIx_Init fails, reported as InvalidUsage.
env PMIX_NAMESPACE=no-such-namespace PMIX_RANK=0 timeout -k 5 "$RUN_LIMIT_S" "$BIN" \
  --mode=no-launcher >"$OUT/no-server" 2>&1
rc=$?
echo "--- no-server (exit $rc)"
cat "$OUT/no-server"
[ "$rc" -eq 0 ] || fail "no-server: exited $rc"
grep -q "^no-launcher OK: invalid usage: .*PMIx_Init failed" "$OUT/no-server" ||
  fail "no-server: no InvalidUsage report"

rm -rf "$OUT"
if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
