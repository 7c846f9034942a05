#!/usr/bin/env python3
"""OSU collective latency with and without libtessera_mpi.so, beside tessera's own *_perf.

  mpi/osu_compare.py --osu OSU_BLOCKING_DIR --layout 2|4|HOSTSxRANKS [--cluster-name NAME]
                     [--max-bytes 4194304] [--validate [--programs allreduce,bcast,...]]

For osu_allreduce (MPI_FLOAT), osu_bcast and osu_allgather, in one run and in turn:
the OSU program on Open MPI, the same program with the library preloaded, and
tessera's own benchmark of that collective (all_reduce_perf, broadcast_perf,
all_gather_perf: nccl-tests format, its out-of-place time) at the same sizes. Prints one
Markdown table a collective: size, the three latencies in us, and the ratios
tessera_mpi / Open MPI and tessera_mpi / tessera's own. --validate runs OSU's own
validation (-c) for MPI_CHAR, MPI_INT and MPI_FLOAT both ways instead, and prints the
pass counts. A layout HOSTSxRANKS runs on the emulated cluster (tools/cluster; the
cluster NAME, default `tessera`, must be up with at least HOSTS hosts).

Building OSU is not part of tessera (docs/mpi.md gives the commands). Run it under the
exclusive CPU lock when the figures are to be reported.
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bazel-bin")
LIB = os.path.join(BIN, "mpi", "libtessera_mpi.so")
OWN = {"allreduce": "all_reduce_perf", "bcast": "broadcast_perf", "allgather": "all_gather_perf"}


def launcher(args, env):
    """The mpirun (or cluster.sh run) command for the layout, with env as -x options."""
    xs = []
    for key, value in env.items():
        xs += ["-x", f"{key}={value}"]
    if "x" in args.layout:
        hosts, ranks = args.layout.split("x")
        return ["bash", args.cluster_sh, "run", "--name", args.cluster_name, "--hosts", hosts, "--ranks-per-host",
                ranks] + xs + ["--"]
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", args.layout] + xs


def run(command, timeout=900, check=True):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if check and done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-3000:]}")
    return done.stdout


def osu(args, name, preload, extra, check=True):
    env = {"LD_PRELOAD": LIB} if preload else {}
    out = run(launcher(args, env) + [os.path.join(args.osu, f"osu_{name}")] + extra, check=check)
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+)\s+([0-9.]+)(\s+(Pass|Fail))?\s*$", line)
        if m:
            rows[int(m.group(1))] = (float(m.group(2)), m.group(4))
    return rows


def own(args, name, low, high, iterations):
    """tessera's own benchmark: size -> out-of-place time (us)."""
    nranks = layout_ranks(args.layout)
    scale = nranks if name == "allgather" else 1  # nccl-tests counts allgather's whole output
    out = run(launcher(args, {}) + [os.path.join(BIN, "bench", OWN[name]), "-b", str(low * scale), "-e",
                                     str(high * scale), "-f", "2", "-n", str(iterations), "-w",
                                     str(iterations // 10), "-c", "0"])
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 7 and not line.startswith("#") and fields[0].isdigit():
            rows[int(fields[0]) // scale] = float(fields[5])
    return rows


def layout_ranks(layout):
    if "x" in layout:
        hosts, ranks = layout.split("x")
        return int(hosts) * int(ranks)
    return int(layout)


def compare(args):
    low = 4  # osu_allreduce of MPI_FLOAT starts at one element
    for name in ("allreduce", "bcast", "allgather"):
        # OSU's own iteration counts: 1000 calls a size up to 8 KiB, 100 above; the same
        # for tessera's own benchmark.
        options = ["-m", f"{low}:{args.max_bytes}"]
        if name == "allreduce":
            options += ["-T", "mpi_float"]
        open_mpi = osu(args, name, False, options)
        tessera = osu(args, name, True, options)
        mine = own(args, name, 8, 8192, 1000)
        mine.update(own(args, name, 16384, args.max_bytes, 100))
        print(f"\nosu_{name}, layout {args.layout}: latency (us)\n")
        print("| size (B) | Open MPI | tessera_mpi | tessera's own | tessera_mpi / Open MPI | tessera_mpi / own |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size in sorted(open_mpi):
            a, b = open_mpi[size][0], tessera.get(size, (float("nan"),))[0]
            c = mine.get(size)
            own_text = f"{c:.2f}" if c else "-"
            own_ratio = f"{b / c:.2f}" if c else "-"
            print(f"| {size} | {a:.2f} | {b:.2f} | {own_text} | {b / a:.2f} | {own_ratio} |")
        sys.stdout.flush()


def validate(args):
    print(f"\nOSU validation (-c), layout {args.layout}: sizes that passed, of the sizes run (OSU stops at the first"
          " size that fails)\n")
    print("| program | type | Open MPI | tessera_mpi |")
    print("|---|---|---:|---:|")
    for name in args.programs.split(","):
        for typ in ("mpi_char", "mpi_int", "mpi_float"):
            options = ["-c", "-T", typ, "-m", f"1:{args.max_bytes}", "-i", "20", "-x", "2"]
            counts = []
            for preload in (False, True):
                rows = osu(args, name, preload, options, check=False)
                failed = [size for size, r in sorted(rows.items()) if r[1] == "Fail"]
                counts.append(f"{len(rows) - len(failed)} of {len(rows)}" + (f" (fails at {failed[0]} B)" if failed else ""))
            print(f"| osu_{name} | {typ} | {counts[0]} | {counts[1]} |")
            sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--osu", required=True, help="OSU's c/mpi/collective/blocking folder, built")
    parser.add_argument("--layout", required=True, help="ranks on this host (2, 4) or HOSTSxRANKS")
    parser.add_argument("--cluster-sh", default=os.path.join(ROOT, "tools", "cluster", "cluster.sh"))
    parser.add_argument("--cluster-name", default="tessera", help="the emulated cluster's name (cluster.sh --name)")
    parser.add_argument("--max-bytes", type=int, default=4 << 20)
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--programs", default="allreduce,bcast,allgather,reduce,alltoall,reduce_scatter_block",
                        help="--validate: the OSU programs to run (osu_NAME), comma-separated")
    args = parser.parse_args()
    validate(args) if args.validate else compare(args)


if __name__ == "__main__":
    main()
