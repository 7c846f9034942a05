#!/usr/bin/env bash
# Installs the Debian packages that building and testing tessera needs.
# Idempotent: when every package is already installed it changes nothing and runs no
# apt-get at all. Needs root (CI runs as root) only when something is missing.
# Usage: bash tools/install_deps.sh
set -euo pipefail

PACKAGES=(
  bazel-bootstrap   # Bazel 4.2.3, the build system (runs offline)
  g++               # C++17 compiler
  zip               # Bazel zips tests' undeclared outputs with it
  libgtest-dev      # //third_party:gtest, //third_party:gtest_main
  libbenchmark-dev  # //third_party:benchmark
  libopenmpi-dev    # //third_party:mpi (Open MPI 4.1 C API)
  openmpi-bin       # mpirun, for tests and benchmarks against Open MPI
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
  iproute2          # ip netns, veth and tc, for tests that emulate several hosts
  iptables          # the fault suite's partitions and packet loss (//tests/faults)
  python3           # scripts in tools/
  clang-14          # tools/fuzz.sh: the fuzz targets, with libFuzzer, ASan and UBSan
  libclang-rt-14-dev  # libclang_rt.fuzzer and the sanitizer runtimes clang-14 links
)

is_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

missing=()
for package in "${PACKAGES[@]}"; do
  if ! is_installed "${package}"; then
    missing+=("${package}")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "install_deps: all ${#PACKAGES[@]} packages are installed."
  exit 0
fi

echo "install_deps: missing packages: ${missing[*]}"
if (( EUID != 0 )); then
  echo "install_deps: installing them needs root; run: sudo bash tools/install_deps.sh" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt or dpkg run to finish instead of failing at once.
apt_options=(-q -y -o DPkg::Lock::Timeout=600)
apt-get "${apt_options[@]}" update
apt-get "${apt_options[@]}" install --no-install-recommends "${missing[@]}"

for package in "${missing[@]}"; do
  if ! is_installed "${package}"; then
    echo "install_deps: ${package} is still not installed" >&2
    exit 1
  fi
done
echo "install_deps: installed ${missing[*]}."
