#!/bin/bash
# Exact checkpoint/resume, corrupt-file counting and dataset errors of train_resnet, under
# a real `mpirun -np 2` on a generated dataset (a tiny ResNet, 32x32 crops).
#
#  1. Run A trains 3 epochs uninterrupted (batch 16 in epoch 1, 32 after: the
#     batch-size schedule changes mid-run).
#  2. Run B is stopped at global step 4 (inside epoch 1), resumed and stopped again at
#     step 8 (inside epoch 2, after the batch change), then resumed to the end. Each
#     stop is a separate mpirun, so everything goes through the checkpoint file.
#  3. Per step, the loss, learning rate and image count of B must equal A's exactly
#     (the CSV keeps 9 significant digits, the full float32 precision of the loss), and
#     so must every epoch's validation loss, top-1 and top-5.
#  4. The 4 corrupt files of the dataset are skipped and counted: 4 per epoch.
#  5. Dynamic loss scaling skips overflowing steps and adapts the scale.
#  6. Missing or malformed dataset paths and bad flags fail with a clear message.
# Flags after the two paths go to every run: with --staleness=1 (train_resume_stale_test)
# the checkpoint also carries the reduced gradient that waits to be applied, and the
# loss scaler sees each overflow one step later.
# Usage: train_resume_test.sh path/to/train_resnet path/to/make_dataset [FLAG...]
set -u
TRAIN="$1"
MAKE_DATASET="$2"
shift 2
EXTRA=("$@")
LAG=0   # steps between a step's forward and the update that applies its gradient
for flag in "${EXTRA[@]}"; do [ "$flag" = "--staleness=1" ] && LAG=1; done
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train_resume.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
RUN_LIMIT_S=100
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# 4 classes x 23 images + 4 corrupt files = 96 files: batches 16 and 32 read every
# file in every epoch.
"$MAKE_DATASET" --out="$OUT/data" --classes=4 --train_per_class=23 --val_per_class=6 --min_size=40 \
  --max_size=64 --corrupt=4 || { echo "FAIL: make_dataset"; exit 1; }

COMMON=(--data="$OUT/data" --blocks=1,1,1,1 --width=8 --crop_size=32 --val_resize=36 --batch=0:16,1:32
  --epochs=3 --warmup_epochs=1 --lr=0.4 --progress=lines --plot=0 --decode_threads=1 "${EXTRA[@]}")

# train NAME ARGS...: mpirun -np 2 train_resnet; log in $OUT/NAME.log.
train() {
  local name="$1"
  shift
  timeout -k 5 "$RUN_LIMIT_S" mpirun --allow-run-as-root --oversubscribe -np 2 "$TRAIN" "${COMMON[@]}" "$@" \
    >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "--- $name (exit $rc)"
  tail -n 6 "$OUT/$name.log"
  [ "$rc" -eq 0 ] || fail "$name: mpirun exited $rc"
}

train a --out="$OUT/a"
train b1 --out="$OUT/b" --stop_after_steps=4
train b2 --out="$OUT/b" --stop_after_steps=8
train b3 --out="$OUT/b"
grep -q "resuming from .* at epoch 1, step 4 (global step 4)" "$OUT/b2.log" || fail "b2 did not resume at step 4"
grep -q "resuming from .* at epoch 2, step 2 (global step 8)" "$OUT/b3.log" || fail "b3 did not resume at step 8"

# global_step, epoch, step, global_batch, images, lr, loss of every step.
steps() { cut -d, -f1,2,3,5,6,7,8 "$1/steps.csv"; }
# epoch, train_loss, val_loss, top1, top5, val_images, skipped_total.
epochs() { cut -d, -f1,2,3,4,5,6,9 "$1/epochs.csv"; }
[ "$(steps "$OUT/a" | wc -l)" -eq 13 ] || fail "run a logged $(($(steps "$OUT/a" | wc -l) - 1)) steps, expected 12"
if ! diff <(steps "$OUT/a") <(steps "$OUT/b") >"$OUT/steps.diff"; then
  fail "resumed run's steps differ from the uninterrupted run's"
  cat "$OUT/steps.diff"
fi
if ! diff <(epochs "$OUT/a") <(epochs "$OUT/b") >"$OUT/epochs.diff"; then
  fail "resumed run's epochs differ from the uninterrupted run's"
  cat "$OUT/epochs.diff"
fi
echo "--- steps of the uninterrupted run"
steps "$OUT/a"
echo "--- epochs"
epochs "$OUT/a"

# Corrupt files: 4 per epoch, 12 after 3 epochs, and named in the log.
skipped=$(tail -n 1 "$OUT/a/epochs.csv" | cut -d, -f9)
[ "$skipped" = "12" ] || fail "skipped_total after 3 epochs is '$skipped', expected 12"
grep -q "skipped .*corrupt_0.JPEG: corrupt JPEG" "$OUT/a.log" || fail "the truncated JPEG was not reported"
grep -q "skipped .*corrupt_1.JPEG: not a JPEG" "$OUT/a.log" || fail "the text file was not reported"
grep -q "skipped .*corrupt_2.JPEG: empty file" "$OUT/a.log" || fail "the empty file was not reported"

# Dynamic loss scaling (the float16 path of CUDA, run here on CPU): a scale of 1e39
# overflows float32, so the first steps are skipped and the scale halves until it
# fits; later steps apply and the scale doubles after every 2 clean steps. With
# staleness 1 the overflow of step 1 is found when step 2 applies its gradient, so the
# halved scale shows one row later.
train scaled --out="$OUT/scaled" --epochs=1 --loss_scaling=1 --initial_loss_scale=1e39 \
  --loss_scale_growth_interval=2
echo "--- loss_scale, applied, loss per step"
cut -d, -f1,8,9,10 "$OUT/scaled/steps.csv"
awk -F, 'NR == 2 { exit !($10 == 0) }' "$OUT/scaled/steps.csv" || fail "the overflowing first step was applied"
awk -F, -v row=$((3 + LAG)) 'NR == row { exit !($9 == 5e+38 || $9 == 5e38) }' "$OUT/scaled/steps.csv" ||
  fail "the loss scale did not halve after the overflow"
awk -F, 'NR > 1 && $10 == 1 { n++ } END { exit !(n >= 2) }' "$OUT/scaled/steps.csv" ||
  fail "no step was applied once the scale fitted"
awk -F, 'NR > 1 && $10 == 1 && !($8 > 0 && $8 < 20) { bad = 1 } END { exit bad }' "$OUT/scaled/steps.csv" ||
  fail "an applied step has a non-finite loss"

# Dataset path errors (one process) and bad flags.
expect_error() {
  local want_rc="$1" pattern="$2"
  shift 2
  timeout -k 5 120 "$TRAIN" "$@" --out="$OUT/err" >"$OUT/err.log" 2>&1
  local rc=$?
  [ "$rc" -eq "$want_rc" ] || fail "train_resnet $* exited $rc, expected $want_rc"
  grep -q -- "$pattern" "$OUT/err.log" || { fail "train_resnet $*: no '$pattern' in:"; cat "$OUT/err.log"; }
}
expect_error 1 "dataset path $OUT/missing does not exist" --data="$OUT/missing"
expect_error 1 "expected the ImageNet layout .*$OUT/data/train/train does not exist" --data="$OUT/data/train"
mkdir -p "$OUT/flat/train" && cp "$OUT/data/train/n01000000/n01000000_0.JPEG" "$OUT/flat/train/"
expect_error 1 "not in a class directory" --data="$OUT/flat"
expect_error 2 "no dataset: pass --data" --epochs=1
expect_error 2 "unknown flag --bogus" --data="$OUT/data" --bogus=1

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
