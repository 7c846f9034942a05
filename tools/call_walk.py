#!/usr/bin/env python3
"""What one call costs in instructions, and which source files it enters.

Reads the callgrind files of a run collected around one C API function, e.g. the
8-byte allreduce of 2 ranks on one host:

  mpirun --allow-run-as-root -np 2 valgrind --tool=callgrind --collect-atstart=no \
      --toggle-collect=tesseraAllReduce --callgrind-out-file=/tmp/cg/callgrind.%p \
      bazel-bin/bench/all_reduce_perf -b 8 -e 8 -n 2000 -w 100 -c 0
  tools/call_walk.py --calls 4200 /tmp/cg/callgrind.*

(-n 2000 -w 100: 2000 timed calls out of place and 2000 in place, and 100 warm-up
calls of each, so 4200 calls per rank.)

Prints, per call and per rank: the instructions in each source file of tessera
(inlined code counted in the file it was written in) and how many times a function
of that file was called from another file; then the instructions of the whole call,
and of the call above the transport layer (without what the calls into transport/
cost: how many polls a call makes while it waits for its peer depends on the peer's
timing, not on the code of the call path). Instruction counts are exact, unlike timings, and comparable
between two builds of the same compiler and flags.
"""

import argparse
import collections
import re
import sys

# The transport layer: below it a call waits for its peers, and how many polls that
# takes depends on the peer's timing, not on the code of the call path.
TRANSPORT = re.compile(r"(^|/)transport/")


def short(path):
    m = re.search(r"(?:/proc/self/cwd/|^\./)(.*)$", path)
    return m.group(1) if m else path


def parse(path):
    """Self instructions and calls from other files per source file, and the inclusive
    instructions of the calls made into the transport layer from above it."""
    names = {"fl": {}, "fn": {}}
    self_ir = collections.Counter()
    entries = collections.Counter()
    below = 0
    fl = fi = callee_file = None
    pending_call = None  # after a calls= line: the callee's file, whose inclusive cost follows
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"^(fl|fi|fe|fn|cfl|cfi|cfn|ob|cob)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, ident, name = m.groups()
            table = "fl" if kind in ("fl", "fi", "fe", "cfl", "cfi") else ("fn" if kind in ("fn", "cfn") else None)
            if table is not None and name is not None:
                names[table][ident] = name
            if kind == "fl":
                fl = fi = names["fl"][ident]
            elif kind in ("fi", "fe"):
                fi = names["fl"][ident]
            elif kind == "fn":
                fi = fl
            elif kind in ("cfl", "cfi"):
                callee_file = names["fl"][ident]
            continue
        if line.startswith("calls="):
            count = int(line.split("=")[1].split()[0])
            target = short(callee_file or fl)
            if target != short(fl):
                entries[target] += count
            pending_call = target
            callee_file = None
            continue
        if line and (line[0].isdigit() or line[0] in "+-*"):
            if pending_call is not None:
                if TRANSPORT.search(pending_call) and not TRANSPORT.search(short(fl)):
                    below += int(line.split()[-1])
                pending_call = None
                continue
            self_ir[short(fi)] += int(line.split()[-1])
    return self_ir, entries, below


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, required=True, help="calls of the collected function per rank")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    for path in args.files:
        self_ir, entries, below = parse(path)
        total = sum(self_ir.values())
        print(f"== {path}: {total / args.calls:.0f} instructions per call, "
              f"{(total - below) / args.calls:.0f} above the transport layer")
        files = sorted(set(self_ir) | set(entries), key=lambda k: -self_ir[k])
        print(f"  {'instr/call':>10} {'entered/call':>12}  file (entered: calls from another file)")
        for k in files:
            if self_ir[k] / args.calls < 0.5 and entries[k] / args.calls < 0.01:
                continue
            print(f"  {self_ir[k] / args.calls:10.1f} {entries[k] / args.calls:12.2f}  {k}")


if __name__ == "__main__":
    sys.exit(main())
