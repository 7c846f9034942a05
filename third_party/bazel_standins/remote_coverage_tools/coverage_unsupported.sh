#!/bin/bash
# Stand-in for Bazel's coverage tools, which cannot be downloaded here.
echo "tessera: 'bazel coverage' is not supported offline (see third_party/bazel_standins/README.md)" >&2
exit 1
