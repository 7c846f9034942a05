#!/bin/bash
# The checks that need a GPU, in one run on a GPU machine (docs/cuda.md#on-a-gpu):
#   1. the CUDA suites (cuda/ and the CUDA library's tests), which skip without a GPU;
#   2. NVIDIA's nccl-tests against the CUDA drop-in libnccl.so.2 (one rank, device
#      buffers, data checked), beside the NCCL of the machine's torch wheel;
#   3. PyTorch's ProcessGroupNCCL and DDP over the drop-in (nccl/cuda/torch_nccl_check.py),
#      device-resident (cuda_ipc) and staged (TESSERA_TRANSPORT=shm);
#   4. the trainer built against the machine's libtorch, its demo in fp16 on the GPU
#      (2 ranks sharing it), and ResNet-50 steps in fp16 and fp32.
# Usage: tools/gpu/run_checks.sh BUNDLE.tar.xz [STEPS]   (from tools/gpu/bundle.sh)
#   STEPS: any of suites,nccl_tests,torch,trainer (default all). Logs go to $OUT (or
#   ./gpu-logs), one per step, and summary.txt. NCCL_TESTS: which nccl-tests (default
#   all seven, e.g. "all_reduce sendrecv").
set -u
cd "$(dirname "$0")/../.."
BUNDLE_TAR=$(realpath "$1")
STEPS=${2:-suites,nccl_tests,torch,trainer}
LOGS=${OUT:-$PWD/gpu-logs}
B=/tmp/tessera-gpu
mkdir -p "$LOGS" "$B"
SUMMARY="$LOGS/summary.txt"
say() { echo "$*" | tee -a "$SUMMARY"; }
step_on() { [[ ",$STEPS," == *",$1,"* ]]; }
# Backtraces of every thread of the processes matching PATTERN that still run after
# SECONDS (cuda-gdb: the CUDA image has no gdb), for a call that hangs.
stacks_after() {
  local seconds=$1 pattern=$2 pid
  sleep "$seconds"
  for pid in $(pgrep -f "$pattern"); do
    echo "=== pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-200)" >>"$LOGS/stacks.log"
    timeout 40 "$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)" -p "$pid" -batch -ex "thread apply all bt 25" >>"$LOGS/stacks.log" 2>&1
  done
}

tar -C "$B" -xJf "$BUNDLE_TAR" || { say "cannot unpack $BUNDLE_TAR"; exit 1; }
# Only the bundled system libraries this machine lacks.
mkdir -p "$B/missing"
for lib in "$B"/lib/*.so.*; do
  name=$(basename "$lib")
  ldconfig -p | grep -q "^[[:space:]]$name " || ln -sf "$lib" "$B/missing/$name"
done
export LD_LIBRARY_PATH="$B/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "bundled libraries used: $(ls "$B/missing" | tr '\n' ' ')"

if step_on trainer; then
  (bash tools/gpu/build_trainer.sh "$B" >"$LOGS/trainer.log" 2>&1 ||
   CXXSTD=-std=c++20 bash tools/gpu/build_trainer.sh "$B" >>"$LOGS/trainer.log" 2>&1) &
  TRAINER_BUILD=$!
fi

if step_on suites; then
  for t in cuda/cuda_compiled_test cuda/reduce_kernels_test cuda/device_buffers_test \
           cuda/ipc_handles_test cuda/cuda_device_engine_test tests/cuda_library_test; do
    args=()
    [ "$t" = cuda/cuda_compiled_test ] && args=("$B/bazel-bin/cuda/reduce_kernels_objects/reduce_kernels.pic.o")
    start=$SECONDS
    stacks_after 50 "$(basename "$t")" &
    watcher=$!
    (cd "$B/bazel-bin" && timeout -k 5 100 "./$t" "${args[@]}") >"$B/test.log" 2>&1
    rc=$?
    kill "$watcher" 2>/dev/null
    cat "$B/test.log" >>"$LOGS/suites.log"
    say "$t: rc $rc, $((SECONDS - start)) s, $(grep -m1 '^\[  PASSED  \]' "$B/test.log")" \
        "$(grep -m1 '^\[  SKIPPED \] [0-9]' "$B/test.log") $(grep -m1 '^\[  FAILED  \] [0-9]' "$B/test.log")"
  done
fi

if step_on torch; then
  # Device-resident calls (cuda_ipc, the default), then staged ones (shm only).
  for transport in auto shm; do
    stacks_after 60 "torch_nccl_check|multiprocessing" &
    watcher=$!
    TESSERA_TRANSPORT=$transport LD_PRELOAD="$B/bazel-bin/nccl/cuda/libnccl.so.2" PYTHONUNBUFFERED=1 \
      timeout -k 5 90 python3 nccl/cuda/torch_nccl_check.py --ranks 2 >"$LOGS/torch_$transport.log" 2>&1
    rc=$?
    kill "$watcher" 2>/dev/null
    say "torch_nccl_check (2 ranks, TESSERA_TRANSPORT=$transport): rc $rc" \
        "$(grep -E 'passed|busbw|PASS|FAIL|Error' "$LOGS/torch_$transport.log" | head -12 | tr '\n' ';')"
  done
fi

if step_on nccl_tests; then
  REAL_NCCL=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null)
  for t in ${NCCL_TESTS:-all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall}; do
    for lib in "$B/bazel-bin/nccl/cuda" "$REAL_NCCL"; do
      [ -n "$lib" ] || continue
      echo "=== ${t}_perf with $lib" >>"$LOGS/nccl_tests.log"
      LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" timeout -k 5 40 "$B/nccl-tests/${t}_perf" \
        -b 8 -e 64M -f 8 -g 1 -c 1 -n 20 -w 5 >>"$LOGS/nccl_tests.log" 2>&1
      rc=$?
      say "${t}_perf ($( [ "$lib" = "$REAL_NCCL" ] && echo NVIDIA NCCL || echo tessera drop-in)): rc $rc," \
          "$(sed -n "/=== ${t}_perf with ${lib//\//\\/}\$/,\$p" "$LOGS/nccl_tests.log" | grep -m2 -E '# (Out of bounds|Avg bus)' | tr '\n' ' ')"
    done
  done
fi

if step_on trainer; then
  wait "$TRAINER_BUILD"
  if [ -x "$B/train_resnet" ]; then
    say "trainer built: $(grep -m1 '^g++' "$LOGS/trainer.log")"
    "$B/bazel-bin/tools/make_dataset" --out="$B/data" --classes=10 --train_per_class=100 --val_per_class=20 >>"$LOGS/trainer.log" 2>&1
    demo=(--data="$B/data" --blocks=1,1,1,1 --width=16 --crop_size=64 --val_resize=73 --batch=0:32,2:64
          --epochs=4 --warmup_epochs=1 --lr=0.4 --bucket_mb=0.25 --progress=lines --plot=0 --device=cuda:0)
    run_ranks() {  # run_ranks N OUTDIR ARGS...: N ranks of train_resnet on this host, torchrun's variables
      local n=$1 out=$2 r pid; shift 2
      local pids=()
      for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
          timeout -k 5 200 "$B/train_resnet" "$@" --out="$out" >>"$LOGS/trainer.log" 2>&1 &
        pids+=($!)
      done
      local rc=0
      for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
      return $rc
    }
    start=$SECONDS
    run_ranks 2 "$B/run_fp16" "${demo[@]}" --precision=fp16 --wire_dtype=float16
    say "trainer demo fp16, 2 ranks on one GPU: rc $?, $((SECONDS - start)) s; epochs.csv: $(tr '\n' ';' <"$B/run_fp16/epochs.csv" 2>/dev/null)"
    cp "$B/run_fp16/steps.csv" "$LOGS/demo_fp16_steps.csv" 2>/dev/null
    for p in fp16 fp32; do
      start=$SECONDS
      run_ranks 1 "$B/r50_$p" --data="$B/data" --batch=0:128 --epochs=3 --val_every=0 \
        --progress=off --plot=0 --device=cuda:0 --precision=$p
      say "ResNet-50 $p, batch 128, 3 epochs of 7 steps, 1 rank: rc $?, $((SECONDS - start)) s; last steps:" \
          "$(tail -n 3 "$B/r50_$p/steps.csv" 2>/dev/null | tr '\n' ';') header: $(head -n 1 "$B/r50_$p/steps.csv" 2>/dev/null)"
    done
  else
    say "trainer: build failed (trainer.log)"
  fi
fi
say "$(date -u +%FT%TZ) done"
