#!/bin/bash
# The elastic demo: the README's demo (10 classes of generated stripes, a reduced ResNet,
# 4 epochs, global batch 32 then 64) on RANKS ranks under
# `mpirun --enable-recovery`, twice in one session:
#  - undisturbed;
#  - with --elastic, rank VICTIM killed (SIGKILL, or SIGSTOP: a stall) once the run has
#    logged global step KILL_AFTER (by default in the middle of epoch 2).
# Prints both runs' epochs (train loss, val top-1), the events of the disturbed run, the
# time from the kill to the first step completed on the survivors (events.csv against
# the moment of the kill), and the final top-1 of both.
#
#   bash trainer/elastic_demo.sh [--ranks=4] [--victim=2] [--kill_after=46] [--signal=KILL]
#       [--elastic_batch=global] [--staleness=0] [--timeout_ms=30000]
#       [--train=bazel-bin/trainer/train_resnet] [--make_dataset=bazel-bin/tools/make_dataset]
#
# With --signal=STOP the stalled rank is killed once the survivors are done (mpirun
# waits for every process it started). Take `flock -x /work/.machine.lock` for figures
# you report.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RANKS=4 VICTIM=2 KILL_AFTER=46 SIGNAL=KILL KEEP=global STALENESS=0 TIMEOUT_MS=30000
TRAIN=bazel-bin/trainer/train_resnet MAKE_DATASET=bazel-bin/tools/make_dataset
for arg in "$@"; do
  case "$arg" in
    --ranks=*) RANKS="${arg#*=}" ;;
    --victim=*) VICTIM="${arg#*=}" ;;
    --kill_after=*) KILL_AFTER="${arg#*=}" ;;
    --signal=*) SIGNAL="${arg#*=}" ;;
    --elastic_batch=*) KEEP="${arg#*=}" ;;
    --staleness=*) STALENESS="${arg#*=}" ;;
    --timeout_ms=*) TIMEOUT_MS="${arg#*=}" ;;
    --train=*) TRAIN="${arg#*=}" ;;
    --make_dataset=*) MAKE_DATASET="${arg#*=}" ;;
    *) echo "elastic_demo.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
for binary in "$TRAIN" "$MAKE_DATASET"; do
  [ -x "$binary" ] || { echo "elastic_demo.sh: $binary is missing (bazel build //trainer:train_resnet //tools:make_dataset)" >&2; exit 2; }
done
OUT="$(mktemp -d /tmp/elastic_demo.XXXXXX)"
export TMPDIR="$OUT"
trap 'rm -rf "$OUT"' EXIT
"$MAKE_DATASET" --out="$OUT/data" --classes=10 --train_per_class=100 --val_per_class=20 --corrupt=3 >/dev/null || exit 1
DEMO=(--data="$OUT/data" --blocks=1,1,1,1 --width=16 --crop_size=64 --val_resize=73 --batch=0:32,2:64 --epochs=4
  --warmup_epochs=1 --lr=0.4 --wire_dtype=bfloat16 --bucket_mb=0.25 --progress=lines --plot=0
  --staleness="$STALENESS" --elastic=1 --elastic_batch="$KEEP")
MPIRUN=(timeout -k 5 900 mpirun --allow-run-as-root --oversubscribe --enable-recovery -np "$RANKS"
  -x TESSERA_TIMEOUT_MS="$TIMEOUT_MS")

epochs() { awk -F, 'NR > 1 { printf "  epoch %d: train loss %.3f, val top-1 %.1f%%\n", $1 + 1, $2, 100 * $4 }' "$1"; }

echo "== undisturbed, $RANKS ranks"
"${MPIRUN[@]}" "$TRAIN" "${DEMO[@]}" --out="$OUT/calm" >"$OUT/calm.log" 2>&1 || { tail -n 20 "$OUT/calm.log"; exit 1; }
epochs "$OUT/calm/epochs.csv"

echo "== rank $VICTIM of $RANKS sent SIG$SIGNAL after global step $KILL_AFTER"
trainer/kill_rank.sh "$OUT/hit" "$VICTIM" "$KILL_AFTER" "$SIGNAL" >"$OUT/kill.log" 2>&1 &
killer=$!
"${MPIRUN[@]}" "$TRAIN" "${DEMO[@]}" --out="$OUT/hit" >"$OUT/hit.log" 2>&1 &
launcher=$!
wait "$killer"
if [ "$SIGNAL" = STOP ]; then
  until grep -q "summary over" "$OUT/hit.log" || ! kill -0 "$launcher" 2>/dev/null; do sleep 0.2; done
  kill -KILL "$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$OUT/kill.log")"
fi
wait "$launcher" || echo "(mpirun exited $?)"
cat "$OUT/kill.log"
grep "^train_resnet: \(lost\|first\)" "$OUT/hit.log"
epochs "$OUT/hit/epochs.csv"
echo "events.csv:"
cut -c1-140 "$OUT/hit/events.csv"
killed=$(sed -n 's/.* at \([0-9.]*\)$/\1/p' "$OUT/kill.log")
awk -F, -v killed="$killed" '
  $4 == "failure" && !seen { seen = $1 } $4 == "first_step" && !first { first = $1 }
  END { printf "from the SIG to the failure seen: %.2f s; to the first step on the survivors: %.2f s\n",
               seen - killed, first - killed }' "$OUT/hit/events.csv"
printf "final top-1: undisturbed %.1f%%, with rank %s lost %.1f%%\n" \
  "$(tail -n 1 "$OUT/calm/epochs.csv" | awk -F, '{ print 100 * $4 }')" "$VICTIM" \
  "$(tail -n 1 "$OUT/hit/epochs.csv" | awk -F, '{ print 100 * $4 }')"
