#!/bin/bash
# Builds train_resnet on a GPU machine without Bazel, against the libtorch of its Python
# torch (CUDA-enabled), with tessera from a bundle of tools/gpu/bundle.sh (unpacked in
# BUNDLE). Compiles each file alone, in parallel. Writes BUNDLE/train_resnet.
# Usage: tools/gpu/build_trainer.sh BUNDLE
set -euo pipefail
BUNDLE=$(realpath "$1")
cd "$(dirname "$0")/../.."
TORCH=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
STD=${CXXSTD:--std=c++17}
SOURCES=(base/status.cc trainer/jpeg_decoder.cc trainer/batch_loader.cc trainer/dataset_index.cc
  trainer/epoch_shard.cc trainer/image_transforms.cc trainer/metrics_log.cc trainer/recipe.cc
  trainer/train_settings.cc trainer/resnet.cc trainer/data_parallel.cc trainer/checkpoint.cc
  trainer/elastic.cc trainer/optimizer.cc trainer/trainer.cc trainer/train_resnet_main.cc)
OBJ="$BUNDLE/trainer-objects"
mkdir -p "$OBJ"
FLAGS=("$STD" -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$ABI" -I. -Iinclude -I"$BUNDLE/include"
  -isystem "$TORCH/include" -isystem "$TORCH/include/torch/csrc/api/include")
echo "g++ $(g++ -dumpfullversion), torch $(python3 -c 'import torch; print(torch.__version__)'), ABI $ABI, $STD"
pids=()
for src in "${SOURCES[@]}"; do
  g++ "${FLAGS[@]}" -c "$src" -o "$OBJ/$(basename "$src" .cc).o" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" -eq 0 ] || { echo "build_trainer: compilation failed"; exit 1; }
g++ -o "$BUNDLE/train_resnet" "$OBJ"/*.o -pthread \
  -L"$BUNDLE/bazel-bin" -ltessera_cuda -L"$BUNDLE/lib" -lturbojpeg \
  -Wl,--no-as-needed -L"$TORCH/lib" -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,--as-needed \
  -Wl,-rpath,"$TORCH/lib" -Wl,-rpath,"$BUNDLE/bazel-bin" -Wl,-rpath,"$BUNDLE/lib"
echo "build_trainer: $BUNDLE/train_resnet"
