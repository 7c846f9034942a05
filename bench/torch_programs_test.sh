#!/bin/bash
# Runs the PyTorch benchmarks for real on a tiny budget, so that they keep working:
# torch_all_reduce.py (mpirun -np 2, 8 B-64 KiB: both tables complete, no wrong element,
# the summary row for every size) and torch_ddp_resnet50.py (mpirun -np 2, ResNet-50 at
# 32x32, batch 2, 1 step per phase: a line per backend), and on torch 2.x
# torch_fsdp_step.py (mpirun -np 2, a one-layer transformer, 2 steps: a row per backend
# and their ratio). Figures are not checked: the
# measurements are in docs/pytorch.md. Every run is bounded by `timeout`.
# Usage (from Bazel): torch_programs_test.sh PYTHON PACKAGE_DIR
#   PYTHON: the Python of one torch; PACKAGE_DIR: the tessera_torch built for it
#   (pytorch/torch1 or pytorch/torch2, pytorch/backend.bzl).
set -u
python="$1"
root="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-tessera}"
export PYTHONPATH="${root}/$2${PYTHONPATH:+:${PYTHONPATH}}"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/torch_programs.XXXXXX")"
export TMPDIR="$OUT"
port=$((20000 + RANDOM % 20000))
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
mpi() {
  timeout -k 5 "$1" mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_ADDR=127.0.0.1 \
    -x MASTER_PORT=$((port++)) -x PYTHONPATH -x OMP_NUM_THREADS "${python}" "${@:2}"
}

mpi 120 "${root}/bench/torch_all_reduce.py" -b 8 -e 64K -f 8 -n 3 -w 1 >"$OUT/allreduce" 2>"$OUT/allreduce.err" ||
  fail "torch_all_reduce.py exited $?: $(tail -5 "$OUT/allreduce.err")"
for backend in tessera gloo; do
  grep -q "^# torch_all_reduce: torch.distributed.all_reduce on ${backend}, 2 ranks" "$OUT/allreduce" ||
    fail "no ${backend} table"
done
rows="$(grep -cE '^ +[0-9]+ +[0-9]+ +float +sum +-1 ' "$OUT/allreduce")"
[[ "$rows" == 10 ]] || fail "want 10 rows (5 sizes x 2 backends), got $rows"
wrong="$(grep -E '^ +[0-9]+ +[0-9]+ +float ' "$OUT/allreduce" | awk '$NF != 0' | wc -l)"
[[ "$wrong" == 0 ]] || fail "$wrong rows with wrong elements"
summary="$(sed -n '/^# Summary/,$p' "$OUT/allreduce" | grep -cE '^ +[0-9]+ +[0-9.]+x bw')"
[[ "$summary" == 5 ]] || fail "want 5 summary rows, got $summary"

mpi 240 "${root}/bench/torch_ddp_resnet50.py" --batch 2 --image 32 --steps 1 --warmup 0 \
  >"$OUT/ddp" 2>"$OUT/ddp.err" || fail "torch_ddp_resnet50.py exited $?: $(tail -5 "$OUT/ddp.err")"
for backend in tessera gloo; do
  grep -qE "^  ${backend} +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%" "$OUT/ddp" || fail "no ${backend} row"
done

# FSDP2 is torch 2.x's.
if "${python}" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  mpi 240 "${root}/bench/torch_fsdp_step.py" --layers 1 --width 64 --seq 8 --steps 2 --warmup 1 \
    >"$OUT/fsdp" 2>"$OUT/fsdp.err" || fail "torch_fsdp_step.py exited $?: $(tail -5 "$OUT/fsdp.err")"
  for backend in tessera gloo; do
    grep -qE "^  ${backend} +[0-9.]+ +[0-9.]+$" "$OUT/fsdp" || fail "no ${backend} FSDP row"
  done
  grep -q "^# tessera / gloo median step: [0-9.]*$" "$OUT/fsdp" || fail "no FSDP ratio"
  cat "$OUT/fsdp"
fi

cat "$OUT/allreduce" "$OUT/ddp"
rm -rf "$OUT"
[[ "$failures" == 0 ]] && echo "PASS"
exit "$failures"
