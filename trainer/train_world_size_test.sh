#!/bin/bash
# train_resnet launched alone and under `mpirun -np 2` trains the same model: the images
# of a global step do not depend on the number of ranks, the loss is averaged over the
# global step's images (corrupt files included in neither), and the gradients are
# averaged exactly. Without batch norm (whose statistics are per rank by design) and in
# float32, the two runs' per-step losses, rates, image counts and validation results
# must agree within float32 summation-order noise: relative 1e-5 over 2 epochs
# (measured: about 1e-7).
# Usage: train_world_size_test.sh path/to/train_resnet path/to/make_dataset
set -u
TRAIN="$1"
MAKE_DATASET="$2"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train_world_size.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$MAKE_DATASET" --out="$OUT/data" --classes=4 --train_per_class=23 --val_per_class=6 --min_size=40 \
  --max_size=64 --corrupt=4 >/dev/null || { echo "FAIL: make_dataset"; exit 1; }

COMMON=(--data="$OUT/data" --blocks=1,1,1,1 --width=8 --crop_size=32 --val_resize=36 --batch=16 --epochs=2
  --warmup_epochs=1 --lr=0.4 --batch_norm=0 --precision=fp32 --bucket_mb=0.05 --progress=off --plot=0
  --decode_threads=1)

timeout -k 5 120 "$TRAIN" "${COMMON[@]}" --out="$OUT/one" >"$OUT/one.log" 2>&1 || fail "a single process exited $?"
timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$TRAIN" "${COMMON[@]}" --out="$OUT/two" \
  >"$OUT/two.log" 2>&1 || fail "mpirun -np 2 exited $?"
tail -n 3 "$OUT/one.log" "$OUT/two.log"
grep -q "train_resnet: 1 rank(s)" "$OUT/one.log" || fail "the single process did not run as 1 rank"
grep -q "train_resnet: 2 rank(s)" "$OUT/two.log" || fail "mpirun -np 2 did not run as 2 ranks"

# Columns: steps.csv global_step(1) images(6) lr(7) loss(8); epochs.csv val_loss(3) top1(4) top5(5) val_images(6).
echo "--- global_step, images, lr, loss: 1 rank | 2 ranks"
paste -d'|' <(cut -d, -f1,6,7,8 "$OUT/one/steps.csv") <(cut -d, -f1,6,7,8 "$OUT/two/steps.csv")
[ "$(wc -l <"$OUT/one/steps.csv")" -eq 13 ] || fail "expected 12 steps"
# n: the columns of a row; 20, 21: sum and sum of squares of the numbers of the images read.
columns=$(head -n 1 "$OUT/one/steps.csv" | awk -F, '{ print NF }')
paste -d, <(tail -n +2 "$OUT/one/steps.csv") <(tail -n +2 "$OUT/two/steps.csv") | awk -F, -v n="$columns" '
  function off(a, b) { d = a - b; if (d < 0) d = -d; s = (a < 0 ? -a : a); return d > 1e-5 * s + 1e-7 }
  $6 != $(n + 6) { print "step " $1 ": images " $6 " vs " $(n + 6); bad = 1 }
  $20 != $(n + 20) || $21 != $(n + 21) { print "step " $1 ": other images read"; bad = 1 }
  off($7, $(n + 7)) || off($8, $(n + 8)) { print "step " $1 ": lr/loss " $7 "/" $8 " vs " $(n + 7) "/" $(n + 8); bad = 1 }
  END { exit bad }' || fail "per-step losses differ between 1 and 2 ranks"
echo "--- epochs: 1 rank | 2 ranks"
paste -d'|' <(cut -d, -f1-6 "$OUT/one/epochs.csv") <(cut -d, -f1-6 "$OUT/two/epochs.csv")
paste -d, <(tail -n +2 "$OUT/one/epochs.csv") <(tail -n +2 "$OUT/two/epochs.csv") | awk -F, -v n=9 '
  function off(a, b) { d = a - b; if (d < 0) d = -d; s = (a < 0 ? -a : a); return d > 1e-5 * s + 1e-7 }
  off($2, $(n + 2)) || off($3, $(n + 3)) || $4 != $(n + 4) || $5 != $(n + 5) || $6 != $(n + 6) { bad = 1 }
  END { exit bad }' || fail "epoch results differ between 1 and 2 ranks"
[ "$(wc -l <"$OUT/one/epochs.csv")" -eq 3 ] || fail "expected 2 epochs"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
