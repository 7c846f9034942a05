#!/bin/bash
# Runs gloo_all_reduce_perf for real, for every Gloo algorithm it exposes: each goes
# through perf_programs_test.sh (alone, mpirun -np 2 and -np 3, every type and op Gloo
# has, small sizes, -c 1: exit 0, full table, no wrong element; -h and bad flags). Then
# what is Gloo's own: the algorithm named in the header, an unknown -A refused (exit 2),
# bfloat16 and avg rejected cleanly (exit 1, one message), a rank whose peer never comes
# failing within --timeout_s instead of hanging, GLOO_SOCKET_IFNAME, ranks on different
# hosts without GLOO_SOCKET_IFNAME refused, and no store directory left behind.
# Every run is bounded by `timeout`.
# Usage: gloo_programs_test.sh path/to/gloo_all_reduce_perf path/to/perf_programs_test.sh
set -u

BIN="$(realpath "${1:?usage: gloo_programs_test.sh BIN perf_programs_test.sh}")"
HARNESS_TEST="${2:?usage: gloo_programs_test.sh BIN perf_programs_test.sh}"
ALGORITHMS=(ring_chunked halving_doubling ring bcube function_ring)
TYPES="int8,uint8,int32,uint32,int64,uint64,half,float,double"  # not bfloat16
OPS="sum,prod,max,min"                                          # not avg
RUN_LIMIT_S=60
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/gloo_programs.XXXXXX")"
export TMPDIR="$OUT"  # Open MPI's session directory goes under TMPDIR
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME COMMAND...: bounded by RUN_LIMIT_S; stdout in $OUT/NAME, stderr in
# $OUT/NAME.err, exit code in $rc.
run() {
  local name="$1"
  shift
  timeout -k 5 "$RUN_LIMIT_S" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  rc=$?
  echo "--- $name (exit $rc)"
  head -c 20000 "$OUT/$name"
  head -c 5000 "$OUT/$name.err"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    fail "$name: did not finish within ${RUN_LIMIT_S} s"
  fi
}

# Default store directories (/tmp/gloo_perf_store.<job>) created since the test began.
store_dirs() { ls -d /tmp/gloo_perf_store.* 2>/dev/null | sort; }
stores_before="$(store_dirs)"
new_store_dirs() { comm -13 <(echo "$stores_before") <(store_dirs); }

# The shared checks, once per algorithm, through a wrapper that adds -A.
for algorithm in "${ALGORITHMS[@]}"; do
  wrapper="$OUT/gloo_all_reduce_perf_$algorithm"
  printf '#!/bin/sh\nexec "%s" -A %s "$@"\n' "$BIN" "$algorithm" >"$wrapper"
  chmod +x "$wrapper"
  echo "=== $algorithm: perf_programs_test.sh"
  bash "$HARNESS_TEST" "$wrapper" "$TYPES" "$OPS" >"$OUT/harness_$algorithm" 2>&1
  harness_rc=$?
  grep -E '^(FAIL|PASS)|check\(s\) failed' "$OUT/harness_$algorithm"
  if [ "$harness_rc" -ne 0 ]; then
    tail -c 20000 "$OUT/harness_$algorithm"
    fail "$algorithm: perf_programs_test.sh failed"
  fi

  run "header_$algorithm" "${MPIRUN[@]}" -np 2 "$BIN" -A "$algorithm" -b 8 -e 8 -n 1 -w 0
  [ "$rc" -eq 0 ] || fail "header_$algorithm: exit code $rc"
  grep -q "^# gloo_all_reduce_perf: allreduce, Gloo [0-9.]* $algorithm[ ,].*, 2 ranks$" \
    "$OUT/header_$algorithm" || fail "header_$algorithm: algorithm not named in the header"
done

# Every run so far succeeded with the default store directory: none may be left.
left="$(new_store_dirs)"
[ -z "$left" ] || fail "store directories left behind: $left"

run bad_algorithm "$BIN" -A no_such_algorithm -b 8
[ "$rc" -eq 2 ] || fail "bad_algorithm: exit code $rc, expected 2"
grep -q "unknown algorithm 'no_such_algorithm'" "$OUT/bad_algorithm.err" ||
  fail "bad_algorithm: algorithm not named"

for rejected in "-d bfloat16" "-o avg"; do
  name="rejected_${rejected#-? }"
  # shellcheck disable=SC2086  # the flag and its value are two words
  run "$name" "${MPIRUN[@]}" -np 2 "$BIN" -b 8 -e 64 $rejected
  [ "$rc" -eq 1 ] || fail "$name: exit code $rc, expected 1"
  grep -q '^# stopped: .*Gloo .*has no' "$OUT/$name" || fail "$name: no '# stopped' reason"
  got=$(grep -c 'has no' "$OUT/$name.err")
  [ "$got" -eq 1 ] || fail "$name: message printed $got times, expected once"
done

# A rank of two whose peer never starts: the rendezvous times out, naming itself.
start=$(date +%s)
run lonely_rank env RANK=0 WORLD_SIZE=2 "$BIN" --store_dir "$OUT/lonely_store" \
  --timeout_s 2 -b 8 -e 8
took=$(($(date +%s) - start))
[ "$rc" -eq 1 ] || fail "lonely_rank: exit code $rc, expected 1"
grep -q 'rank 0 of 2: exchanging host names through the file store' "$OUT/lonely_rank.err" ||
  fail "lonely_rank: the failing step is not named"
[ "$took" -le 20 ] || fail "lonely_rank: took $took s with --timeout_s 2"

# An explicit store directory and interface; the store's keys are gone afterwards.
mkdir -p "$OUT/store"
run ifname_lo "${MPIRUN[@]}" -np 3 -x GLOO_SOCKET_IFNAME=lo "$BIN" --store_dir "$OUT/store" \
  -b 8 -e 4K -f 8 -n 2 -w 1
[ "$rc" -eq 0 ] || fail "ifname_lo: exit code $rc"
grep -q '^# gloo_all_reduce_perf: .* tcp 127.0.0.1 (lo), 3 ranks$' "$OUT/ifname_lo" ||
  fail "ifname_lo: interface not in the header"
[ -z "$(ls -A "$OUT/store")" ] || fail "ifname_lo: keys left in the store: $(ls -A "$OUT/store")"

# Two "hosts" (own UTS namespaces, so own host names) on loopback: refused, not hung.
if unshare --uts true 2>/dev/null; then
  run two_hosts "${MPIRUN[@]}" -np 2 sh -c \
    "exec unshare --uts sh -c 'hostname gloo-test-host\$OMPI_COMM_WORLD_RANK && exec $BIN -b 8 -e 8'"
  [ "$rc" -ne 0 ] || fail "two_hosts: exit code 0"
  grep -q 'ranks run on several hosts .* GLOO_SOCKET_IFNAME is not set' "$OUT/two_hosts.err" ||
    fail "two_hosts: no error naming GLOO_SOCKET_IFNAME"
else
  echo "--- two_hosts: skipped (unshare --uts is not permitted here)"
fi

# A rank killed by mpirun after another failed may leave its store behind: remove what
# the failing runs above left, leaving /tmp as it was.
for dir in $(new_store_dirs); do rm -rf "$dir"; done

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
