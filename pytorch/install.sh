#!/usr/bin/env bash
# Installs the Python package tessera_torch, built by `bazel build //pytorch:tessera_torch`,
# where Debian's /usr/bin/python3 finds it (/usr/local/lib/python3.11/dist-packages), so
# that `import tessera_torch` works with no pip step. Run from the repository root, as
# root (or with sudo). Usage: bash pytorch/install.sh [DESTINATION_DIRECTORY]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

site="${1:-$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("purelib", "posix_local"))')}"
built="bazel-bin/pytorch/tessera_torch/_C.so"
if [[ ! -f "${built}" || ! -f bazel-bin/pytorch/tessera_torch/libtessera.so ]]; then
  echo "install.sh: build it first: bazel build //pytorch:tessera_torch" >&2
  exit 1
fi
package="${site}/tessera_torch"
mkdir -p "${package}"
install -m 0644 pytorch/tessera_torch/__init__.py "${package}/__init__.py"
install -m 0755 "${built}" "${package}/_C.so"
install -m 0755 bazel-bin/pytorch/tessera_torch/libtessera.so "${package}/libtessera.so"
echo "install.sh: installed tessera_torch in ${package}"
