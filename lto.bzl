"""Link options of the link-time optimised shared libraries (docs/performance.md#lto)."""

# The objects they link carry GCC's intermediate code (.bazelrc's --per_file_copt), so
# these links optimise across files. One partition: with several, GCC turns a file's
# static thread-locals into global symbols (name.lto_priv.0) that the version scripts
# do not hide, and the library would export them.
LTO_LINKOPTS = [
    "-flto=auto",
    "-flto-partition=one",
    "-mtls-dialect=gnu2",
]
