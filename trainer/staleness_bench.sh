#!/bin/bash
# Synchronous against double-buffered (--staleness=1) data-parallel training of ResNet-50
# on 2 emulated hosts (tools/cluster, docs/cluster.md), one rank each, with links slow
# enough that the gradient allreduce takes about as long as a step's forward and backward.
# Both run alternately ROUNDS times on the same cluster, in one session. Prints each
# run's step time and the share of it during which communication was exposed (the
# trainer's own timing: steps.csv and its summary line), over the steady steps (all but
# the first 2).
#
#   flock -x /work/.machine.lock bash trainer/staleness_bench.sh [--rate=250mbit]
#       [--batch=16] [--steps=8] [--rounds=2] [--wire_dtype=float32]
#       [--train=bazel-bin/trainer/train_resnet] [--run_limit=900]
#
# ResNet-50 at 224x224, bf16 autocast, synthetic data, one torch thread per rank (the
# two emulated hosts share this machine's 2 cores). Needs root (network namespaces).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RATE=250mbit BATCH=16 STEPS=8 ROUNDS=2 WIRE=float32 TRAIN=bazel-bin/trainer/train_resnet RUN_LIMIT=900
for arg in "$@"; do
  case "$arg" in
    --rate=*) RATE="${arg#*=}" ;;
    --batch=*) BATCH="${arg#*=}" ;;
    --steps=*) STEPS="${arg#*=}" ;;
    --rounds=*) ROUNDS="${arg#*=}" ;;
    --wire_dtype=*) WIRE="${arg#*=}" ;;
    --train=*) TRAIN="${arg#*=}" ;;
    --run_limit=*) RUN_LIMIT="${arg#*=}" ;;
    *) echo "staleness_bench.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -x "$TRAIN" ] || { echo "staleness_bench.sh: $TRAIN is missing (bazel build //trainer:train_resnet)" >&2; exit 2; }
TRAIN="$(realpath "$TRAIN")"
CLUSTER=tools/cluster/cluster.sh
NAME="sb$$"
OUT="$(mktemp -d /tmp/staleness_bench.XXXXXX)"
trap 'bash "$CLUSTER" down --name "$NAME" >/dev/null 2>&1; rm -rf "$OUT"' EXIT
bash "$CLUSTER" up --hosts 2 --rate "$RATE" --name "$NAME" >/dev/null || exit 1
echo "2 emulated hosts x 1 rank, links shaped to $RATE; $(bash "$CLUSTER" measure --name "$NAME" --seconds 3 | tail -n 1)"
echo "ResNet-50, global batch $BATCH, 224x224, bf16 autocast, synthetic data, wire $WIRE, $STEPS steps per run"
status=0
for ((round = 1; round <= ROUNDS; round++)); do
  for staleness in 0 1; do
    run="$OUT/r${round}_s$staleness"
    bash "$CLUSTER" run --name "$NAME" --hosts 2 --ranks-per-host 1 --timeout "$RUN_LIMIT" -- \
      "$TRAIN" --synthetic --synthetic_classes=1000 --batch="$BATCH" --epochs=1 --max_steps_per_epoch="$STEPS" \
      --val_every=0 --wire_dtype="$WIRE" --staleness="$staleness" --threads=1 --resume=0 --plot=0 \
      --progress=lines --out="$run" >"$run.log" 2>&1 || { echo "train_resnet failed:"; tail -n 20 "$run.log"; status=1; }
    # Steady steps: step_s(11) compute_s(13) exposed_comm_s(14) comm_busy_s(15).
    awk -F, -v round="$round" -v staleness="$staleness" 'NR > 3 { n++; step += $11; compute += $13; exposed += $14; busy += $15 }
      END { if (n) printf "round %d  staleness %d: step %.2f s = forward/backward %.2f s + exposed communication %.2f s (%.1f%% of the step); allreduce busy %.2f s per step (%d steps)\n",
                            round, staleness, step / n, compute / n, exposed / n, 100 * exposed / step, busy / n, n }' \
      "$run/steps.csv"
  done
done
exit "$status"
