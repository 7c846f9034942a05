#!/bin/bash
# Checks the drop-in libnccl.so.2 the way the dynamic loader sees it:
#  - its soname is libnccl.so.2;
#  - it exports exactly the names of the CUDA toolkit's own libnccl.so.2 (nccl* and
#    pnccl*, device API included), except ncclResetDebugInitInternal, an internal
#    function that no header declares; nothing of tessera or C++ leaks out;
#  - ncclX is a weak alias of pncclX (same address), as in NCCL, so a profiler can
#    interpose ncclX;
#  - a program linked with it needs libnccl.so.2 and no tessera or CUDA library, and the
#    loader finds the drop-in (not the toolkit's) for it.
# Usage: nccl_exports_test.sh LIBNCCL_SO_2 PROGRAM
set -euo pipefail

lib="$1"
program="$2"
real=/usr/local/cuda/lib64/libnccl.so.2
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ -f "$real" ]] || fail "NCCL's own library $real is missing: the CUDA toolkit is part of this machine's setup"

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libnccl.so.2" ]] || fail "soname is '$soname', want libnccl.so.2"

exported() { nm -D --defined-only "$1" | awk '{print $3}' | sort; }
ours=$(exported "$lib")
theirs=$(exported "$real" | grep -v '^ncclResetDebugInitInternal$')
if [[ "$ours" != "$theirs" ]]; then
  echo "exported names differ from $real (< NCCL's, > the drop-in's):" >&2
  diff <(echo "$theirs") <(echo "$ours") >&2 || true
  fail "export list"
fi
echo "exports: $(echo "$ours" | wc -l) names, the same as NCCL 2.28.9's libnccl.so.2"

others=$(echo "$ours" | grep -v -E '^p?nccl' || true)
[[ -z "$others" ]] || fail "exports names other than nccl*/pnccl*: $others"

# Every ncclX is weak and at the address of pncclX.
while read -r addr kind name; do
  [[ "$kind" == "W" ]] || fail "$name is '$kind', want a weak symbol (W)"
  paddr=$(nm -D --defined-only "$lib" | awk -v n="p$name" '$3 == n {print $1}')
  [[ "$paddr" == "$addr" ]] || fail "$name ($addr) is not an alias of p$name ($paddr)"
done < <(nm -D --defined-only "$lib" | awk '$3 ~ /^nccl/')

needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "$needed" | grep -qx 'libnccl.so.2' || fail "$program does not need libnccl.so.2: $needed"
if echo "$needed" | grep -E 'tessera|cuda|cudart'; then fail "$program needs more than the drop-in"; fi
resolved=$(ldd "$program" | awk '$1 == "libnccl.so.2" {print $3}')
[[ -n "$resolved" && "$resolved" != /usr/local/cuda* ]] || fail "libnccl.so.2 resolves to '$resolved'"
if ldd "$program" | grep -q 'not found'; then fail "unresolved libraries: $(ldd "$program")"; fi
echo "program needs: $(echo $needed); libnccl.so.2 -> $resolved"
echo PASS
