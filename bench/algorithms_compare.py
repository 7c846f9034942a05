#!/usr/bin/env python3
"""Every allreduce algorithm forced, and the automatic choice, on one emulated layout.

Brings up an emulated cluster (tools/cluster/cluster.sh: H hosts, links shaped to
--rate), runs all_reduce_perf once per algorithm with TESSERA_ALGO forced and once with
auto, alternating for --rounds rounds, and prints a markdown table of busbw per size and
algorithm (median over rounds), which algorithm auto chose, auto's busbw as a fraction of
the best forced one, and the cost model's prediction next to the measured time of the
chosen algorithm (from the TESSERA_DEBUG=INFO log of rank 0).

  bazel build //bench:all_reduce_perf
  python3 bench/algorithms_compare.py --hosts 4 --ranks-per-host 2 --rate 2gbit -- -b 8 -e 64M -f 8
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ALGOS = ["ring", "recursive_doubling", "rabenseifner", "torus", "hierarchical", "hierarchical_leader"]


def cluster(*args, env=None, check=True):
    cmd = ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh")] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=check, timeout=3600)


def run(args, algo, flags):
    env = dict(os.environ, TESSERA_ALGO=algo, TESSERA_DEBUG="INFO")
    out = cluster("run", "--name", args.name, "--hosts", str(args.hosts), "--ranks-per-host",
                  str(args.ranks_per_host), "--timeout", "1800", "--",
                  os.path.join(ROOT, "bazel-bin/bench/all_reduce_perf"), *flags, env=env, check=False)
    if out.returncode != 0:
        sys.exit("algorithm %s failed (%d):\n%s%s" % (algo, out.returncode, out.stdout[-3000:], out.stderr[-3000:]))
    rows, chosen, predicted = {}, {}, {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            if f[8] != "0" or f[12] != "0":
                sys.exit("%s: wrong values at %s bytes" % (algo, f[0]))
            rows[int(f[0])] = (float(f[5]), float(f[7]))  # out-of-place time (us), busbw
        m = re.match(r"# algorithm (\S+): (\d+) to (\d+) B", line)
        if m:
            chosen[(int(m.group(2)), int(m.group(3)))] = m.group(1)
    for line in out.stderr.splitlines():
        m = re.search(r"rank 0: allreduce of (\d+) B: (\S+) \(predicted ([0-9.]+) us", line)
        if m:
            predicted[int(m.group(1))] = (m.group(2), float(m.group(3)))
    return rows, chosen, predicted


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rate", default="2gbit")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--name", default="algcmp")
    ap.add_argument("flags", nargs="*")
    a = ap.parse_args()
    cluster("up", "--name", a.name, "--hosts", str(a.hosts), "--rate", a.rate)
    try:
        results = {algo: [] for algo in ALGOS + ["auto"]}
        chosen, predicted = {}, {}
        for r in range(a.rounds):
            for algo in ALGOS + ["auto"]:
                print("# round %d/%d: %s" % (r + 1, a.rounds, algo), file=sys.stderr, flush=True)
                rows, ch, pr = run(a, algo, a.flags)
                results[algo].append(rows)
                if algo == "auto":
                    chosen, predicted = ch, pr
    finally:
        cluster("down", "--name", a.name, check=False)

    def med(algo, size, k):
        return statistics.median(rows[size][k] for rows in results[algo])

    p = a.hosts * a.ranks_per_host
    factor = 2.0 * (p - 1) / p

    def busbw(algo, size):  # from the time: the printed busbw is rounded to 0.01 GB/s
        return size / med(algo, size, 0) / 1e3 * factor

    sizes = sorted(results["ring"][0])
    print("%d hosts x %d ranks, links %s; busbw in GB/s (median of %d rounds, out-of-place)\n" %
          (a.hosts, a.ranks_per_host, a.rate, a.rounds))
    print("| size (B) | " + " | ".join(ALGOS) + " | auto | auto chose | auto / best | predicted (us) | measured (us) |")
    print("|---:|" + "---:|" * len(ALGOS) + "---:|---|---:|---:|---:|")
    for size in sizes:
        bw = {algo: busbw(algo, size) for algo in ALGOS}
        best = max(bw.values())
        auto_bw = busbw("auto", size)
        pick = predicted.get(size, ("?", float("nan")))
        print("| %d | %s | %.4f | %s | %.2f | %.1f | %.1f |" % (
            size, " | ".join("%.4f" % bw[x] for x in ALGOS), auto_bw, pick[0],
            auto_bw / best if best > 0 else float("nan"), pick[1], med("auto", size, 0)))


if __name__ == "__main__":
    main()
