#!/usr/bin/python3
"""bench/torch_ddp_resnet50.py: torchvision ResNet-50 under DistributedDataParallel, tessera
beside Gloo in one job.

Every rank runs this script (mpirun or torchrun). For each backend of --backends, in
turn, it wraps a fresh ResNet-50 (same seed) in DDP over a group of that backend and
trains on synthetic ImageNet-shaped batches with bf16 autocast (the CPU path that runs
at a usable speed here) and SGD:
  - --steps steps under `no_sync()`: compute alone, no gradient communication;
  - --steps steps with DDP's gradient allreduce, overlapped with backward as usual.
It prints, per backend, images/s of the synchronised steps (global batch / median step)
and the share of a step spent waiting for communication:
  wait share = 1 - median(no_sync step) / median(synchronised step)
that is, the communication time DDP could not hide behind backward. The first
--warmup steps of each phase are not timed.

  mpirun --allow-run-as-root -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29512 \\
      /usr/bin/python3 bench/torch_ddp_resnet50.py --batch 8 --steps 6
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="tessera,gloo")
    p.add_argument("--batch", type=int, default=8, help="images per rank per step")
    p.add_argument("--image", type=int, default=224, help="side of the square input images")
    p.add_argument("--steps", type=int, default=6, help="timed steps per phase")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before each phase")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--init", default=None, help="init_method (default env://)")
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


def phase(model, optimizer, images, labels, steps, warmup, sync):
    times = []
    for i in range(warmup + steps):
        if sync:
            elapsed = one_step(model, optimizer, images, labels)
        else:
            with model.no_sync():
                elapsed = one_step(model, optimizer, images, labels)
        if i >= warmup:
            times.append(elapsed)
    return statistics.median(times)


def worst(value, group):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def main(argv):
    args = parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    import tessera_torch  # noqa: F401  registers "tessera", fills RANK/WORLD_SIZE under mpirun
    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(minutes=10)
    dist.init_process_group(backends[0], init_method=args.init or "env://", rank=rank, world_size=world,
                            timeout=timeout)
    groups = {backends[0]: dist.group.WORLD}
    for backend in backends[1:]:
        groups[backend] = dist.new_group(backend=backend, timeout=timeout)

    generator = torch.Generator().manual_seed(1234 + rank)
    images = torch.randn(args.batch, 3, args.image, args.image, generator=generator)
    labels = torch.randint(0, 1000, (args.batch,), generator=generator)
    report = []
    for backend in backends:
        group = groups[backend]
        model = DDP(make_model(seed=7), process_group=group)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        local = phase(model, optimizer, images, labels, args.steps, args.warmup, sync=False)
        synced = phase(model, optimizer, images, labels, args.steps, args.warmup, sync=True)
        local, synced = worst(local, group), worst(synced, group)
        rate = args.batch * world / synced
        share = max(0.0, 1.0 - local / synced)
        report.append((backend, rate, synced, local, share))
        if rank == 0:
            print("%-8s %7.2f images/s  step %.3f s  compute-only step %.3f s  waiting for communication %4.1f%%"
                  % (backend, rate, synced, local, 100 * share), file=sys.stderr, flush=True)
        del model, optimizer
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
    dist.barrier()
    for backend in backends[1:]:
        dist.destroy_process_group(groups[backend])
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
