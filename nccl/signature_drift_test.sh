#!/bin/bash
# Proves that the drop-in cannot drift from the real nccl.h unnoticed: compiles
# nccl_api.cc and nccl_device_api.cc as they are (must succeed), then copies with one
# signature changed at a time (each must fail: a conflicting declaration, or the
# static_assert that ties pncclX to the header's ncclX). A change
# that no longer applies (the source moved on) fails the test too, so it stays honest.
# Usage: signature_drift_test.sh NCCL_API_CC NCCL_DEVICE_API_CC  (from the runfiles root)
set -euo pipefail

api="$1"
device="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

compile() {  # compile FILE: syntax-check with the flags of nccl/BUILD
  g++ -std=c++17 -fsyntax-only -Wall -I. -Iinclude -idirafter /usr/local/cuda/include -x c++ "$1" 2> "$work/errors"
}

compile "$api" || { cat "$work/errors" >&2; fail "$api does not compile as it is"; }
compile "$device" || { cat "$work/errors" >&2; fail "$device does not compile as it is"; }
echo "as they are: both compile"

n=0
# drift SOURCE SED_EXPRESSION DESCRIPTION
drift() {
  local source="$1" expression="$2" what="$3"
  local copy="$work/$(basename "$source")"
  sed "$expression" "$source" > "$copy"
  cmp -s "$source" "$copy" && fail "the change for '$what' no longer applies to $source"
  if compile "$copy"; then fail "'$what' compiled: a drifted signature went unnoticed"; fi
  grep -q -E "conflicting declaration|ambiguating new declaration|does not have the signature" "$work/errors" ||
    { cat "$work/errors" >&2; fail "'$what' failed for another reason than the signature"; }
  echo "refused as expected: $what"
  n=$((n + 1))
}

# A parameter type in a definition.
drift "$api" 's/^ncclResult_t pncclAllReduce(const void\* sendbuff, void\* recvbuff, size_t count,/ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, int count,/' \
  "pncclAllReduce with an int count"
# A return type in a definition.
drift "$api" 's/^const char\* pncclGetErrorString(/char* pncclGetErrorString(/' \
  "pncclGetErrorString returning char*"
# A missing parameter in a definition.
drift "$api" 's/^ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)/ncclResult_t pncclCommRevoke(ncclComm_t comm)/' \
  "pncclCommRevoke without its flags"
# A public name in the alias table.
drift "$api" 's/NCCL_DROPIN_ALIAS(ncclResult_t, ncclBcast, (void\*, size_t,/NCCL_DROPIN_ALIAS(ncclResult_t, ncclBcast, (const void*, size_t,/' \
  "ncclBcast taking a const buffer"
# The device API.
drift "$device" 's/^int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {/int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, long rank) {/' \
  "pncclTeamRankToWorld with a long rank"
drift "$device" 's/NCCL_DROPIN_ALIAS(ncclTeam_t, ncclTeamWorld, (ncclComm_t))/NCCL_DROPIN_ALIAS(int, ncclTeamWorld, (ncclComm_t))/' \
  "ncclTeamWorld returning int"

echo "PASS: $n drifted signatures refused"
