"""Compiler flags shared by //nccl and //nccl/cuda."""

# How sources include the real NCCL header (/usr/local/cuda/include/nccl.h, never a
# copy). Bazel refuses -I/-isystem outside the workspace and reports every header found
# through a .d file that no target declares; -idirafter makes the toolkit's directory a
# system directory, and -MMD leaves system headers out of the .d file. The price: Bazel
# does not notice when the toolkit's headers change (after a CUDA upgrade, run
# `bazel clean`). A repository for the toolkit's headers in third_party/ would remove
# both flags.
REAL_NCCL_HEADER_COPTS = [
    "-idirafter",
    "/usr/local/cuda/include",
    "-MMD",
]
