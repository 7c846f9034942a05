#!/usr/bin/env python3
"""bench/torch_ddp_resnet50.py: torchvision ResNet-50 under DistributedDataParallel, tessera
beside Gloo in one job.

Every rank runs this script (mpirun or torchrun). For each backend of --backends it
wraps a ResNet-50 (same seed) in DDP over a group of that backend. It
trains on synthetic ImageNet-shaped batches with bf16 autocast (the CPU path that runs
at a usable speed here) and SGD. The backends take turns, step by step, and each
alternates two kinds of step, --steps times each:
  - a step under `no_sync()`: compute alone, no gradient communication;
  - a step with DDP's gradient allreduce, overlapped with backward as usual.
It prints, per backend, images/s of the synchronised steps (global batch / median step)
and the share of a step spent waiting for communication:
  wait share = 1 - median(no_sync step) / median(synchronised step)
that is, the communication time DDP could not hide behind backward (on a machine whose
cores are all computing, that includes the processor time the communication takes from
the computation). The first --warmup pairs are not timed.

  mpirun --allow-run-as-root -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29512 \\
      python3 bench/torch_ddp_resnet50.py --batch 8 --steps 6
"""
import argparse
import datetime
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_groups


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="tessera,gloo")
    p.add_argument("--batch", type=int, default=8, help="images per rank per step")
    p.add_argument("--image", type=int, default=224, help="side of the square input images")
    p.add_argument("--steps", type=int, default=8, help="timed steps of each kind")
    p.add_argument("--warmup", type=int, default=1, help="untimed pairs of steps first")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--init", default=None, help="init_method (default env://, or a file store under cluster.sh)")
    return p.parse_args(argv)


def make_model(seed):
    import torchvision
    torch.manual_seed(seed)
    return torchvision.models.resnet50(num_classes=1000)


def one_step(model, optimizer, images, labels):
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def timed_steps(runs, images, labels, steps, warmup):
    """Round after round, every backend's model takes a no_sync step and then a
    synchronised step, so that drift in the machine's speed affects every backend and
    both kinds of step alike. Returns {backend: (median no_sync, median synchronised)}."""
    times = {backend: ([], []) for backend in runs}
    for i in range(warmup + steps):
        for backend, (model, optimizer) in runs.items():
            with model.no_sync():
                t_local = one_step(model, optimizer, images, labels)
            t_synced = one_step(model, optimizer, images, labels)
            if i >= warmup:
                times[backend][0].append(t_local)
                times[backend][1].append(t_synced)
    return {b: (statistics.median(l), statistics.median(s)) for b, (l, s) in times.items()}


def worst(value, group):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def main(argv):
    args = parse_args(argv)
    backends = torch_groups.parse_backends(args.backends)
    torch.set_num_threads(args.threads)
    rank, world, groups = torch_groups.open_groups(backends, datetime.timedelta(minutes=10), args.init)

    generator = torch.Generator().manual_seed(1234 + rank)
    images = torch.randn(args.batch, 3, args.image, args.image, generator=generator)
    labels = torch.randint(0, 1000, (args.batch,), generator=generator)
    runs = {}
    for backend in backends:
        model = DDP(make_model(seed=7), process_group=groups[backend])
        runs[backend] = (model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    medians = timed_steps(runs, images, labels, args.steps, args.warmup)
    report = []
    for backend in backends:
        local, synced = (worst(t, groups[backend]) for t in medians[backend])
        rate = args.batch * world / synced
        share = max(0.0, 1.0 - local / synced)
        report.append((backend, rate, synced, local, share))
    del runs
    if rank == 0:
        print("# torch_ddp_resnet50: torchvision resnet50, DDP, %d ranks x batch %d, %dx%d, bf16 autocast, "
              "%d intra-op thread(s) per rank, median of %d steps" % (world, args.batch, args.image, args.image,
                                                                      args.threads, args.steps))
        print("# %-8s  %9s  %9s  %14s  %13s" % ("backend", "images/s", "step (s)", "no_sync step (s)",
                                               "comm wait"))
        for backend, rate, synced, local, share in report:
            print("  %-8s  %9.2f  %9.3f  %16.3f  %12.1f%%" % (backend, rate, synced, local, 100 * share))
        if len(report) > 1:
            print("# images/s, %s / %s: %.3fx" % (report[0][0], report[1][0], report[0][1] / report[1][1]))
    torch_groups.close_groups(groups)


if __name__ == "__main__":
    main(sys.argv[1:])
