#!/bin/bash
# Runs mpi_calls_test (an MPI program that knows nothing of tessera) with and without
# libtessera_mpi.so preloaded, for real, and fails unless:
#   - every run passes all its checks, on 2, 3 and 4 ranks of one host, or on 2 x 2
#     emulated hosts (--cluster CLUSTER_SH: tools/cluster, needs root and no sandbox);
#   - with the library, the routed collectives ran on tessera and the fallback cases on
#     Open MPI, as TESSERA_MPI_STATS counts them;
#   - TESSERA_MPI_COLLECTIVES turns routing off per collective, and a value that differs
#     between ranks routes nothing (with a warning) instead of mixing the two;
#   - a rank that comes late makes the others' call return an MPI error naming it
#     (MPI_ERRORS_RETURN) within TESSERA_TIMEOUT_MS, where Open MPI would wait.
# Every run is bounded by `timeout`.
# Usage: mpi_programs_test.sh LIBTESSERA_MPI MPI_CALLS_TEST [--cluster CLUSTER_SH]
set -u

LIB="$(realpath "${1:?usage: mpi_programs_test.sh LIBTESSERA_MPI MPI_CALLS_TEST [--cluster CLUSTER_SH]}")"
PROGRAM="$(realpath "${2:?}")"
CLUSTER="${4:-}"
RUN_LIMIT_S=90    # per run; a normal one takes 1-3 s
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/mpi_programs.XXXXXX")"
export TMPDIR="$OUT"  # Open MPI's session directory goes under TMPDIR
NAME="mp$$"           # the emulated cluster's name, unique per run
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME NP|HOSTSxRANKS MPIRUN_OPTIONS... -- ARGS...: the program under mpirun (or
# cluster.sh run), output in $OUT/NAME, exit code in $rc.
run() {
  local name="$1" layout="$2" options=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do options+=("$1"); shift; done
  shift
  if [ -n "$CLUSTER" ]; then
    timeout -k 5 "$RUN_LIMIT_S" bash "$CLUSTER" run --name "$NAME" --hosts "${layout%x*}" \
      --ranks-per-host "${layout#*x}" "${options[@]}" -- "$PROGRAM" "$@" >"$OUT/$name" 2>&1
  else
    timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np "$layout" "${options[@]}" \
      "$PROGRAM" "$@" >"$OUT/$name" 2>&1
  fi
  rc=$?
  echo "--- $name (exit $rc)"
  grep -v '^tessera .* WARN ' "$OUT/$name" | head -c 20000
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$name: did not finish within ${RUN_LIMIT_S} s"; fi
}

# passed NAME: the run exited 0 and every check passed.
passed() {
  [ "$rc" -eq 0 ] || fail "$1: exit code $rc"
  grep -q '^mpi_calls: [1-9][0-9]* passed, 0 failed$' "$OUT/$1" || fail "$1: not every check passed"
}

# count NAME COLLECTIVE ROUTE: rank 0's count of COLLECTIVE's calls that took ROUTE.
count() {
  sed -n "s/^tessera_mpi: rank 0: $2 [0-9]* (\(.*\))$/\1/p" "$OUT/$1" | tr ',' '\n' |
    sed -n "s/^ *$3 \([0-9]*\)$/\1/p" | head -1
}

at_least() {  # at_least NAME COLLECTIVE ROUTE N
  local got
  got="$(count "$1" "$2" "$3")"
  [ "${got:-0}" -ge "$4" ] || fail "$1: $2 took '$3' ${got:-0} times, expected at least $4"
}

if [ -n "$CLUSTER" ]; then
  trap 'timeout -k 5 60 bash "$CLUSTER" down --name "$NAME" >/dev/null 2>&1' EXIT
  timeout -k 5 60 bash "$CLUSTER" up --name "$NAME" --hosts 2 --rate 2gbit >"$OUT/up" 2>&1 ||
    { cat "$OUT/up"; fail "cluster up"; exit 1; }
  layouts="2x2"
else
  layouts="2 3 4"
fi

for layout in $layouts; do
  run "open_mpi_$layout" "$layout" --
  passed "open_mpi_$layout"
  run "tessera_$layout" "$layout" -x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1 --
  passed "tessera_$layout"
  name="tessera_$layout"
  for collective in MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather MPI_Reduce_scatter_block MPI_Alltoall \
                    MPI_Barrier; do
    at_least "$name" "$collective" tessera 2
  done
  at_least "$name" MPI_Allreduce datatype 3    # contiguous matrices, MPI_FLOAT_INT, MPI_SHORT; MPI_BYTE
  at_least "$name" MPI_Allreduce operator 1    # MPI_LAND
  at_least "$name" MPI_Allreduce communicator 2  # MPI_COMM_SELF, the intercommunicator
  at_least "$name" MPI_Iallreduce "thread level" 2  # MPI_Init: non-blocking stays on Open MPI
  # With MPI_THREAD_MULTIPLE the non-blocking collectives run on tessera.
  run "thread_multiple_$layout" "$layout" -x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1 -- --thread-multiple
  passed "thread_multiple_$layout"
  for collective in MPI_Iallreduce MPI_Ireduce MPI_Ibcast MPI_Iallgather MPI_Ireduce_scatter_block MPI_Ialltoall \
                    MPI_Ibarrier; do
    at_least "thread_multiple_$layout" "$collective" tessera 1
  done
done

if [ -z "$CLUSTER" ]; then
  # Routing off for two collectives: they all go to Open MPI, the rest still to tessera.
  run settings_off 2 -x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1 -x TESSERA_MPI_COLLECTIVES=-allreduce,-barrier --
  passed settings_off
  [ "$(count settings_off MPI_Allreduce tessera)" = "0" ] || fail "settings_off: MPI_Allreduce still went to tessera"
  at_least settings_off MPI_Allreduce "setting off" 100
  at_least settings_off MPI_Barrier "setting off" 2
  at_least settings_off MPI_Reduce tessera 8

  # A setting that differs between ranks (MPMD: one rank each) routes nothing, and says so.
  # (mpirun's -x is per program: both get the library)
  timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe \
    -np 1 -x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1 -x TESSERA_MPI_COLLECTIVES=bcast "$PROGRAM" : \
    -np 1 -x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1 "$PROGRAM" >"$OUT/settings_differ" 2>&1
  rc=$?
  echo "--- settings_differ (exit $rc)"; grep -v 'WARN' "$OUT/settings_differ" | head -c 5000
  passed settings_differ
  grep -q 'TESSERA_MPI_COLLECTIVES or the thread level differs between ranks' "$OUT/settings_differ" || fail "settings_differ: no warning"
  [ "$(count settings_differ MPI_Bcast tessera)" = "0" ] || fail "settings_differ: MPI_Bcast went to tessera"

  # Rank 1 comes 3 s late: rank 0's call returns an error naming it, after 2 s.
  run late_rank 2 -x "LD_PRELOAD=$LIB" -x TESSERA_TIMEOUT_MS=2000 -- --late-rank
  [ "$rc" -eq 0 ] || fail "late_rank: exit code $rc"
  grep -q '^late-rank: rank 0: error: tessera timeout \[culprit: rank 1\] in MPI_Allreduce' "$OUT/late_rank" ||
    fail "late_rank: rank 0's error does not name rank 1"
fi

echo "mpi_programs: $failures failures"
[ "$failures" -eq 0 ]
