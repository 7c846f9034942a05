#!/usr/bin/env python3
"""Prints the CI log lines about hardware-dependent code after `bazel test`.

Reads Bazel's test logs (default: bazel-testlogs) and the build outputs beside them
(bazel-out/<config>/bin), and prints:
  - what CUDA code was compiled: the "CUDA code compiled: ..." line of
    //cuda:cuda_compiled_test (cubins and PTX found in the kernels' object), and the
    CUDA build of the library (libtessera_cuda.so);
  - what CUDA IPC code was compiled: the CUDA engine and //transport/cuda_ipc;
  - what ibverbs code was compiled: the objects of //transport/ibverbs;
  - what this host has: the answers the tests printed (no usable CUDA, no RDMA device,
    no CUDA driver for GPUDirect);
  - every hardware-dependent test target (cuda/, transport/ibverbs/, and targets named
    after CUDA or with a hardware skip) with its cases run, skipped and failed;
  - how many test cases ran in all;
  - every test case skipped for lack of hardware (its skip message starts with
    "skipped: no ", e.g. "skipped: no GPU (...)"), and every case skipped for any other
    reason, each with its target and message.
Usage: python3 cuda/hardware_report.py [bazel-testlogs]. Always exits 0: it reports,
the tests themselves pass or fail.
"""

import os
import re
import sys
import xml.etree.ElementTree as ElementTree

# Lines that tests print about this host (prefix -> the target that prints it).
HOST_ANSWERS = [
    ("GPU", "cuda/device_buffers_test", "this machine: "),
    ("RDMA", "transport/ibverbs/ibverbs_transport_test", "discovery here: "),
    ("GPUDirect", "transport/ibverbs/gpu_direct_test", "dma-buf path here: "),
]


# Directories Bazel adds under a target's logs for shards and --runs_per_test.
SHARD_OR_RUN = re.compile(r"^(shard_\d+_of_\d+)?_?(run_\d+_of_\d+)?$")


def target_of(testlogs, xml_path):
    directory = os.path.dirname(xml_path)
    suffix = ""
    if SHARD_OR_RUN.match(os.path.basename(directory)):
        suffix = " (%s)" % os.path.basename(directory)
        directory = os.path.dirname(directory)
    package = os.path.relpath(os.path.dirname(directory), testlogs)
    return "//%s:%s%s" % (package.replace(os.sep, "/"), os.path.basename(directory), suffix)


def skip_message(testcase):
    """The skip message of a skipped test case ("" if none given), else None."""
    skipped = testcase.find("skipped")
    if skipped is None:
        return "" if testcase.get("result") == "skipped" else None
    text = skipped.get("message") or skipped.text or ""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("skipped: "):
            return line
    return lines[-1] if lines else ""


def is_hardware_target(target):
    package, name = target[2:].split(" ")[0].split(":")
    return (package in ("cuda", "transport/ibverbs") or "cuda" in name or "gpu" in name
            or "ibverbs" in name or "rdma" in name)


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return None


def first_line_starting(lines, prefix):
    for line in lines or []:
        if line.startswith(prefix):
            return line
    return None


def objects_of(bin_dir, package, targets):
    """(names, total bytes) of the objects Bazel compiled for package's targets."""
    names, size = [], 0
    for target in targets:
        directory = os.path.join(bin_dir, package, "_objs", target)
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        # The position-independent objects when there are (what the libraries link).
        suffix = ".pic.o" if any(e.endswith(".pic.o") for e in entries) else ".o"
        for entry in entries:
            if entry.endswith(suffix):
                names.append(entry[:-len(suffix)])
                size += os.path.getsize(os.path.join(directory, entry))
    return names, size


def main():
    testlogs = sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs"
    bin_dir = os.path.join(os.path.dirname(os.path.realpath(testlogs)), "bin")
    ran, failed, targets = 0, 0, 0
    lacking, other_skips = [], []
    per_target = {}  # hardware-dependent target -> [run, skipped, failed]
    for root, _, files in os.walk(testlogs, followlinks=True):
        if "test.xml" not in files:
            continue
        path = os.path.join(root, "test.xml")
        try:
            tree = ElementTree.parse(path)
        except (ElementTree.ParseError, OSError):
            continue
        targets += 1
        target = target_of(testlogs, path)
        counts = [0, 0, 0]
        hardware_skip = False
        for testcase in tree.iter("testcase"):
            name = "%s.%s" % (testcase.get("classname"), testcase.get("name"))
            message = skip_message(testcase)
            if message is None:
                ran += 1
                counts[0] += 1
                if testcase.find("failure") is not None or testcase.find("error") is not None:
                    failed += 1
                    counts[2] += 1
            elif message.startswith("skipped: no "):
                lacking.append("%s %s: %s" % (target, name, message))
                counts[1] += 1
                hardware_skip = True
            else:
                other_skips.append("%s %s: %s" % (target, name, message or "(no message)"))
                counts[1] += 1
        if hardware_skip or is_hardware_target(target):
            per_target[target] = counts

    # What was compiled.
    compiled = first_line_starting(read_lines(os.path.join(testlogs, "cuda", "cuda_compiled_test", "test.log")),
                                   "CUDA code compiled:")
    print(compiled or "CUDA code compiled: no log of //cuda:cuda_compiled_test in %s" % testlogs)
    library = os.path.join(bin_dir, "libtessera_cuda.so")
    if os.path.exists(library):
        print("CUDA library compiled: libtessera_cuda.so (%d bytes): the C API with device buffers and streams "
              "(comm/device_path.cc, cuda/device_buffers.cc, the kernels)" % os.path.getsize(library))
    else:
        print("CUDA library compiled: no libtessera_cuda.so in %s" % bin_dir)
    names, size = objects_of(bin_dir, "cuda", ["cuda_device_engine"])
    ipc_names, ipc_size = objects_of(bin_dir, "transport/cuda_ipc", ["cuda_ipc", "device_engine"])
    if names:
        print("CUDA IPC code compiled: cuda/cuda_device_engine (%d bytes) and transport/cuda_ipc: %s (%d bytes); "
              "the links' protocol and the device-resident collectives run with the host engine in "
              "//tests:cuda_ipc_test" % (size, ", ".join(ipc_names), ipc_size))
    else:
        print("CUDA IPC code compiled: no objects of //cuda:cuda_device_engine in %s" % bin_dir)
    names, size = objects_of(bin_dir, "transport/ibverbs", ["ibverbs", "gpu_direct", "protocol"])
    tested = sorted(t for t in per_target if t.startswith("//transport/ibverbs:"))
    if names:
        print("ibverbs code compiled: transport/ibverbs: %d objects (%d bytes): %s; linked into %d test targets"
              % (len(names), size, ", ".join(names), len(tested)))
    else:
        print("ibverbs code compiled: no objects of //transport/ibverbs in %s" % bin_dir)

    # What this host has, as the tests saw it, and what therefore never ran.
    answers = {}
    for what, log, prefix in HOST_ANSWERS:
        line = first_line_starting(read_lines(os.path.join(testlogs, log, "test.log")), prefix)
        answers[what] = line[len(prefix):] if line else ""
        package, name = os.path.split(log)
        print("This host, %s: %s" % (what, answers[what] or "no such answer in the log of //%s:%s (the hardware is "
                                     "present, or the test did not run)" % (package, name)))
    if "no usable CUDA" in answers["GPU"]:
        print("Compiled, never run here (no GPU): the device kernels, DeviceStager's CUDA side, CUDA IPC, the CUDA "
              "engine of the cuda_ipc links (cuda/cuda_device_engine.cc), and libtessera_cuda.so's staged and "
              "device-resident paths for device buffers and streams")
    if "no RDMA device" in answers["RDMA"]:
        print("Compiled, never run here (no RDMA device): the ibverbs data path (devices, queue pairs, RDMA writes, "
              "completions), GPUDirect registration, and the GPUDirect-mode links of device-resident calls across "
              "hosts (device rings, kernels per piece, credits after their events)")

    print("Hardware-dependent test targets (cases run / skipped / failed):")
    for target in sorted(per_target):
        run, skipped, bad = per_target[target]
        print("  %s: %d run, %d skipped, %d failed" % (target, run, skipped, bad))
    print("Test cases run: %d (%d failed), in %d test targets" % (ran, failed, targets))
    print("Test cases skipped for lack of hardware: %d" % len(lacking))
    for entry in sorted(lacking):
        print("  " + entry)
    print("Test cases skipped for other reasons: %d" % len(other_skips))
    for entry in sorted(other_skips):
        print("  " + entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
