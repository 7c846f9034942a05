#!/bin/bash
# Packs what tools/gpu/run_checks.sh needs on a GPU machine into OUT.tar.xz (default
# .gpu/bundle.tar.xz; .gpu is git-ignored): the CUDA suites, the CUDA library and
# drop-in, NVIDIA's nccl-tests built against the drop-in, and the system libraries they
# load that a bare CUDA image lacks (UCX, PMIx, hwloc, ...). The GPU machine has no Bazel
# and no network, so everything is built here.
# Usage: tools/gpu/bundle.sh NCCL_TESTS_SRC [OUT_DIR]
#   NCCL_TESTS_SRC: a checkout of github.com/NVIDIA/nccl-tests (2.19.6 was used).
set -euo pipefail
NCCL_TESTS_SRC=$(realpath "$1")
OUT=$(realpath -m "${2:-.gpu}")
cd "$(dirname "$0")/../.."

BINARIES=(cuda/reduce_kernels_test cuda/device_buffers_test cuda/ipc_handles_test
  cuda/cuda_device_engine_test cuda/cuda_compiled_test tests/cuda_library_test
  nccl/cuda/libnccl.so.2 libtessera_cuda.so tools/make_dataset)
TARGETS=()
for b in "${BINARIES[@]}"; do TARGETS+=("//$(dirname "$b" | sed 's/^\.$//'):$(basename "$b")"); done
bazel build --jobs=2 "${TARGETS[@]}" //cuda:reduce_kernels_objects

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bazel-bin" "$STAGE/lib" "$STAGE/nccl-tests" "$STAGE/include"
BIN=$(bazel info bazel-bin 2>/dev/null)

# A file of bazel-bin at the same relative path, so that its RUNPATH ($ORIGIN/../_solib_k8)
# still finds the per-target libraries.
copy_from_bazel_bin() {
  mkdir -p "$STAGE/bazel-bin/$(dirname "$1")"
  cp -L "$BIN/$1" "$STAGE/bazel-bin/$1"
}
for b in "${BINARIES[@]}"; do copy_from_bazel_bin "$b"; done
for o in "$BIN"/cuda/reduce_kernels_objects/*.o; do copy_from_bazel_bin "${o#"$BIN"/}"; done

# nccl-tests against the drop-in, for Hopper only (the one GPU kind lent), CUDA's
# runtime linked statically as in tessera's own libraries.
NCCL_HOME="$STAGE/ncclhome"
mkdir -p "$NCCL_HOME/include" "$NCCL_HOME/lib"
cp /usr/local/cuda/include/nccl.h "$NCCL_HOME/include/"
cp -L "$BIN/nccl/cuda/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so"
make -s -C "$NCCL_TESTS_SRC" -j2 BUILDDIR="$STAGE/nccl-tests-build" CUDA_HOME=/usr/local/cuda \
  NCCL_HOME="$NCCL_HOME" CUDARTLIB=cudart_static CXXSTD=-std=c++17 \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >/dev/null
for t in all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall; do
  cp "$STAGE/nccl-tests-build/${t}_perf" "$STAGE/nccl-tests/"
done
rm -rf "$STAGE/nccl-tests-build" "$NCCL_HOME"

# The system libraries every copied ELF needs, less those of any Linux (glibc, the C++
# runtime): from this Debian 12 host, placed first on LD_LIBRARY_PATH there.
# ldd reads the originals: in bazel-bin their RUNPATH still finds _solib_k8.
{ for b in "${BINARIES[@]}"; do echo "$BIN/$b"; done; ls "$STAGE"/nccl-tests/*; } | while read -r f; do
  { ldd "$f" 2>/dev/null || true; } | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case "$lib" in
    */_solib_k8/*) copy_from_bazel_bin "_solib_k8/${lib#*/_solib_k8/}" ;;
    */libc.so*|*/libm.so*|*/libpthread.so*|*/libdl.so*|*/librt.so*|*/libgcc_s.so*|*/libstdc++.so*) ;;
    */bazel-out/*|"$STAGE"/*|*/libnccl.so*) ;;  # libnccl.so.2: the drop-in, found on LD_LIBRARY_PATH
    *) cp -L "$lib" "$STAGE/lib/" ;;
  esac
done
# The trainer's JPEG library (compiled there against these headers).
cp /usr/include/turbojpeg.h "$STAGE/include/"
cp -L /usr/lib/x86_64-linux-gnu/libturbojpeg.so.0 "$STAGE/lib/"
ln -sf libturbojpeg.so.0 "$STAGE/lib/libturbojpeg.so"

mkdir -p "$OUT"
tar -C "$STAGE" -cJf "$OUT/bundle.tar.xz" .
ls -la "$OUT/bundle.tar.xz"
