#!/bin/bash
# train_resnet --deterministic ends with bit-identical weights (the hash it prints):
#  1. 4 ranks on one host (TESSERA_ALGO=recursive_doubling) against 4 ranks on 2 x 2
#     hosts emulated with TESSERA_TOPO_FILE (shared memory inside a host, TCP between)
#     and TESSERA_ALGO=ring, with batch norm, in bfloat16;
#  2. the batch-norm-free model of the gradient check on 4 ranks against 2 ranks at the
#     same global batch, each backward pass over --micro_batch=4 images (2 ranks x 2
#     micro-batches against 4 x 1), in float32.
# Both comparisons would fail otherwise, which the last runs check (the runs show
# something): the first without --deterministic, the second without micro-batches (2
# ranks summing their 8 images' gradients in one pass).
# Usage: deterministic_train_test.sh path/to/train_resnet path/to/make_dataset
set -u
TRAIN="$1"
MAKE_DATASET="$2"
OUT="$(mktemp -d "${TEST_TMPDIR:-/tmp}/deterministic_train.XXXXXX")"
export TMPDIR="$OUT"   # Open MPI's session directory
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$MAKE_DATASET" --out="$OUT/data" --classes=4 --train_per_class=16 --val_per_class=2 --min_size=40 \
  --max_size=64 >/dev/null || { echo "FAIL: make_dataset"; exit 1; }
printf 'tessera-layout 1\nhostA 0 1\nhostB 2 3\n' >"$OUT/layout-2x2"

COMMON=(--data="$OUT/data" --blocks=1,1,1,1 --width=8 --crop_size=32 --val_resize=36 --batch=16 --epochs=1
  --max_steps_per_epoch=3 --warmup_epochs=0 --lr=0.4 --bucket_mb=0.05 --val_every=0 --progress=off --plot=0
  --decode_threads=1 --deterministic)

# run NAME NP [VAR=VALUE...] -- FLAGS...: prints the final weights hash of the run.
run() {
  local name="$1" np="$2"
  shift 2
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env "${vars[@]}" timeout -k 5 240 mpirun --allow-run-as-root --oversubscribe -np "$np" "$TRAIN" "${COMMON[@]}" \
    --out="$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 || fail "$name exited $?"
  local hash
  hash="$(sed -n 's/.*final weights hash \([0-9a-f]*\).*/\1/p' "$OUT/$name.log")"
  [ -n "$hash" ] || fail "$name printed no weights hash"
  echo "$name: np $np, ${vars[*]} $*: final weights hash $hash" >&2
  echo "$hash"
}

one_host="$(run one_host 4 TESSERA_ALGO=recursive_doubling -- --batch_norm=1 --precision=bf16)"
two_hosts="$(run two_hosts 4 TESSERA_ALGO=ring TESSERA_TOPO_FILE="$OUT/layout-2x2" TESSERA_DEBUG=INFO -- \
  --batch_norm=1 --precision=bf16)"
grep -q "host hostA.*2 rank(s) on this host" "$OUT/two_hosts.log" || fail "the 2x2 run did not see 2 emulated hosts"
[ "$one_host" = "$two_hosts" ] || fail "1x4 (auto) and 2x2 (ring) ended with different weights: $one_host / $two_hosts"

four="$(run four_ranks 4 -- --batch_norm=0 --precision=fp32 --micro_batch=4)"
two="$(run two_ranks 2 -- --batch_norm=0 --precision=fp32 --micro_batch=4)"
[ "$four" = "$two" ] || fail "4 ranks x 1 micro-batch and 2 ranks x 2 ended with different weights: $four / $two"
whole="$(run two_ranks_whole_batches 2 -- --batch_norm=0 --precision=fp32)"
[ "$whole" != "$four" ] || fail "2 ranks without micro-batches matched 4 ranks: the comparison shows nothing"

default_one="$(run default_one_host 4 TESSERA_ALGO=recursive_doubling -- --batch_norm=1 --precision=bf16 \
  --deterministic=0 --threads=1)"
default_two="$(run default_two_hosts 4 TESSERA_ALGO=ring TESSERA_TOPO_FILE="$OUT/layout-2x2" -- --batch_norm=1 \
  --precision=bf16 --deterministic=0 --threads=1)"
[ "$default_one" != "$default_two" ] || fail "without --deterministic 1x4 and 2x2 matched: the comparison shows nothing"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; logs in $OUT"
  exit 1
fi
rm -rf "$OUT"
echo "PASS"
