#!/usr/bin/env bash
# Runs a Python test of the PyTorch backend with Debian's /usr/bin/python3, importing
# tessera_torch from Bazel's runfiles (pytorch/tessera_torch: __init__.py and _C.so).
# Usage (from a sh_test): python_test.sh pytorch/SOME_test.py [ARGS...]
set -euo pipefail
root="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-tessera}"
export PYTHONPATH="${root}/pytorch:${root}${PYTHONPATH:+:${PYTHONPATH}}"
# The test file in runfiles is a symlink into the source tree, and Python would put its
# real directory first on sys.path, where tessera_torch has no _C.so. Safe-path mode
# (Python 3.11) leaves that directory out, here and in the processes a test starts.
export PYTHONSAFEPATH=1
# One OpenMP thread per rank: tests start several ranks on two cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "${root}"
exec /usr/bin/python3 "$@"
