#!/usr/bin/env python3
"""Fails, naming the line, when a source file includes a header it may not use.

  layering_test.py LAYERS_BZL FILE...

Two rules, both from the layer table (layers.bzl, which the BUILD files' visibility
also reads):
- A folder of the library includes headers of the folders it may use only: its own,
  the ones below it that it names, and what those may use. A test (*_test.cc) may
  also include the test harness of tests/.
- Nothing outside transport/ (and the tests) includes a transport backend's header
  (transport/shm, tcp, ucx, ibverbs, cuda_ipc): above the transport layer, code
  reaches the backends through the registry (transport/registry.h) and the seam
  (transport/transport.h, plugin.h) only.
"""

import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/([^"]*)"')
BACKEND = re.compile(r"^(shm|tcp|ucx|ibverbs|cuda_ipc)/")
APPLICATIONS = {"bench", "nccl", "pytorch", "simulator", "tests", "tools", "trainer"}


def read_layers(path):
    table = {}
    exec(compile(open(path).read(), path, "exec"), table)  # a Starlark file Python can read
    return [layer[0] for layer in table["LAYERS"]], table["uses_of_layers"]()


def folder_of(path):
    # Bazel hands sources as paths from the workspace root (maybe behind ./).
    return path.lstrip("./").split("/")[0]


def violations(path, layers, uses):
    """The lines of `path` that break a rule, as messages."""
    folder = folder_of(path)
    is_test = path.endswith("_test.cc")
    found = []
    for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        top, rest = m.group(1), m.group(2)
        if top == "tessera":
            top = "include"  # the public header, include/tessera/tessera.h
        where = f"{path}:{number}: {line.strip()}"
        if top == "transport" and BACKEND.match(rest) and folder not in ("transport", "tests"):
            found.append(f"{where}: a transport backend's header above the transport layer")
        if folder not in uses or top == folder:
            continue
        if top in uses[folder] or (is_test and top == "tests"):
            continue
        if top in layers or top in APPLICATIONS or top == "include":
            found.append(f"{where}: {folder}/ may use only {', '.join(sorted(set(uses[folder]) - {folder}))}")
    return found


def main():
    layers, uses = read_layers(sys.argv[1])
    files = [f for f in sys.argv[2:] if re.search(r"\.(cc|h|cu)$", f)]
    checked_folders = {folder_of(f) for f in files}
    missing = [f for f in layers if f not in checked_folders]
    if len(files) < 200 or missing:
        print(f"only {len(files)} files to check, none of {missing}: the filegroups lost their sources")
        return 1
    found = [v for f in files for v in violations(f, layers, uses)]
    if found:
        print("includes that break the layering (layers.bzl, docs/architecture.md#layers):")
        print("\n".join(found))
        return 1
    print(f"checked {len(files)} files of {len(checked_folders)} folders: every include is of a layer below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
