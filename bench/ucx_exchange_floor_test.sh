#!/bin/bash
# Runs bench/ucx_exchange_floor for real: forked on one host, and as two processes
# joined by --listen/--connect over 127.0.0.1 (as across emulated hosts). Fails unless
# each run exits 0 with one row per size, every time positive, also with the UCX link's
# settings (--as-link all); checks that an unknown flag or setting is refused (exit 1).
# Every run is bounded by `timeout`.
# Usage: ucx_exchange_floor_test.sh PROGRAM
set -u
bin="$1"
out="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ucx_floor.XXXXXX")"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# check NAME FILE: five rows, 8 B to 32 KiB, each with a positive time.
check() {
  local rows
  rows="$(awk '$1 ~ /^[0-9]+$/ && $2 > 0 {print $1}' "$2" | tr '\n' ' ')"
  [ "$rows" = "8 64 512 4096 32768 " ] || fail "$1: rows '$rows' (want 8 64 512 4096 32768): $(cat "$2")"
}

args=(-b 8 -e 32K -f 8 -n 50)
timeout -k 5 60 "$bin" "${args[@]}" >"$out/forked" 2>&1 || fail "forked run exited $?: $(cat "$out/forked")"
check forked "$out/forked"

port=$((20000 + RANDOM % 20000))
timeout -k 5 60 "$bin" --listen "$port" "${args[@]}" >"$out/listen" 2>&1 &
listener=$!
timeout -k 5 60 "$bin" --connect "127.0.0.1:$port" "${args[@]}" >"$out/connect" 2>&1 || fail "--connect exited $?: $(cat "$out/connect")"
wait "$listener" || fail "--listen exited $?: $(cat "$out/listen")"
check listen "$out/listen"

# With the UCX link's settings (wakeup, serialized worker, peer error handling, keepalive).
timeout -k 5 60 "$bin" "${args[@]}" --as-link all >"$out/as_link" 2>&1 || fail "--as-link all exited $?: $(cat "$out/as_link")"
check as-link "$out/as_link"
timeout -k 5 10 "$bin" --as-link wakeup,nonsense >"$out/bad_list" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "--as-link with an unknown setting: exit $rc, want 1"

timeout -k 5 10 "$bin" --no-such-flag 1 >"$out/bad" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "an unknown flag: exit $rc, want 1"

rm -rf "$out"
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "ucx_exchange_floor: forked and --listen/--connect runs gave every row"
