#!/usr/bin/env python3
"""bench/torch_all_reduce.py: torch.distributed.all_reduce on tessera beside Gloo, in one job.

Every rank runs this script (mpirun, torchrun, or tools/cluster/cluster.sh run). The
world group is created on the first backend of --backends and a second group over the
same ranks on each other backend, so every backend moves the same tensors between the
same processes, size after size, in one run. Each prints a table in nccl-tests' format:

    size  count  type  redop  root  time  algbw  busbw  #wrong

for float32 SUM, in place (torch's all_reduce has no out-of-place form, so the
out-of-place columns of nccl-tests are left out). time is the mean of one call over
the timed iterations, the maximum over ranks, in microseconds; algbw = size / time;
busbw = algbw * 2(n-1)/n; #wrong counts elements that differ from the exact sum in one
checked call (summed over ranks). A summary follows: per size, tessera's busbw over
Gloo's, and time ratios.

  # 2 ranks on this host (env:// through MASTER_ADDR / MASTER_PORT):
  mpirun --allow-run-as-root -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29511 \\
      python3 bench/torch_all_reduce.py -b 8 -e 64M -f 4
  # 2 x 2 emulated hosts (the ranks meet through a file store in the run's directory):
  bash tools/cluster/cluster.sh up --hosts 2 --rate 2gbit
  bash tools/cluster/cluster.sh run --hosts 2 --ranks-per-host 2 -x GLOO_SOCKET_IFNAME=eth0 \\
      -- python3 bench/torch_all_reduce.py -b 8 -e 64M -f 4

python3: a Python whose torch has tessera_torch (pip install ./pytorch, docs/pytorch.md),
torch 2.x or Debian's 1.13.
"""
import argparse
import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

import torch_groups


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-b", "--minbytes", type=parse_size, default=8)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20,
                   help="timed iterations per size (fewer above 4 MiB: see --bytes_per_size)")
    p.add_argument("-w", "--warmup_iters", type=int, default=3)
    p.add_argument("--bytes_per_size", type=parse_size, default=1 << 30,
                   help="cap on the bytes timed per size: iterations = min(-n, this / size), at least 3")
    p.add_argument("-c", "--check", type=int, default=1, help="1: count wrong elements in one call per size")
    p.add_argument("--backends", default="tessera,gloo")
    p.add_argument("--init", default=None,
                   help="init_method; default: file:// in $CLUSTER_RUN_DIR under cluster.sh, else env://")
    p.add_argument("--json", default=None, help="rank 0 also writes the rows here")
    p.add_argument("--timeout_s", type=float, default=300)
    return p.parse_args(argv)


def sizes(args):
    size = max(4, args.minbytes - args.minbytes % 4)
    while size <= args.maxbytes:
        yield size
        size *= args.stepfactor


def time_one_size(tensor, group, iters, warmup, world):
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    elapsed_us = (time.perf_counter() - start) / iters * 1e6
    worst = torch.tensor([elapsed_us], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
    return worst.item()


def count_wrong(tensor, group, rank, world):
    # Values rank + 1 + (i mod 3): sums stay exact small integers in float32.
    pattern = torch.arange(tensor.numel(), dtype=torch.float32).remainder_(3)
    tensor.copy_(pattern + (rank + 1))
    dist.all_reduce(tensor, group=group)
    expected = pattern * world + world * (world + 1) / 2
    wrong = torch.tensor([int((tensor != expected).sum().item())], dtype=torch.int64)
    dist.all_reduce(wrong, group=group)
    return int(wrong.item())


def header(backend, world, args, lines):
    out = ["# torch_all_reduce: torch.distributed.all_reduce on %s, %d rank%s, float32 sum, in place"
           % (backend, world, "" if world == 1 else "s"),
           "# time: mean of one call over the timed iterations, the maximum over ranks (us)",
           "# algbw = size / time; busbw = algbw * 2(n-1)/n; GB/s with GB = 1e9 bytes",
           "#", "# Using ranks"] + lines + ["#",
           "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s" % ("", "", "", "", "", "", "in-place", "", ""),
           "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s" % ("size", "count", "type", "redop", "root", "time",
                                                              "algbw", "busbw", "#wrong"),
           "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s" % ("(B)", "(elements)", "", "", "", "(us)",
                                                              "(GB/s)", "(GB/s)", "")]
    return "\n".join(out)


def format_time(us):
    if us >= 10000:
        return "%7.0f" % us
    if us >= 100:
        return "%7.1f" % us
    return "%7.2f" % us


def row(size, time_us, world, wrong):
    algbw = size / time_us / 1e3
    busbw = algbw * (2 * (world - 1) / world if world > 1 else 0)
    return "  %10d  %12d  %8s  %6s  %6d  %s  %6.2f  %6.2f  %6s" % (
        size, size // 4, "float", "sum", -1, format_time(time_us), algbw, busbw,
        "N/A" if wrong is None else str(wrong)), algbw, busbw


def summary(results, backends, world):
    if len(backends) < 2:
        return ""
    base, peers = backends[0], backends[1:]
    out = ["#", "# Summary: %s against %s (busbw ratio; time ratio, %s / peer)" % (base, ", ".join(peers), base),
           "# %10s  " % "size" + "  ".join("%22s" % p for p in peers)]
    for size in sorted(results[base]):
        cells = []
        for peer in peers:
            a, b = results[base][size], results[peer][size]
            bw = a["busbw"] / b["busbw"] if b["busbw"] > 0 else float("nan")
            cells.append("%9.2fx bw %6.3fx t" % (bw, a["time_us"] / b["time_us"]))
        out.append("  %10d  " % size + "  ".join(cells))
    return "\n".join(out)


def main(argv):
    args = parse_args(argv)
    backends = torch_groups.parse_backends(args.backends)
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=args.timeout_s)
    rank, world, groups = torch_groups.open_groups(backends, timeout, args.init)

    me = "#  Rank %2d Pid %6d on %10s" % (rank, os.getpid(), socket.gethostname())
    lines = [None] * world
    dist.all_gather_object(lines, me)
    results = {b: {} for b in backends}
    tables = {b: [] for b in backends}
    for size in sizes(args):
        tensor = torch.ones(size // 4, dtype=torch.float32)
        iters = max(3, min(args.iters, args.bytes_per_size // size))
        for backend in backends:
            group = groups[backend]
            time_us = time_one_size(tensor, group, iters, args.warmup_iters, world)
            wrong = count_wrong(tensor, group, rank, world) if args.check else None
            text, algbw, busbw = row(size, time_us, world, wrong)
            tables[backend].append(text)
            results[backend][size] = {"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": wrong}
            if rank == 0:
                print("%-8s %s" % (backend, text), file=sys.stderr, flush=True)
    if rank == 0:
        for backend in backends:
            print(header(backend, world, args, lines))
            print("\n".join(tables[backend]))
            print("#")
        print(summary(results, backends, world))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"world": world, "results": {b: {str(k): v for k, v in r.items()}
                                                       for b, r in results.items()}}, f, indent=1)
    torch_groups.close_groups(groups)


if __name__ == "__main__":
    main(sys.argv[1:])
