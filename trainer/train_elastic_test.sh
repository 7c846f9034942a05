#!/bin/bash
# --elastic under a real `mpirun --enable-recovery -np 4`: one of the 4 ranks is killed
# (SIGKILL, from outside, by kill_rank.sh) in the middle of epoch 2 of 3, and the run
# must finish on the 3 survivors. Two runs on a generated dataset of 192 images (a tiny
# ResNet, 64x64 crops, global batch 16, so 12 steps per epoch):
#
#  a. rank 2 is killed; the global batch is kept (16, shared out 6/5/5);
#  b. rank 0 is killed (the rank that writes the metrics: old rank 1 takes over), with
#     --staleness=1 (the gradient in flight is kept or the step redone) and the per-rank
#     batch kept: the global batch becomes 12 and the rate follows (x 0.75, linear
#     scaling); the epoch's last step reads the 4 images left;
#  c. rank 1 is stopped (SIGSTOP: it stalls), TESSERA_TIMEOUT_MS=3000: the survivors see
#     the timeout, leave it out and finish; then the test kills it, for mpirun waits for
#     every process it started.
#
# Checks, from what the run wrote:
#  - mpirun and the survivors exit 0, the log names the lost rank and the new world;
#  - events.csv: a failure on 4 ranks, the shrink to 3 naming the lost rank, the first
#    step on 3 ranks;
#  - steps.csv: global steps 1, 2, 3, ... with no gap or repeat; the epoch of the kill has
#    steps on 4 ranks and on 3; every epoch read each of the 192 images exactly once
#    (count, sum and sum of squares of the image numbers the ranks read, over the
#    epoch's steps, against 0..191), before and after the change;
#  - epochs.csv: all 3 epochs, each validated on the 32 val images.
#
# With a 4th argument, tools/cluster/cluster.sh (train_elastic_cluster_test): run a only,
# on 4 emulated hosts of one rank each (network namespaces, TCP between them), launched
# by `cluster.sh run` (mpirun with remote daemons) with `--mca orte_enable_recovery 1`.
# Usage: train_elastic_test.sh path/to/train_resnet path/to/make_dataset path/to/kill_rank.sh [path/to/cluster.sh]
set -u
TRAIN="$(realpath "$1")"
MAKE_DATASET="$2"
KILL_RANK="$3"
CLUSTER="${4:-}"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train_elastic.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
export LIMIT_S=100     # kill_rank.sh
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$MAKE_DATASET" --out="$OUT/data" --classes=4 --train_per_class=48 --val_per_class=8 --min_size=40 \
  --max_size=64 || { echo "FAIL: make_dataset"; exit 1; }
IMAGES=192

NAME="te$$"  # the cluster's
if [ -n "$CLUSTER" ]; then
  trap 'bash "$CLUSTER" down --name "$NAME" >/dev/null 2>&1' EXIT
  bash "$CLUSTER" up --hosts 4 --rate 1gbit --name "$NAME" >/dev/null || { echo "FAIL: cluster.sh up"; exit 1; }
fi

# launch PROGRAM ARGS...: 4 ranks that go on when one of them dies, for 110 s at most.
launch() {
  if [ -n "$CLUSTER" ]; then
    bash "$CLUSTER" run --name "$NAME" --hosts 4 --ranks-per-host 1 --timeout 110 --mca orte_enable_recovery 1 \
      -x TESSERA_TIMEOUT_MS -- "$@"
  else
    timeout -k 5 110 mpirun --allow-run-as-root --oversubscribe --enable-recovery -np 4 -x TESSERA_TIMEOUT_MS "$@"
  fi
}

COMMON=(--data="$OUT/data" --blocks=1,1,1,1 --width=16 --crop_size=64 --val_resize=73 --batch=16 --epochs=3
  --warmup_epochs=0 --progress=lines --plot=0 --decode_threads=1 --elastic=1)

# run NAME RANK SIGNAL TIMEOUT_MS FLAGS...: trains with 4 ranks, rank RANK sent SIGNAL
# (KILL or STOP) after global step 14 (epoch 2, step 2). Log in $OUT/NAME.log, metrics
# in $OUT/NAME/.
run() {
  local name="$1" victim="$2" signal="$3" timeout_ms="$4"
  shift 4
  "$KILL_RANK" "$OUT/$name" "$victim" 14 "$signal" >"$OUT/$name.kill" 2>&1 &
  local killer=$!
  TESSERA_TIMEOUT_MS="$timeout_ms" launch "$TRAIN" "${COMMON[@]}" --out="$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 &
  local launcher=$!
  wait "$killer"
  if [ "$signal" = STOP ]; then  # once the survivors are done, end the stalled rank
    for _ in $(seq 1 900); do grep -q "summary over" "$OUT/$name.log" && break; sleep 0.1; done
    kill -KILL "$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$OUT/$name.kill")"
  fi
  wait "$launcher"
  local rc=$?
  echo "--- $name (mpirun exit $rc)"
  cat "$OUT/$name.kill"
  grep "^train_resnet" "$OUT/$name.log" | cut -c1-240
  [ "$rc" -eq 0 ] || fail "$name: mpirun exited $rc"
  grep -q "^train_resnet: lost rank(s) $victim; going on with 3 ranks" "$OUT/$name.log" ||
    fail "$name: the log does not say that rank $victim was lost and 3 ranks went on"
  check_events "$name" "$victim"
  check_steps "$name"
  [ "$(wc -l <"$OUT/$name/epochs.csv")" -eq 4 ] || fail "$name: epochs.csv does not have 3 epochs"
  awk -F, 'NR > 1 && $6 != 32 { bad = 1 } END { exit bad }' "$OUT/$name/epochs.csv" ||
    fail "$name: an epoch was not validated on the 32 val images"
}

check_events() {
  local name="$1" victim="$2" events="$OUT/$1/events.csv"
  echo "--- $name: events.csv"
  cut -c1-160 "$events"
  grep -q "^[0-9.]*,[0-9]*,1,failure,4," "$events" || fail "$name: no failure on 4 ranks in epoch 2 in events.csv"
  grep -q "^[0-9.]*,[0-9]*,1,shrunk,3,lost ranks $victim;" "$events" || fail "$name: no shrink to 3 without rank $victim"
  grep -q "^[0-9.]*,[0-9]*,1,first_step,3," "$events" || fail "$name: no first step on 3 ranks in events.csv"
}

# Steps numbered without gap or repeat; each epoch reads every image once; the epoch of
# the kill has steps on both worlds.
check_steps() {
  local name="$1" steps="$OUT/$1/steps.csv"
  awk -F, 'NR > 1 && $1 != NR - 1 { print "row " NR ": global step " $1; bad = 1 } END { exit bad }' "$steps" ||
    fail "$name: global steps have a gap or a repeat"
  echo "--- $name: per epoch: images read, sum and sum of squares of their numbers, worlds"
  awk -F, -v n="$IMAGES" 'NR > 1 {
      count[$2] += $6; sum[$2] += $20; squares[$2] += $21; worlds[$2] = worlds[$2] " " $19
    }
    END {
      want_sum = n * (n - 1) / 2; want_squares = (n - 1) * n * (2 * n - 1) / 6
      for (e = 0; e < 3; e++) {
        print "epoch " e + 1 ": " count[e] " images, sum " sum[e] ", squares " squares[e] ", ranks" worlds[e]
        if (count[e] != n || sum[e] != want_sum || squares[e] != want_squares) bad = 1
      }
      exit bad
    }' "$steps" || fail "$name: an epoch did not read each of the $IMAGES images exactly once"
  awk -F, 'NR > 1 && $2 == 1 { seen[$19] = 1 } END { exit !(seen[4] && seen[3]) }' "$steps" ||
    fail "$name: epoch 2 does not have steps on 4 ranks and on 3 (the kill did not land mid-epoch)"
  awk -F, 'NR > 1 && $2 == 2 && $19 != 3 { bad = 1 } END { exit bad }' "$steps" || fail "$name: epoch 3 not on 3 ranks"
}

run a 2 KILL 30000 --lr=0.4 --elastic_batch=global
awk -F, 'NR > 1 && $5 != 16 { bad = 1 } END { exit bad }' "$OUT/a/steps.csv" || fail "a: the global batch changed"
if [ -n "$CLUSTER" ]; then  # the other runs are launched alike
  [ "$failures" -eq 0 ] && { rm -rf "$OUT"; echo "PASS"; exit 0; }
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi

run b 0 KILL 30000 --lr=0.1 --elastic_batch=rank --staleness=1
# Global batch 16 on 4 ranks, 12 on 3; the rate follows the batch.
awk -F, 'NR > 1 { batch[$19] = $5; rate[$19] = $7 }
  END { exit !(batch[4] == 16 && batch[3] == 12 && rate[3] / rate[4] > 0.7499 && rate[3] / rate[4] < 0.7501) }' \
  "$OUT/b/steps.csv" || fail "b: global batch and rate are not 16 -> 12 and x 0.75"

run c 1 STOP 3000 --lr=0.1
grep -q "^[0-9.]*,[0-9]*,1,failure,4,.*(timeout)" "$OUT/c/events.csv" || fail "c: the stall was not seen as a timeout"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
