#!/bin/bash
# The allreduced gradient of a batch-norm-free ResNet on 2 ranks x batch B equals the
# single-process gradient on the same 2B images, and with staleness 1 the update of step
# t applies step t-1's gradient: runs gradient_check (its header states the cases and
# tolerances) under a real `mpirun -np 2`, and alone (1 rank, where the
# "allreduce" is over one process).
# Usage: gradient_allreduce_test.sh path/to/gradient_check
set -u
BIN="$1"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/gradient_check.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
failures=0

timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN" >"$OUT/two" 2>&1
rc=$?
cat "$OUT/two"
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun -np 2 exited $rc"; failures=$((failures + 1)); }
oks=$(grep -c ": OK$" "$OUT/two")
[ "$oks" -eq 18 ] || { echo "FAIL: $oks of 18 rank-case lines OK"; failures=$((failures + 1)); }

timeout -k 5 120 "$BIN" >"$OUT/one" 2>&1
rc=$?
cat "$OUT/one"
[ "$rc" -eq 0 ] || { echo "FAIL: a single process exited $rc"; failures=$((failures + 1)); }

rm -rf "$OUT"
[ "$failures" -eq 0 ] && echo "PASS"
exit "$failures"
