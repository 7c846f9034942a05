#!/bin/bash
# libtessera.so (and its CUDA build) export the C API, tessera*, and nothing else: the
# version script hides everything of tessera's own, and its link-time optimisation must
# not bring anything back (with several LTO partitions GCC made static thread-locals
# global, t_group.lto_priv.0, and they were exported). Also checks that the C API is
# there, so an empty export list fails too.
# Usage: library_exports_test.sh LIBRARY...
set -u
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

for lib in "$@"; do
  names="$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)"
  others="$(echo "$names" | grep -v '^tessera' || true)"
  [[ -z "$others" ]] || fail "$lib exports names other than tessera*: $(echo $others)"
  for api in tesseraGetVersion tesseraCommInitRank tesseraAllReduce tesseraGroupEnd; do
    echo "$names" | grep -qx "$api" || fail "$lib does not export $api"
  done
  echo "$lib: $(echo "$names" | wc -l) names exported"
done

if [[ "$failures" -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
