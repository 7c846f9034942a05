#!/bin/bash
# Throughput of train_resnet (tessera) against PyTorch DDP (gloo) on this machine, in one
# session: the same model (torchvision's ResNet-50 layout), global batch, precision
# (bfloat16 autocast), synthetic data and rank count, run alternately ROUNDS times so
# that both see the same machine load. Prints each run's images/s and, for the trainer,
# the split of a step (forward/backward, exposed allreduce) from its own timing.
#
#   bash trainer/compare_ddp.sh [--ranks=2] [--batch=16] [--steps=8] [--rounds=1]
#                               [--crop_size=224] [--train=bazel-bin/trainer/train_resnet]
#                               [--run_limit=3600]
#
# The first 2 steps of every run are left out of its images/s (both tools). Each run is
# killed after --run_limit seconds.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RANKS=2 BATCH=16 STEPS=8 ROUNDS=1 CROP=224 TRAIN=bazel-bin/trainer/train_resnet RUN_LIMIT=3600
for arg in "$@"; do
  case "$arg" in
    --ranks=*) RANKS="${arg#*=}" ;;
    --batch=*) BATCH="${arg#*=}" ;;
    --steps=*) STEPS="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --crop_size=*) CROP="${arg#*=}" ;;
    --train=*) TRAIN="${arg#*=}" ;;
    --run_limit=*) RUN_LIMIT="${arg#*=}" ;;
    *) echo "compare_ddp.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
BASELINE="trainer/ddp_baseline.py"
[ -x "$TRAIN" ] || { echo "compare_ddp.sh: $TRAIN is missing (bazel build //trainer:train_resnet)" >&2; exit 2; }
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/compare_ddp.XXXXXX")"
export TMPDIR="$OUT"
MPIRUN=(timeout -k 5 "$RUN_LIMIT" mpirun --allow-run-as-root --oversubscribe -np "$RANKS")
status=0

echo "ResNet-50, $RANKS ranks, global batch $BATCH, ${CROP}x$CROP, bf16 autocast, synthetic data, $STEPS steps"
for ((round = 1; round <= ROUNDS; round++)); do
  for wire in float32 bfloat16; do
    "${MPIRUN[@]}" "$TRAIN" --synthetic --synthetic_classes=1000 --crop_size="$CROP" \
      --val_resize="$CROP" --batch="$BATCH" --epochs=1 --max_steps_per_epoch="$STEPS" --val_every=0 \
      --wire_dtype="$wire" --resume=0 --plot=0 --progress=lines --out="$OUT/tessera_$wire" \
      >"$OUT/tessera_$wire.log" 2>&1 || { echo "train_resnet failed:"; cat "$OUT/tessera_$wire.log"; status=1; }
    summary=$(grep "summary over" "$OUT/tessera_$wire.log" | sed 's/^train_resnet: //')
    echo "round $round  tessera (wire $wire): $summary"
    echo "tessera_$wire $(echo "$summary" | sed -n 's/.*steps: \([0-9.]*\) images\/s.*/\1/p')" >>"$OUT/rates"
  done
  MASTER_PORT=$((29500 + RANDOM % 1000)) "${MPIRUN[@]}" -x MASTER_PORT /usr/bin/python3 "$BASELINE" \
    --batch="$BATCH" --steps="$STEPS" --warmup=2 --crop_size="$CROP" >"$OUT/ddp.log" 2>&1 ||
    { echo "ddp_baseline failed:"; cat "$OUT/ddp.log"; status=1; }
  echo "round $round  $(grep "^ddp_baseline:" "$OUT/ddp.log")"
  echo "ddp_gloo $(sed -n 's/^ddp_baseline:.*gloo: \([0-9.]*\) images\/s.*/\1/p' "$OUT/ddp.log")" >>"$OUT/rates"
done
# Other load on the machine only ever slows a run down: the best round of each tool is
# the least disturbed one.
echo "best of $ROUNDS round(s), images/s:"
awk '$2 != "" { if (!($1 in best) || $2 > best[$1]) best[$1] = $2 }
     END { for (k in best) printf "  %-18s %8.2f\n", k, best[k];
           if (best["ddp_gloo"] > 0) printf "  tessera (float32 wire) / DDP = %.2f\n", best["tessera_float32"] / best["ddp_gloo"] }' \
  "$OUT/rates" | sort
rm -rf "$OUT"
exit "$status"
