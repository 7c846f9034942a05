"""The Python package tessera_torch, built against one torch: the same sources for torch
1.13 (Debian's) and torch 2.x (the package index's), torch_api.h saying where they differ.

tessera_torch_package("torch2", ...) makes, under pytorch/torch2/:
  tessera_torch/_C.so           the extension (:backend_torch2 and module.cc)
  tessera_torch/__init__.py     a copy of pytorch/tessera_torch/__init__.py
  tessera_torch/_build.py       the package's and torch's versions (build_info.py)
  tessera_torch/libtessera.so   beside _C.so, found through its RUNPATH ($ORIGIN)
and the filegroup :package_torch2 of these files (pytorch/torch2 goes on PYTHONPATH).
"""

load("//third_party:torch2.bzl", "TORCH2_VENV")


# Every .cc of pytorch/ but module.cc is the backend (pip's build_backend.py compiles
# them all too), every .h its headers.
def tessera_torch_package(name, torch_deps, torch_version_header, copts):
    """The package for one torch: `torch_deps` are the labels with its headers and
    libraries (and Python's and pybind11's), `torch_version_header` the header with its version, `copts` the language
    standard its headers need."""
    native.cc_library(
        name = "backend_" + name,
        srcs = native.glob(["*.cc"], exclude = ["module.cc"]),
        hdrs = native.glob(["*.h"]),
        copts = copts,
        deps = ["//:tessera"] + torch_deps,
    )
    directory = name + "/tessera_torch/"
    native.cc_binary(
        name = directory + "_C.so",
        srcs = ["module.cc"],
        copts = copts,
        linkopts = ["-Wl,-rpath,$$ORIGIN"],
        linkshared = True,
        deps = [":backend_" + name],
    )
    native.genrule(
        name = name + "_init",
        srcs = ["tessera_torch/__init__.py"],
        outs = [directory + "__init__.py"],
        cmd = "cp $< $@",
    )
    native.genrule(
        name = name + "_libtessera",
        srcs = ["//:libtessera.so"],
        outs = [directory + "libtessera.so"],
        cmd = "cp $< $@",
    )
    native.genrule(
        name = name + "_build_info",
        srcs = ["//:include/tessera/tessera.h", torch_version_header],
        outs = [directory + "_build.py"],
        cmd = "python3 $(location build_info.py) $(SRCS) $@",
        tools = ["build_info.py"],
    )
    native.filegroup(
        name = "package_" + name,
        srcs = [
            directory + "_C.so",
            directory + "__init__.py",
            directory + "_build.py",
            directory + "libtessera.so",
        ],
        visibility = ["//visibility:public"],
    )

# Each torch the package is built for: its package name above, and the Python that tests
# run it with.
TORCHES = {
    "torch1": "/usr/bin/python3",  # Debian's python3 with python3-torch 1.13.1
    "torch2": TORCH2_VENV + "/bin/python",  # the pinned torch 2.x (tools/install_deps.sh)
}

def torch_python_test(name, script, args = [], data = [], torches = ["torch1", "torch2"], **kwargs):
    """One sh_test per torch, <torch>_<name>: `script` (a Python file of pytorch/) run by
    that torch's Python with that package of tessera_torch on its path."""
    for torch in torches:
        native.sh_test(
            name = torch + "_" + name,
            srcs = ["python_test.sh"],
            args = [TORCHES[torch], "pytorch/" + torch, "pytorch/" + script] + args,
            data = [script, ":package_" + torch] + data,
            **kwargs
        )
