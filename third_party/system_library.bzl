"""A repository rule that exposes one installed Debian package to Bazel.

system_library() makes an external repository holding symlinks to exactly the
directories and files of the package that we name (its headers and, for static
archives, the .a files), plus a BUILD file from third_party/system/. Unlike a
new_local_repository at /usr, nothing else of /usr is reachable through the
repository, so an `includes` entry in its BUILD file never puts all of
/usr/include on the -isystem path (which would break libstdc++'s #include_next,
e.g. when a target is tagged no-sandbox).

If a path is missing, the fetch fails naming the Debian package and the script that
installs it; a failed fetch is tried again by the next Bazel command, so installing
the package is enough to fix it.
"""

load("//third_party:torch2.bzl", "TORCH2_SITE_PACKAGES", "TORCH2_VENV")


def _system_library_impl(rctx):
    hint = "install %s (run: bash tools/install_deps.sh)" % (
        rctx.attr.python_packages or "the Debian package " + rctx.attr.debian_package
    )
    for link, target in rctx.attr.links.items():
        if not rctx.path(target).exists:
            fail("%s not found: %s" % (target, hint))
        rctx.symlink(target, link)
    for required in rctx.attr.required_files:
        if not rctx.path(required).exists:
            fail("%s not found: %s" % (required, hint))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.template("BUILD.bazel", rctx.attr.build_file, substitutions = rctx.attr.substitutions, executable = False)

system_library = repository_rule(
    implementation = _system_library_impl,
    local = True,
    attrs = {
        "build_file": attr.label(
            mandatory = True,
            allow_single_file = True,
            doc = "BUILD file of the repository (in third_party/system/).",
        ),
        "debian_package": attr.string(
            doc = "The Debian package that provides the files, for error messages.",
        ),
        "python_packages": attr.string(
            doc = "Instead of debian_package: the Python packages that provide them, and where.",
        ),
        "substitutions": attr.string_dict(
            doc = "Text replaced in the BUILD file (e.g. an absolute library directory).",
        ),
        "links": attr.string_dict(
            mandatory = True,
            doc = "Path inside the repository -> absolute path on the system it links to.",
        ),
        "required_files": attr.string_list(
            doc = "Absolute paths that must exist (e.g. the .so that linkopts name).",
        ),
    },
)

_MULTIARCH_LIB = "/usr/lib/x86_64-linux-gnu"

_TORCH2 = TORCH2_SITE_PACKAGES + "/torch"

def tessera_system_libraries():
    """Declares every system library repository tessera uses; called from WORKSPACE."""
    system_library(
        name = "system_gtest",
        debian_package = "libgtest-dev",
        build_file = "//third_party/system:gtest.BUILD",
        links = {
            "include/gtest": "/usr/include/gtest",
            "lib/libgtest.a": _MULTIARCH_LIB + "/libgtest.a",
            "lib/libgtest_main.a": _MULTIARCH_LIB + "/libgtest_main.a",
        },
    )
    system_library(
        name = "system_benchmark",
        debian_package = "libbenchmark-dev",
        build_file = "//third_party/system:benchmark.BUILD",
        links = {
            "include/benchmark": "/usr/include/benchmark",
            "lib/libbenchmark_main.a": _MULTIARCH_LIB + "/libbenchmark_main.a",
        },
        required_files = [_MULTIARCH_LIB + "/libbenchmark.so"],
    )
    system_library(
        name = "system_openmpi",
        debian_package = "libopenmpi-dev",
        build_file = "//third_party/system:openmpi.BUILD",
        links = {
            "include": _MULTIARCH_LIB + "/openmpi/include",
        },
        required_files = [_MULTIARCH_LIB + "/libmpi.so"],
    )
    system_library(
        name = "system_hwloc",
        debian_package = "libhwloc-dev",
        build_file = "//third_party/system:hwloc.BUILD",
        links = {
            "include/hwloc.h": "/usr/include/hwloc.h",
            "include/hwloc": "/usr/include/hwloc",
            # hwloc/autogen/config.h lives in the multiarch include directory.
            "include_multiarch/hwloc/autogen": "/usr/include/x86_64-linux-gnu/hwloc/autogen",
        },
        required_files = [_MULTIARCH_LIB + "/libhwloc.so"],
    )
    system_library(
        name = "system_pmix",
        debian_package = "libpmix-dev",
        build_file = "//third_party/system:pmix.BUILD",
        links = {
            # Debian keeps PMIx 4.2 apart from /usr/include; libpmix.so is also
            # linked into the multiarch library directory.
            "include": _MULTIARCH_LIB + "/pmix2/include",
        },
        required_files = [_MULTIARCH_LIB + "/libpmix.so"],
    )
    system_library(
        name = "system_ucx",
        debian_package = "libucx-dev",
        build_file = "//third_party/system:ucx.BUILD",
        links = {
            "include/ucp": "/usr/include/ucp",
            "include/uct": "/usr/include/uct",
            "include/ucs": "/usr/include/ucs",
        },
        required_files = [
            _MULTIARCH_LIB + "/libucp.so",
            _MULTIARCH_LIB + "/libuct.so",
            _MULTIARCH_LIB + "/libucs.so",
        ],
    )
    system_library(
        name = "system_gloo",
        debian_package = "libgloo-dev",
        build_file = "//third_party/system:gloo.BUILD",
        links = {
            "include/gloo": "/usr/include/gloo",
        },
        # Not in the multiarch directory: Debian's libgloo-dev installs it in /usr/lib.
        required_files = ["/usr/lib/libgloo.so"],
    )
    system_library(
        name = "system_simgrid",
        debian_package = "libsimgrid-dev",
        build_file = "//third_party/system:simgrid.BUILD",
        links = {
            "include/simgrid": "/usr/include/simgrid",
            "include/xbt": "/usr/include/xbt",
        },
        required_files = [_MULTIARCH_LIB + "/libsimgrid.so"],
    )
    system_library(
        name = "system_torch",
        debian_package = "libtorch-dev",
        build_file = "//third_party/system:torch.BUILD",
        links = {
            "include/ATen": "/usr/include/ATen",
            "include/c10": "/usr/include/c10",
            "include/caffe2": "/usr/include/caffe2",
            "include/torch": "/usr/include/torch",
        },
        required_files = [
            _MULTIARCH_LIB + "/libtorch.so",
            _MULTIARCH_LIB + "/libtorch_cpu.so",
            _MULTIARCH_LIB + "/libc10.so",
        ],
    )
    system_library(
        name = "system_torch_python",
        debian_package = "libtorch-dev, python3-dev and pybind11-dev",
        build_file = "//third_party/system:torch_python.BUILD",
        links = {
            "include/python3.11": "/usr/include/python3.11",
            "include/x86_64-linux-gnu/python3.11": "/usr/include/x86_64-linux-gnu/python3.11",
            "include/pybind11": "/usr/include/pybind11",
        },
        required_files = [_MULTIARCH_LIB + "/libtorch_python.so"],
    )
    system_library(
        name = "pip_torch2",
        python_packages = "torch 2.x from the package index (pytorch/requirements-torch2.txt) in " + TORCH2_VENV,
        build_file = "//third_party/system:torch2.BUILD",
        links = {
            "include": _TORCH2 + "/include",
            "include_python/python3.11": "/usr/include/python3.11",
            "include_python/x86_64-linux-gnu/python3.11": "/usr/include/x86_64-linux-gnu/python3.11",
        },
        substitutions = {"%{TORCH2_LIB}": _TORCH2 + "/lib"},
        required_files = [_TORCH2 + "/lib/" + lib for lib in [
            "libtorch.so",
            "libtorch_cpu.so",
            "libc10.so",
            "libtorch_python.so",
        ]],
    )
    system_library(
        name = "system_turbojpeg",
        debian_package = "libturbojpeg0-dev",
        build_file = "//third_party/system:turbojpeg.BUILD",
        links = {
            "include/turbojpeg.h": "/usr/include/turbojpeg.h",
        },
        required_files = [_MULTIARCH_LIB + "/libturbojpeg.so"],
    )
    system_library(
        name = "system_cuda",
        debian_package = "CUDA 13 toolkit in /usr/local/cuda (NVIDIA's, not Debian's; see docs/cuda.md)",
        build_file = "//third_party/system:cuda.BUILD",
        # Only the runtime and driver API headers (and what they include), so that the
        # toolkit's other headers (its nccl.h among them) stay out of reach.
        links = dict(
            [("include/" + h, "/usr/local/cuda/include/" + h) for h in [
                "builtin_types.h",
                "crt/host_defines.h",
                "cuda.h",
                "cudaTypedefs.h",
                "cuda_device_runtime_api.h",
                "cuda_runtime_api.h",
                "device_types.h",
                "driver_types.h",
                "surface_types.h",
                "texture_types.h",
                "vector_types.h",
            ]] + [("lib/libcudart_static.a", "/usr/local/cuda/lib64/libcudart_static.a")],
        ),
        # cuda/cuda.bzl runs nvcc from here.
        required_files = ["/usr/local/cuda/bin/nvcc"],
    )
    system_library(
        name = "system_microhttpd",
        debian_package = "libmicrohttpd-dev",
        build_file = "//third_party/system:microhttpd.BUILD",
        links = {
            "include/microhttpd.h": "/usr/include/microhttpd.h",
        },
        required_files = [_MULTIARCH_LIB + "/libmicrohttpd.so.12"],
    )
    system_library(
        name = "system_ibverbs",
        debian_package = "libibverbs-dev",
        build_file = "//third_party/system:ibverbs.BUILD",
        links = {
            "include/infiniband": "/usr/include/infiniband",
        },
        required_files = [_MULTIARCH_LIB + "/libibverbs.so"],
    )
