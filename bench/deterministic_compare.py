#!/usr/bin/env python3
"""Deterministic mode (TESSERA_DETERMINISTIC=1) against the default, in one run.

Runs all_reduce_perf once per variant (a datatype and TESSERA_* settings), alternating
the variants for --rounds rounds, on one host under mpirun (--np) or on an emulated
cluster (--hosts, --ranks-per-host, --rate: tools/cluster/cluster.sh), and prints the
median time per size and variant and each variant's time over its baseline's (the
default mode of the same datatype: float32, or bfloat16 whose default wire is float32).

  bazel build //bench:all_reduce_perf
  python3 bench/deterministic_compare.py --np 2 --rounds 3 -- -b 8 -e 64M -f 2 -n 10 -w 2
  python3 bench/deterministic_compare.py --hosts 2 --ranks-per-host 2 --rate 2gbit -- -b 8 -e 64M -f 2 -n 5 -w 1

A variant is NAME:TYPE[:VAR=VALUE,...]; the first variant of each TYPE is its baseline.
With --by-elements the rows are element counts: -b and -e are float32 bytes, the other
types' are scaled to the same counts, and every variant's baseline is the first one (to
compare, say, deterministic bfloat16 with the float32 gradients it replaces).
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PERF = os.path.join(ROOT, "bazel-bin", "bench", "all_reduce_perf")
DEFAULT_VARIANTS = [
    "default:float",
    "deterministic:float:TESSERA_DETERMINISTIC=1",
    "default:bfloat16",
    "deterministic:bfloat16:TESSERA_DETERMINISTIC=1",
    "half-wire:bfloat16:TESSERA_HALF_WIRE=half",
]


def parse_variant(text):
    parts = text.split(":", 2)
    env = {}
    if len(parts) == 3 and parts[2]:
        for item in parts[2].split(","):
            key, value = item.split("=", 1)
            env[key] = value
    return {"name": parts[0], "type": parts[1], "env": env, "label": "%s %s" % (parts[1], parts[0])}


TYPE_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2}


# The all_reduce_perf flags of a variant: with --by-elements, -b and -e scaled from float32
# bytes to the variant's type.
def perf_flags(a, variant):
    flags = list(a.flags)
    if a.by_elements:
        for i in range(len(flags) - 1):
            if flags[i] in ("-b", "-e"):
                value = flags[i + 1]
                units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
                n = int(value[:-1]) * units[value[-1].upper()] if value[-1].upper() in units else int(value)
                flags[i + 1] = str(n * TYPE_BYTES[variant["type"]] // 4)
    return ["-d", variant["type"]] + flags


def command(a, variant):
    flags = perf_flags(a, variant)
    if a.hosts:
        return ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "run", "--name", a.name, "--hosts",
                str(a.hosts), "--ranks-per-host", str(a.ranks_per_host), "--timeout", "1800", "--", a.perf] + flags
    exports = []
    for key in variant["env"]:
        exports += ["-x", key]
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.np)] + exports + [a.perf] + flags


def run(a, variant):
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("TESSERA_") and k != "TESSERA_SOCKET_IFNAME"]:
        del env[key]
    env.update(variant["env"])
    out = subprocess.run(command(a, variant), capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (variant["label"], out.returncode, out.stdout[-3000:], out.stderr[-3000:]))
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            if f[8] != "0" or f[12] != "0":
                sys.exit("%s: wrong values at %s bytes" % (variant["label"], f[0]))
            key = int(f[1]) if a.by_elements else int(f[0])  # elements or bytes
            rows[key] = (float(f[5]), float(f[9]))  # out-of-place, in-place time (us)
    return rows


def size_text(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=2, help="ranks on this host (without --hosts)")
    ap.add_argument("--hosts", type=int, default=0)
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--rate", default="2gbit")
    ap.add_argument("--name", default="detcmp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", help="NAME:TYPE[:VAR=VALUE,...] (repeatable)")
    ap.add_argument("--sizes", default="8,65536,1048576,16777216,67108864", help="rows to print (bytes)")
    ap.add_argument("--perf", default=PERF, help="the all_reduce_perf binary (default: bazel-bin's)")
    ap.add_argument("--by-elements", action="store_true", help="rows by element count (see above)")
    ap.add_argument("flags", nargs="*", help="all_reduce_perf flags, after --")
    a = ap.parse_args()
    variants = [parse_variant(v) for v in (a.variant or DEFAULT_VARIANTS)]
    if a.hosts:
        subprocess.run(["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "up", "--name", a.name, "--hosts",
                        str(a.hosts), "--rate", a.rate], check=True, capture_output=True, timeout=600)
    try:
        results = [[] for _ in variants]
        for r in range(a.rounds):
            for i, v in enumerate(variants):
                print("# round %d/%d: %s" % (r + 1, a.rounds, v["label"]), file=sys.stderr, flush=True)
                results[i].append(run(a, v))
    finally:
        if a.hosts:
            subprocess.run(["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "down", "--name", a.name],
                           capture_output=True, timeout=600)
    baseline = {}
    for i, v in enumerate(variants):
        baseline.setdefault("any" if a.by_elements else v["type"], i)
    layout = "%d hosts x %d ranks, %s links" % (a.hosts, a.ranks_per_host, a.rate) if a.hosts else \
        "1 host x %d ranks" % a.np
    print("%s; median of %d rounds; time in us; ratio = time / the first variant%s\n" %
          (layout, a.rounds, "" if a.by_elements else " of its type"))
    print("| size | group | " + " | ".join("%s time | ratio" % v["label"] for v in variants) + " |")
    print("|---:|---|" + "---:|---:|" * len(variants))
    for size in [int(s) for s in a.sizes.split(",")] if not a.by_elements else sorted(results[0][0]):
        for group, name in ((0, "out-of-place"), (1, "in-place")):
            cells = []
            for i, v in enumerate(variants):
                if size not in results[i][0]:
                    cells.append("- | -")
                    continue
                t = statistics.median(rows[size][group] for rows in results[i])
                base = results[baseline["any" if a.by_elements else v["type"]]]
                b = statistics.median(rows[size][group] for rows in base)
                cells.append("%.1f | %.2f" % (t, t / b))
            label = "%d elements" % size if a.by_elements else size_text(size)
            print("| %s | %s | %s |" % (label, name, " | ".join(cells)))


if __name__ == "__main__":
    main()
