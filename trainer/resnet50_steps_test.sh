#!/bin/bash
# ResNet-50 itself (torchvision's architecture, 25,557,032 parameters, 224x224 crops)
# trains a few data-parallel steps under `mpirun -np 2` on the generated dataset,
# validates on a batch and checkpoints. The reduced models of the other tests are only
# there to keep CI short; this one proves the real network runs end to end.
# Usage: resnet50_steps_test.sh path/to/train_resnet path/to/make_dataset
set -u
TRAIN="$1"
MAKE_DATASET="$2"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/resnet50_steps.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$MAKE_DATASET" --out="$OUT/data" --classes=4 --train_per_class=8 --val_per_class=2 --min_size=160 \
  --max_size=300 || { echo "FAIL: make_dataset"; exit 1; }

# Global batch 4 (2 per rank), 3 steps, one validation batch of 2 per rank.
timeout -k 5 240 mpirun --allow-run-as-root --oversubscribe -np 2 "$TRAIN" --data="$OUT/data" \
  --batch=4 --epochs=1 --max_steps_per_epoch=3 --warmup_epochs=0 --val_batch=2 --max_val_batches=1 \
  --progress=lines --plot=0 --out="$OUT/run" >"$OUT/log" 2>&1
rc=$?
cat "$OUT/log"
[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
# torchvision's resnet50(num_classes=4): 25,557,032 - 996 x 2,049 (the fc rows of the
# classes it does not have) = 23,516,228 parameters.
grep -q "2 rank(s), 23516228 parameters" "$OUT/log" || fail "not ResNet-50 with 4 classes on 2 ranks"
grep -q "blocks=3,4,6,3 width=64 " "$OUT/log" || fail "not the ResNet-50 layout"
echo "--- steps.csv"
cat "$OUT/run/steps.csv"
[ "$(wc -l <"$OUT/run/steps.csv")" -eq 4 ] || fail "steps.csv does not hold 3 steps"
awk -F, 'NR > 1 && !($8 > 0 && $8 < 20) { bad = 1 } END { exit bad }' "$OUT/run/steps.csv" ||
  fail "a step's loss is not finite and positive"
awk -F, 'NR == 2 { exit !($4 >= 0 && $6 == 4) }' "$OUT/run/epochs.csv" ||
  fail "validation did not evaluate 4 images"
[ -s "$OUT/run/checkpoint.pt" ] || fail "no checkpoint"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
