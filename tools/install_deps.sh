#!/usr/bin/env bash
# Installs what building and testing tessera needs: Debian's packages, then the torch 2.x
# virtual environment from the Python package index (pinned in
# pytorch/requirements-torch2.txt), and mpi4py's test suite (pinned in
# mpi/requirements-mpi4py-tests.txt).
# Idempotent: when every package is already installed and the environment matches the
# pinned file it changes nothing and runs neither apt-get nor pip. Needs root (CI runs as
# root) only when something is missing.
# Usage: bash tools/install_deps.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  bazel-bootstrap   # Bazel 4.2.3, the build system (runs offline)
  g++               # C++17 compiler
  zip               # Bazel zips tests' undeclared outputs with it
  libgtest-dev      # //third_party:gtest, //third_party:gtest_main
  libbenchmark-dev  # //third_party:benchmark
  libopenmpi-dev    # //third_party:mpi (Open MPI 4.1 C API)
  openmpi-bin       # mpirun, for tests and benchmarks against Open MPI
  python3-mpi4py    # mpi4py 3.1.4: its collective tests run on //mpi:libtessera_mpi.so
  libhwloc-dev      # //third_party:hwloc
  hwloc             # lstopo, to look at a machine's topology
  libpmix-dev       # //third_party:pmix
  libucx-dev        # //third_party:ucx
  ucx-utils         # ucx_info and ucx_perftest
  libgloo-dev       # //third_party:gloo (a peer in the benchmarks)
  libtorch-dev      # //third_party:torch (libtorch 1.13, CPU): the ResNet trainer
  libturbojpeg0-dev # //third_party:turbojpeg: the trainer's JPEG decoding
  python3-torch     # the PyTorch DDP baseline of the trainer (trainer/ddp_baseline.py)
  python3-torchvision  # torchvision's resnet50, for that baseline and the architecture test
  python3-dev       # Python.h, for the PyTorch backend (//pytorch, //third_party:torch_python)
  pybind11-dev      # pybind11 headers, for the same extension
  gnuplot-nox       # the trainer's PNG plot of loss and accuracy; docs/scale.md's plots
  libsimgrid-dev    # //third_party:simgrid: SimGrid 3.32's S4U API, the simulator (simulator/); also
                    # its tools (smpirun, simgrid-graphicator: Debian ships no separate package)
  libibverbs-dev    # //third_party:ibverbs: rdma-core's verbs API (pulls libibverbs1, ibverbs-providers)
  libmicrohttpd-dev # //third_party:microhttpd: the metrics server's HTTP library (libmicrohttpd12, opened at run time)
  prometheus        # promtool (//metrics:promtool_test) and the server that scrapes the straggler tests
  iproute2          # ip netns, veth and tc, for tests that emulate several hosts
  slurm-wlm         # slurmctld, slurmd and srun over the emulated hosts (//tools/cluster:slurm_test)
  munge             # Slurm's authentication (munged)
  iptables          # the fault suite's partitions and packet loss (//tests/faults)
  python3           # scripts in tools/
  python3-venv      # the torch 2.x virtual environment (below)
  clang-14          # tools/fuzz.sh: the fuzz targets, with libFuzzer, ASan and UBSan
  libclang-rt-14-dev  # libclang_rt.fuzzer and the sanitizer runtimes clang-14 links
)

is_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

need_root() {
  if (( EUID != 0 )); then
    echo "install_deps: installing $1 needs root; run: sudo bash tools/install_deps.sh" >&2
    exit 1
  fi
}

install_debian_packages() {
  local missing=() package
  for package in "${PACKAGES[@]}"; do
    if ! is_installed "${package}"; then
      missing+=("${package}")
    fi
  done
  if (( ${#missing[@]} == 0 )); then
    echo "install_deps: all ${#PACKAGES[@]} packages are installed."
    return
  fi
  echo "install_deps: missing packages: ${missing[*]}"
  need_root "them"
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt or dpkg run to finish instead of failing at once.
  local apt_options=(-q -y -o DPkg::Lock::Timeout=600)
  apt-get "${apt_options[@]}" update
  apt-get "${apt_options[@]}" install --no-install-recommends "${missing[@]}"
  for package in "${missing[@]}"; do
    if ! is_installed "${package}"; then
      echo "install_deps: ${package} is still not installed" >&2
      exit 1
    fi
  done
  echo "install_deps: installed ${missing[*]}."
}

# The torch 2.x environment: a virtual environment of Debian's python3 at TORCH2_VENV
# (third_party/torch2.bzl), holding exactly pytorch/requirements-torch2.txt. It is made
# anew when that file changes (its hash is kept beside the environment).
install_torch2_venv() {
  local venv requirements=pytorch/requirements-torch2.txt want
  venv="$(sed -n 's/^TORCH2_VENV = "\(.*\)"$/\1/p' third_party/torch2.bzl)"
  want="$(sha256sum "${requirements}" | cut -d' ' -f1)"
  if [[ "$(cat "${venv}/.requirements.sha256" 2>/dev/null || true)" == "${want}" ]]; then
    echo "install_deps: ${venv} holds ${requirements}."
    return
  fi
  need_root "${venv}"
  echo "install_deps: making ${venv} from ${requirements}"
  rm -rf "${venv}"
  /usr/bin/python3 -m venv "${venv}"
  "${venv}/bin/pip" install --quiet --no-input --disable-pip-version-check -r "${requirements}"
  echo "${want}" >"${venv}/.requirements.sha256"
  echo "install_deps: made ${venv}."
}

# mpi4py's test suite: the test/ folder of the pinned source distribution, at
# MPI4PY_TESTS_DIR (mpi/mpi4py_tests.bzl), kept until the pinned file changes. pip of the
# torch 2.x environment downloads it (it has the setuptools that reading its metadata
# needs); nothing is installed.
install_mpi4py_tests() {
  local dir requirements=mpi/requirements-mpi4py-tests.txt want work
  dir="$(sed -n 's/^MPI4PY_TESTS_DIR = "\(.*\)"$/\1/p' mpi/mpi4py_tests.bzl)"
  want="$(sha256sum "${requirements}" | cut -d' ' -f1)"
  if [[ "$(cat "${dir}/.requirements.sha256" 2>/dev/null || true)" == "${want}" ]]; then
    echo "install_deps: ${dir} holds the tests of ${requirements}."
    return
  fi
  need_root "${dir}"
  work="$(mktemp -d)"
  local venv
  venv="$(sed -n 's/^TORCH2_VENV = "\(.*\)"$/\1/p' third_party/torch2.bzl)"
  "${venv}/bin/pip" download --quiet --no-input --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation -r "${requirements}" -d "${work}"
  tar -xzf "${work}"/mpi4py-*.tar.gz -C "${work}"
  rm -rf "${dir}"
  mkdir -p "$(dirname "${dir}")"
  mv "${work}"/mpi4py-*/test "${dir}"
  rm -rf "${work}"
  echo "${want}" >"${dir}/.requirements.sha256"
  echo "install_deps: put mpi4py's tests in ${dir}."
}

install_debian_packages
install_torch2_venv
install_mpi4py_tests
