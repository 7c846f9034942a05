#!/bin/bash
# train_resnet --deterministic, shown (docs/performance.md#deterministic-mode): the final
# weights' hash of the same steps on 1 host x 4 ranks and on 2 x 2 hosts of the emulated
# cluster (tools/cluster, 2 Gbit/s links) with another forced algorithm; the BN-free
# model with --micro_batch on 2 x 2, 2 x 1 and 1 x 2 ranks; and two controls that differ
# (whole batches per rank, and no --deterministic). Needs root (network namespaces).
#   bazel build //trainer:train_resnet //tools:make_dataset
#   bash trainer/deterministic_runs.sh [OUT_DIR]
set -u
cd "$(dirname "$0")/.."
TRAIN=$PWD/bazel-bin/trainer/train_resnet
OUT="${1:-/tmp/deterministic_runs}"
mkdir -p "$OUT"
[ -d "$OUT/data" ] || bazel-bin/tools/make_dataset --out="$OUT/data" --classes=4 --train_per_class=32 \
  --val_per_class=2 --min_size=40 --max_size=64 >/dev/null
COMMON="--data=$OUT/data --blocks=1,1,1,1 --width=16 --crop_size=32 --val_resize=36 --batch=32 --epochs=5"
COMMON+=" --warmup_epochs=0 --lr=0.2 --bucket_mb=0.25 --val_every=0 --progress=off --plot=0 --decode_threads=1"
COMMON+=" --deterministic --resume=0"
hash() { sed -n 's/.*final weights hash \([0-9a-f]*\).*/\1/p' "$1"; }
TESSERA_ALGO=recursive_doubling mpirun --allow-run-as-root --oversubscribe -np 4 -x TESSERA_ALGO $TRAIN $COMMON --batch_norm=1 --precision=bf16 --out=$OUT/a > $OUT/a.log 2>&1
echo "A 1 host x 4 ranks, TESSERA_ALGO=recursive_doubling, batch norm, bf16: $(hash $OUT/a.log)"
bash tools/cluster/cluster.sh up --name dettrain --hosts 2 --rate 2gbit >/dev/null
TESSERA_ALGO=ring TESSERA_DEBUG=INFO bash tools/cluster/cluster.sh run --name dettrain --hosts 2 --ranks-per-host 2 --timeout 900 -- $TRAIN $COMMON --batch_norm=1 --precision=bf16 --out=$OUT/b > $OUT/b.log 2>&1
echo "B 2 hosts x 2 ranks (tools/cluster, 2 Gbit/s), TESSERA_ALGO=ring, batch norm, bf16: $(hash $OUT/b.log)"
grep -o "ready: host [^,]*, [0-9] rank(s) on this host, transports [^,]*" $OUT/b.log | sort | uniq -c
TESSERA_ALGO=hierarchical bash tools/cluster/cluster.sh run --name dettrain --hosts 2 --ranks-per-host 2 --timeout 900 -- $TRAIN $COMMON --batch_norm=0 --precision=fp32 --micro_batch=8 --out=$OUT/c > $OUT/c.log 2>&1
echo "C 2 hosts x 2 ranks (tools/cluster), TESSERA_ALGO=hierarchical, BN-free, fp32, --micro_batch=8: $(hash $OUT/c.log)"
bash tools/cluster/cluster.sh run --name dettrain --hosts 2 --ranks-per-host 1 --timeout 900 -- $TRAIN $COMMON --batch_norm=0 --precision=fp32 --micro_batch=8 --out=$OUT/d > $OUT/d.log 2>&1
echo "D 2 hosts x 1 rank (tools/cluster), auto, BN-free, fp32, --micro_batch=8 (2 micro-batches per rank): $(hash $OUT/d.log)"
bash tools/cluster/cluster.sh down --name dettrain >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 $TRAIN $COMMON --batch_norm=0 --precision=fp32 --micro_batch=8 --out=$OUT/e > $OUT/e.log 2>&1
echo "E 1 host x 2 ranks, auto, BN-free, fp32, --micro_batch=8: $(hash $OUT/e.log)"
mpirun --allow-run-as-root --oversubscribe -np 2 $TRAIN $COMMON --batch_norm=0 --precision=fp32 --out=$OUT/f > $OUT/f.log 2>&1
echo "F 1 host x 2 ranks, BN-free, fp32, no micro-batches (control): $(hash $OUT/f.log)"
TESSERA_ALGO=recursive_doubling mpirun --allow-run-as-root --oversubscribe -np 4 -x TESSERA_ALGO $TRAIN ${COMMON/--deterministic/--deterministic=0} --threads=1 --batch_norm=1 --precision=bf16 --out=$OUT/g > $OUT/g.log 2>&1
echo "G as A without --deterministic (control): $(hash $OUT/g.log)"
