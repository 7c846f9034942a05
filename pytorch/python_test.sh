#!/usr/bin/env bash
# Runs a Python test of the PyTorch backend with one torch's Python, importing
# tessera_torch from Bazel's runfiles (pytorch/<torch>/tessera_torch, backend.bzl).
# Usage (from a sh_test of torch_python_test): python_test.sh PYTHON PACKAGE_DIR
#   pytorch/SOME_test.py [ARGS...]
set -euo pipefail
python="$1"
package_dir="$2"
shift 2
root="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-tessera}"
# The package first, then pytorch/ (the tests' helpers such as rank_launcher.py).
export PYTHONPATH="${root}/${package_dir}:${root}/pytorch:${root}${PYTHONPATH:+:${PYTHONPATH}}"
# The test file in runfiles is a symlink into the source tree, and Python would put its
# real directory first on sys.path, where tessera_torch has no _C.so. Safe-path mode
# (Python 3.11) leaves that directory out, here and in the processes a test starts.
export PYTHONSAFEPATH=1
# One OpenMP thread per rank: tests start several ranks on two cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "${root}"
exec "${python}" "$@"
