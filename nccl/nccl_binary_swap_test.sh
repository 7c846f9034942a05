#!/bin/bash
# The drop-in's promise: a program built for NVIDIA's libnccl.so.2 runs on tessera
# without being rebuilt. PROGRAM was linked with the CUDA toolkit's libnccl.so.2; this
# checks that the loader picks NVIDIA's library for it by default, the drop-in once its
# directory comes first in LD_LIBRARY_PATH, and that the program then runs its four-rank
# collectives correctly (it checks them itself and exits 0 only if all were right).
# Usage: nccl_binary_swap_test.sh PROGRAM DROP_IN_LIBNCCL_SO_2
set -euo pipefail

program="$1"
dropin_dir="$(cd "$(dirname "$2")" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }

resolve() { ldd "$program" | awk '$1 == "libnccl.so.2" {print $3}'; }

default=$(env -u LD_LIBRARY_PATH bash -c "ldd '$program'" | awk '$1 == "libnccl.so.2" {print $3}')
case "$default" in
  /usr/local/cuda*) echo "by default, $program loads NVIDIA's $default" ;;
  *) fail "by default libnccl.so.2 resolves to '$default', not the CUDA toolkit's: the program is not built for NVIDIA's library" ;;
esac

export LD_LIBRARY_PATH="$dropin_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
swapped=$(resolve)
[[ "$swapped" == "$dropin_dir/libnccl.so.2" ]] || fail "with LD_LIBRARY_PATH, libnccl.so.2 resolves to '$swapped'"
echo "with LD_LIBRARY_PATH=$dropin_dir it loads $swapped"

output=$(timeout 120 "$program" 2>&1) || { echo "$output" >&2; fail "the program failed on the drop-in"; }
echo "$output"
echo "$output" | grep -q "is from $dropin_dir/libnccl.so.2" || fail "ncclAllReduce did not come from the drop-in"
echo PASS
