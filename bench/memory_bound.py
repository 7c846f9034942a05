#!/usr/bin/env python3
"""A 2-rank allreduce on one host against the memory-traffic bound, measured in one run.

The bound. An allreduce of n bytes over 2 ranks must, at the least, on each rank read
the two halves it reduces (n), write its reduced half (n/2), then read the peer's
reduced half and write it into its own result (n): 2.5n of memory traffic per rank,
5n for both, sharing one memory system. With memory traffic M bytes/s (read plus
write, as memcpy of m bytes moves 2m), the allreduce takes at least 5n / M, so its busbw
(= algbw for 2 ranks) is at most M / 5.

M is memcpy's rate from the kernel micro-benchmark (//collectives:kernels_bench, the
memcpy it times beside the float32 sum kernel on 64 MiB buffers, counted as read plus
write), taken two ways: one copy of the benchmark alone (one core), and two copies at
once (both cores, the rates summed), since the allreduce's two ranks use both cores and
one core alone may not draw all the memory bandwidth. The script alternates the
micro-benchmark and all_reduce_perf (2 ranks under mpirun, tessera's shared-memory
transport) for --rounds rounds and reports, per round and as the median, tessera's
busbw and its ratio to M / 5 for both figures of M.

  bazel build //bench:all_reduce_perf //collectives:kernels_bench
  python3 bench/memory_bound.py --rounds 3 --bytes 64M
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PERF = os.path.join(ROOT, "bazel-bin", "bench", "all_reduce_perf")
KERNELS = os.path.join(ROOT, "bazel-bin", "collectives", "kernels_bench")


def memcpy_rates(processes):
    """memcpy's GB/s (read + write) beside float32 sum on 64 MiB, median of 3 repetitions,
    in each of `processes` copies of the micro-benchmark run at once."""
    results = [tempfile.NamedTemporaryFile(suffix=".json") for _ in range(processes)]
    cmds = [[KERNELS, "--benchmark_filter=^reduce/float32 sum/64MiB", "--benchmark_repetitions=3",
             "--benchmark_out=" + r.name, "--benchmark_out_format=json"] for r in results]
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cmds]
    rates = []
    for proc, cmd, result in zip(procs, cmds, results):
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), proc.returncode, err))
        runs = [b for b in json.load(result)["benchmarks"] if b.get("run_type") == "iteration"]
        if not runs:
            sys.exit("kernels_bench printed no float32 sum 64MiB run")
        rates.append(statistics.median(b["memcpy_GBps"] for b in runs))
        result.close()
    return rates


def allreduce_busbw(size, flags):
    """tessera's out-of-place busbw (GB/s) at `size` bytes, 2 ranks on this host."""
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "TESSERA_TRANSPORT=shm",
           PERF, "-b", str(size), "-e", str(size)] + flags
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 13 and f[0] == str(size):
            if f[8] != "0":
                sys.exit("all_reduce_perf: wrong values")
            return float(f[7])
    sys.exit("all_reduce_perf printed no row for %d bytes:\n%s" % (size, out.stdout))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bytes", default="64M")
    ap.add_argument("flags", nargs="*", help="more all_reduce_perf flags, after -- (default: -n 10 -w 3 -c 1)")
    a = ap.parse_args()
    size = parse_size(a.bytes)
    flags = a.flags or ["-n", "10", "-w", "3", "-c", "1"]
    rows = []
    print("| round | memcpy, one core (GB/s) | memcpy, both cores at once (GB/s) | tessera busbw (GB/s) "
          "| tessera / (one core / 5) | tessera / (both cores / 5) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in range(a.rounds):
        print("# round %d/%d" % (r + 1, a.rounds), file=sys.stderr, flush=True)
        one = memcpy_rates(1)[0]
        both = sum(memcpy_rates(2))
        busbw = allreduce_busbw(size, flags)
        rows.append((one, both, busbw))
        print("| %d | %.2f | %.2f | %.2f | %.0f%% | %.0f%% |" %
              (r + 1, one, both, busbw, 500 * busbw / one, 500 * busbw / both), flush=True)
    med = [statistics.median(x[i] for x in rows) for i in range(3)]
    print("| median | %.2f | %.2f | %.2f | %.0f%% | %.0f%% |" %
          (med[0], med[1], med[2], statistics.median(500 * x[2] / x[0] for x in rows),
           statistics.median(500 * x[2] / x[1] for x in rows)))


if __name__ == "__main__":
    main()
