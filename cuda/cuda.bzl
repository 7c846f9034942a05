"""cuda_library: CUDA sources (.cu) compiled by nvcc into a cc_library.

Bazel 4.2 has no CUDA rules, and none can be downloaded here. This macro runs
/usr/local/cuda/bin/nvcc (offline) in one genrule per .cu file, producing a
position-independent object file with device code for sm_80 and sm_90 (plus
compute_90 PTX, so later GPUs can JIT it), and wraps the objects in a cc_library
linked with the static CUDA runtime (//third_party:cuda).

The objects are ordinary host object files: they build and link on a machine without
a GPU or driver, and nothing in them touches the GPU before a function is called.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

# Real architectures the device code is compiled for, and the PTX kept for the future.
CUDA_ARCHS = ["80", "90"]
CUDA_PTX_ARCH = "90"

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-DNDEBUG",
    "-Xcompiler",
    "-fPIC",
    "-Xcompiler",
    "-Wall",
    # Device code for each real architecture, then PTX of the newest one.
] + ["-gencode arch=compute_%s,code=sm_%s" % (a, a) for a in CUDA_ARCHS] + [
    "-gencode arch=compute_%s,code=compute_%s" % (CUDA_PTX_ARCH, CUDA_PTX_ARCH),
]

def cuda_objects(name, srcs, hdrs = [], visibility = None, testonly = False):
    """One genrule per .cu file in srcs, each producing <name>/<file>.pic.o.

    hdrs: every header the .cu files include from this workspace (nvcc sees the
    workspace root as an include directory; system and CUDA headers need no listing).
    The filegroup `name` holds the objects.
    """
    objs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_objects: %s is not a .cu file" % src)
        obj = "%s/%s.pic.o" % (name, src[:-len(".cu")])
        native.genrule(
            name = "%s_%s_nvcc" % (name, src[:-len(".cu")].replace("/", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = "%s %s -I. -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS), src),
            message = "nvcc %s (sm_%s, PTX compute_%s)" % (src, ", sm_".join(CUDA_ARCHS), CUDA_PTX_ARCH),
            testonly = testonly,
            visibility = ["//visibility:private"],
        )
        objs.append(obj)
    native.filegroup(name = name, srcs = objs, visibility = visibility, testonly = testonly)

def cuda_library(name, srcs, hdrs = [], nvcc_hdrs = [], deps = [], visibility = None, testonly = False):
    """A cc_library whose sources are .cu files compiled by nvcc.

    hdrs: the library's public headers (also visible to nvcc).
    nvcc_hdrs: other workspace headers the .cu files include (e.g. //base:status.h);
        their cc_library must also be in deps, for linking.
    The objects are also available as the filegroup `<name>_objects` (tests inspect them).
    """
    cuda_objects(
        name = name + "_objects",
        srcs = srcs,
        hdrs = hdrs + nvcc_hdrs,
        visibility = visibility,
        testonly = testonly,
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objects"],
        hdrs = hdrs,
        deps = deps + ["//third_party:cuda"],
        # Linked into the same executable or shared library as the static CUDA runtime,
        # whose symbols are hidden (see cuda/BUILD).
        alwayslink = True,
        linkstatic = True,
        visibility = visibility,
        testonly = testonly,
    )
