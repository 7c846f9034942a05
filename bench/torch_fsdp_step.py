#!/usr/bin/env python3
"""bench/torch_fsdp_step.py: an FSDP2 (fully_shard) training step of a small transformer,
tessera beside Gloo in one job (torch 2.x).

Every rank runs this script (mpirun, torchrun, or tools/cluster/cluster.sh run). For each
backend of --backends it shards one copy of the same model (same seed) over a DeviceMesh
of a group of that backend (DeviceMesh.from_group): each encoder layer is a unit of its
own, so every step all-gathers each layer's parameters in forward and again in backward
(all_gather_into_tensor) and reduce-scatters its gradients (reduce_scatter_tensor), as
FSDP2 does. The backends take turns, step by step, on the same batches, with AdamW. It
prints, per backend, the median and fastest step over the timed steps (the slowest rank's
time of each step), and tessera's median over each peer's. The first --warmup steps of
each backend are not timed.

  mpirun --allow-run-as-root -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29513 \\
      python3 bench/torch_fsdp_step.py --layers 4 --width 256 --steps 10
"""
import argparse
import datetime
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import torch_groups


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="tessera,gloo")
    p.add_argument("--layers", type=int, default=4, help="transformer encoder layers")
    p.add_argument("--width", type=int, default=256, help="model width (d_model); heads: width / 32")
    p.add_argument("--seq", type=int, default=64, help="tokens per sample")
    p.add_argument("--batch", type=int, default=4, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=10, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per backend first")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--init", default=None, help="init_method (default env://, or a file store under cluster.sh)")
    return p.parse_args(argv)


def make_model(args):
    torch.manual_seed(0)
    layers = [nn.TransformerEncoderLayer(args.width, args.width // 32, 4 * args.width, dropout=0.0, batch_first=True)
              for _ in range(args.layers)]
    return nn.Sequential(*layers, nn.Linear(args.width, 16))


def sharded(args, group):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    mesh = DeviceMesh.from_group(group, "cpu", mesh_dim_names=("shard",))
    model = make_model(args)
    for layer in model[:-1]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def step(model, optimizer, x, y, group):
    dist.barrier(group=group)
    start = time.perf_counter()
    loss = F.cross_entropy(model(x).mean(1), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    return elapsed.item()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    backends = torch_groups.parse_backends(args.backends)
    rank, world, groups = torch_groups.open_groups(backends, datetime.timedelta(seconds=600), args.init)
    runs = {b: sharded(args, groups[b]) for b in backends}
    params = sum(p.numel() for p in make_model(args).parameters())
    times = {b: [] for b in backends}
    for i in range(args.warmup + args.steps):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(args.batch * world, args.seq, args.width, generator=g)[rank::world]
        y = torch.randint(0, 16, (args.batch * world,), generator=g)[rank::world]
        for backend in backends:
            seconds = step(*runs[backend], x, y, groups[backend])
            if i >= args.warmup:
                times[backend].append(seconds)
    if rank == 0:
        print("# torch_fsdp_step: FSDP2 step of a %d-layer transformer (width %d, %.1f M parameters, float32), "
              "%d ranks, batch %d x %d tokens per rank, AdamW; torch %s"
              % (args.layers, args.width, params / 1e6, world, args.batch, args.seq, torch.__version__))
        print("# %-10s %12s %12s" % ("backend", "median (ms)", "fastest (ms)"))
        for backend in backends:
            print("  %-10s %12.1f %12.1f" % (backend, 1e3 * statistics.median(times[backend]),
                                           1e3 * min(times[backend])))
        base = backends[0]
        for peer in backends[1:]:
            print("# %s / %s median step: %.3f" % (base, peer, statistics.median(times[base]) /
                                                  statistics.median(times[peer])))
    torch_groups.close_groups(groups)


if __name__ == "__main__":
    main(sys.argv[1:])
