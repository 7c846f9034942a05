#!/bin/bash
# The demo of docs/trainer.md as a test: train_resnet under `mpirun -np 2` on the
# generated 10-class dataset (a reduced ResNet: one bottleneck per stage, width 16,
# 64x64 crops, batch 32 then 64 from epoch 3, bfloat16 gradients on the wire).
# Passes when the loss falls (last epoch's mean < 0.7 x the first steps' mean), the
# final validation top-1 is at least 60% (chance is 10%), and the metrics CSVs and the
# PNG plot are written.
# Usage: train_demo_test.sh path/to/train_resnet path/to/make_dataset
set -u
TRAIN="$1"
MAKE_DATASET="$2"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train_demo.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$MAKE_DATASET" --out="$OUT/data" --classes=10 --train_per_class=100 --val_per_class=20 --corrupt=3 ||
  { echo "FAIL: make_dataset"; exit 1; }

timeout -k 5 240 mpirun --allow-run-as-root --oversubscribe -np 2 "$TRAIN" --data="$OUT/data" \
  --blocks=1,1,1,1 --width=16 --crop_size=64 --val_resize=73 --batch=0:32,2:64 --epochs=4 \
  --warmup_epochs=1 --lr=0.4 --wire_dtype=bfloat16 --bucket_mb=0.25 --progress=lines \
  --out="$OUT/run" >"$OUT/log" 2>&1
rc=$?
cat "$OUT/log"
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"

echo "--- epochs.csv"
cat "$OUT/run/epochs.csv"
# Mean loss of the first 5 steps against the last epoch's mean.
first=$(awk -F, 'NR > 1 && NR <= 6 { s += $8; n++ } END { if (n) printf "%.4f", s / n }' "$OUT/run/steps.csv")
last=$(tail -n 1 "$OUT/run/epochs.csv" | cut -d, -f2)
top1=$(tail -n 1 "$OUT/run/epochs.csv" | cut -d, -f4)
echo "first steps' loss $first, last epoch's loss $last, final top-1 $top1 (chance 0.10)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < 0.7 * a) }' || fail "the loss did not fall enough"
awk -v t="$top1" 'BEGIN { exit !(t >= 0.60) }' || fail "final top-1 $top1 is below 0.60"
[ "$(wc -l <"$OUT/run/epochs.csv")" -eq 5 ] || fail "epochs.csv does not have 4 epochs"
head -c 8 "$OUT/run/metrics.png" | od -An -tx1 | grep -q "89 50 4e 47" || fail "metrics.png is not a PNG"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
