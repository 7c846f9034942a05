#!/bin/bash
# kill_rank.sh OUT RANK STEP SIGNAL: waits until the train_resnet run writing to OUT
# (its --out=OUT) has logged global step STEP in OUT/steps.csv, then sends SIGNAL to its
# rank RANK (found by --out=OUT on its command line and OMPI_COMM_WORLD_RANK=RANK in its
# environment, so only that run's process is hit). Prints the pid, the step and the
# moment of the kill (seconds since 1970, the clock of events.csv). Gives up after
# LIMIT_S seconds (default 300). Used by train_elastic_test.sh and elastic_demo.sh.
set -u
OUT="$1" RANK="$2" STEP="$3" SIGNAL="$4"
LIMIT_S="${LIMIT_S:-300}"
deadline=$((SECONDS + LIMIT_S))
step() { tail -n 1 "$OUT/steps.csv" 2>/dev/null | cut -d, -f1 | grep -x '[0-9][0-9]*' || echo 0; }
pid=""
while [ -z "$pid" ]; do  # the rank's process, once it has started training
  [ "$SECONDS" -lt "$deadline" ] || { echo "kill_rank: no rank $RANK writing to $OUT"; exit 1; }
  sleep 0.1
  [ "$(step)" -ge 1 ] || continue
  for candidate in $(pgrep -f -- "--out=$OUT( |$)"); do
    { tr '\0' '\n' <"/proc/$candidate/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$RANK" &&
      pid="$candidate"
  done
done
until [ "$(step)" -ge "$STEP" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "kill_rank: $OUT never reached step $STEP"; exit 1; }
  sleep 0.005
done
kill -"$SIGNAL" "$pid" || exit 1
echo "kill_rank: SIG$SIGNAL to rank $RANK (pid $pid) after global step $(step) at $(date +%s.%N)"
