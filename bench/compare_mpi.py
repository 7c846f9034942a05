#!/usr/bin/env python3
"""Runs tessera's all_reduce_perf and Open MPI's mpi_all_reduce_perf side by side.

Both run under the same mpirun line with the same nccl-tests flags, alternating for
--rounds rounds (the machines are noisy; alternating spreads the noise over both), and
the median time per size and group is reported with the busbw ratio tessera / Open MPI.

  bazel build //bench:all_reduce_perf //bench:mpi_all_reduce_perf
  python3 bench/compare_mpi.py --np 2 --rounds 3 -- -b 8 -e 64M -f 2
"""
import argparse
import os
import statistics
import subprocess
import sys

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bazel-bin", "bench")


def run(program, np, flags):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np),
           os.path.join(BIN, program)] + flags
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():  # size count type redop root + 2 x (time algbw busbw wrong)
            if f[8] != "0" or f[12] != "0":
                sys.exit("%s: wrong values at size %s" % (program, f[0]))
            rows[int(f[0])] = (float(f[5]), float(f[9]))  # out-of-place, in-place time (us)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("flags", nargs="*", help="nccl-tests flags, after --")
    a = ap.parse_args()
    times = {"all_reduce_perf": [], "mpi_all_reduce_perf": []}
    for r in range(a.rounds):
        for prog in times:
            print("# round %d/%d: %s" % (r + 1, a.rounds, prog), file=sys.stderr, flush=True)
            times[prog].append(run(prog, a.np, a.flags))
    factor = 2.0 * (a.np - 1) / a.np if a.np > 1 else 0.0

    def median_busbw(prog, size, group):
        t = statistics.median(run_rows[size][group] for run_rows in times[prog])
        return size / t / 1e3 * factor, t

    print("| size (B) | group | tessera time (us) | tessera busbw (GB/s) | Open MPI time (us) | Open MPI busbw (GB/s) | busbw ratio | time ratio (MPI / tessera) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in sorted(times["all_reduce_perf"][0]):
        for group, name in ((0, "out-of-place"), (1, "in-place")):
            tb, tt = median_busbw("all_reduce_perf", size, group)
            mb, mt = median_busbw("mpi_all_reduce_perf", size, group)
            print("| %d | %s | %.1f | %.2f | %.1f | %.2f | %.2f | %.2f |" %
                  (size, name, tt, tb, mt, mb, tb / mb if mb else float("nan"), mt / tt))


if __name__ == "__main__":
    main()
