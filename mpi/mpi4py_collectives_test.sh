#!/bin/bash
# Runs the collective tests of mpi4py's own test suite (test_cco_*.py: blocking,
# non-blocking, neighbourhood, vector and object collectives, in place, on world, dup,
# split and intercommunicators) under mpirun, on Open MPI alone and with
# libtessera_mpi.so preloaded, and fails unless every rank of every run passes the same
# number of tests and tessera ran some of the calls (TESSERA_MPI_STATS).
# Prints one line a run: "mpi4py collectives, N ranks, LIBRARY: P of T passed".
# Usage: mpi4py_collectives_test.sh LIBTESSERA_MPI MPI4PY_TESTS_DIR NP[:open_mpi|tessera]...
#   NP alone runs both; NP:tessera only with the library.
set -u

LIB="$(realpath "${1:?usage: mpi4py_collectives_test.sh LIBTESSERA_MPI MPI4PY_TESTS_DIR NP...}")"
TESTS="${2:?}"
shift 2
RUN_LIMIT_S=240   # per run; 2 ranks take about 15 s, 3 about 30 s
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/mpi4py.XXXXXX")"
export TMPDIR="$OUT"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

if [ ! -f "$TESTS/runtests.py" ]; then
  echo "FAIL: no mpi4py test suite at $TESTS: run tools/install_deps.sh"
  exit 1
fi

# run NP LIBRARY: the suite's collective tests on NP ranks; LIBRARY open_mpi or tessera.
run() {
  local np="$1" library="$2" name="$1_$2" preload=()
  [ "$library" = tessera ] && preload=(-x "LD_PRELOAD=$LIB" -x TESSERA_MPI_STATS=1)
  (cd "$TESTS" && timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np "$np" "${preload[@]}" \
    /usr/bin/python3 runtests.py --no-builddir -q -i cco >"$OUT/$name" 2>&1)
  local rc=$? ran failed
  echo "--- $name (exit $rc)"
  grep -E '^(Ran |OK|FAILED|ERROR:|FAIL:|tessera_mpi: rank 0:)' "$OUT/$name" | head -60
  [ "$rc" -eq 0 ] || fail "$name: exit code $rc"
  [ "$(grep -c '^OK' "$OUT/$name")" -eq "$np" ] || fail "$name: not every rank says OK"
  ran="$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$OUT/$name" | sort -u)"
  [ "$(echo "$ran" | wc -l)" -eq 1 ] && [ -n "$ran" ] || fail "$name: the ranks ran different tests: $ran"
  failed="$(sed -n 's/^FAILED (\(.*\))/\1/p' "$OUT/$name" | grep -o '[0-9]*' | awk '{s += $1} END {print s + 0}')"
  echo "mpi4py collectives, $np ranks, $library: $((ran - failed / np)) of $ran passed"
  eval "ran_$name=\$ran"
  if [ "$library" = tessera ]; then
    grep -q '^tessera_mpi: rank 0: MPI_Allreduce [0-9]* (tessera [1-9]' "$OUT/$name" ||
      fail "$name: no MPI_Allreduce ran on tessera"
    # mpi4py initialises MPI_THREAD_MULTIPLE: its non-blocking tests run on tessera too.
    grep -q '^tessera_mpi: rank 0: MPI_Iallreduce [0-9]* (tessera [1-9]' "$OUT/$name" ||
      fail "$name: no MPI_Iallreduce ran on tessera"
  fi
}

for spec in "$@"; do
  np="${spec%%:*}"
  if [ "$spec" = "$np" ]; then
    run "$np" open_mpi
    run "$np" tessera
    a="ran_${np}_open_mpi" b="ran_${np}_tessera"
    [ "${!a}" = "${!b}" ] || fail "$np ranks: ${!a} tests on Open MPI, ${!b} with tessera"
  else
    run "$np" "${spec#*:}"
  fi
done

echo "mpi4py_collectives: $failures failures"
[ "$failures" -eq 0 ]
