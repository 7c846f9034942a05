#!/bin/bash
# Runs trainer/compare_ddp.sh on a tiny budget (ResNet-50 at 64x64, global batch 4,
# 4 steps, 2 ranks) and checks that the trainer (float32 and bfloat16 wire) and the
# PyTorch DDP baseline each report a throughput.
# Usage: compare_ddp_test.sh path/to/train_resnet
set -u
TRAIN="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
LOG="$(mktemp "${TEST_TMPDIR:-/tmp}/compare_ddp_test.XXXXXX")"
bash trainer/compare_ddp.sh --train="$TRAIN" --batch=4 --steps=4 --crop_size=64 --run_limit=90 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
failures=0
for pattern in "tessera (wire float32): summary over 2 steady steps: [0-9.]* images/s" \
  "tessera (wire bfloat16): summary over 2 steady steps: [0-9.]* images/s" \
  "ddp_baseline: 2 rank(s), batch 4 (2 per rank), bf16, gloo: [0-9.]* images/s"; do
  grep -q "$pattern" "$LOG" || { echo "FAIL: no line matching '$pattern'"; failures=$((failures + 1)); }
done
[ "$status" -eq 0 ] || { echo "FAIL: compare_ddp.sh exited $status"; failures=$((failures + 1)); }
rm -f "$LOG"
[ "$failures" -eq 0 ] && echo "PASS"
exit "$failures"
