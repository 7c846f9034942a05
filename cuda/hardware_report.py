#!/usr/bin/env python3
"""Prints the CI log lines about hardware-dependent code after `bazel test`.

Reads Bazel's test logs (default: bazel-testlogs) and prints
  - the "CUDA code compiled: ..." line of //cuda:cuda_compiled_test;
  - how many test cases ran, over how many targets;
  - every test case skipped for lack of hardware (its skip message starts with
    "skipped: no ", e.g. "skipped: no GPU (...)"), with its target and reason.
Usage: python3 cuda/hardware_report.py [bazel-testlogs]. Always exits 0: it reports,
the tests themselves pass or fail.
"""

import os
import sys
import xml.etree.ElementTree as ElementTree


def target_of(testlogs, xml_path):
    package = os.path.relpath(os.path.dirname(os.path.dirname(xml_path)), testlogs)
    name = os.path.basename(os.path.dirname(xml_path))
    return "//%s:%s" % (package.replace(os.sep, "/"), name)


def skip_reason(testcase):
    skipped = testcase.find("skipped")
    if skipped is None:
        return None
    text = skipped.get("message") or skipped.text or ""
    for line in text.splitlines():
        if line.startswith("skipped: no "):
            return line
    return None


def main():
    testlogs = sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs"
    ran, targets, lacking = 0, 0, []
    for root, _, files in os.walk(testlogs, followlinks=True):
        if "test.xml" not in files:
            continue
        path = os.path.join(root, "test.xml")
        try:
            tree = ElementTree.parse(path)
        except (ElementTree.ParseError, OSError):
            continue
        targets += 1
        for testcase in tree.iter("testcase"):
            reason = skip_reason(testcase)
            if reason is not None:
                lacking.append("%s %s.%s: %s" % (target_of(testlogs, path), testcase.get("classname"),
                                                testcase.get("name"), reason))
            elif testcase.get("result", "completed") != "skipped":
                ran += 1
    compiled = os.path.join(testlogs, "cuda", "cuda_compiled_test", "test.log")
    try:
        with open(compiled, errors="replace") as log:
            for line in log:
                if line.startswith("CUDA code compiled:"):
                    print(line.rstrip())
    except OSError:
        print("CUDA code compiled: no log of //cuda:cuda_compiled_test in %s" % testlogs)
    print("Test cases run: %d, in %d test targets" % (ran, targets))
    print("Test cases skipped for lack of hardware: %d" % len(lacking))
    for entry in sorted(lacking):
        print("  " + entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
