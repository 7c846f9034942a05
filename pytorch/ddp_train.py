"""A small data-parallel training script written for torch.distributed, any backend.

    torchrun --nproc_per_node=2 ddp_train.py --backend tessera --steps 20 --loss-log loss.txt
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python3 ddp_train.py --backend tessera
    python3 ddp_train.py --backend gloo --init file:///tmp/store --rank 0 --world 2

An ordinary DistributedDataParallel job: a two-hidden-layer MLP learns to classify
synthetic data labelled by a fixed random "teacher" network, with SGD and momentum. The
only line that knows about tessera is `import tessera_torch` when --backend is tessera;
everything else is what a gloo or nccl script does, so the tests can run the same script
on both backends and compare.

Data: for every step, a global batch of --global-batch samples is drawn from a generator
seeded with (--seed, step); rank r trains on its own contiguous shard of it. The global
batch does not depend on the world size, so runs on 2 and on 4 ranks train on the same
data.

Rank and world come from the environment (env://: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, as torchrun sets them; under mpirun, tessera_torch fills RANK and
WORLD_SIZE), or from --init URL --rank R --world N.

Outputs: on rank 0, --loss-log FILE gets one line per step, "step local_loss mean_loss", both
losses as repr() of a Python float (round-trips exactly): rank 0's own loss and the mean
over ranks (one all_reduce). Every rank prints "rank R params sha256 HEX" for its final
parameters and, with --param-dump FILE, saves them (torch.save of a name -> tensor dict; "{rank}"
in FILE becomes the rank).
"""

import argparse
import datetime
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

IN_FEATURES = 32
HIDDEN = 64
CLASSES = 8


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="gloo", help="gloo, tessera, or any torch.distributed backend")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--hook", choices=("none", "fp16", "powersgd"), default="none",
                   help="DDP communication hook")
    p.add_argument("--static-graph", action="store_true", help="DDP(static_graph=True)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model, then wrap it in DDP (torch 2.x)")
    p.add_argument("--loss-log", help="rank 0 writes the per-step loss here")
    p.add_argument("--param-dump", help="every rank saves its final parameters here ({rank} is replaced)")
    p.add_argument("--global-batch", type=int, default=96, help="samples per step over all ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size")
    p.add_argument("--timeout", type=float, default=1800.0, help="process group timeout, seconds")
    p.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep after each step")
    p.add_argument("--print-every", type=int, default=0, help="print the loss every N steps (0: never)")
    p.add_argument("--init", help="init_method URL (default: env://)")
    p.add_argument("--rank", type=int)
    p.add_argument("--world", type=int)
    return p.parse_args(argv)


def init_distributed(args):
    if args.backend == "tessera":
        import tessera_torch  # noqa: F401  registers the backend "tessera"
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.init:
        dist.init_process_group(args.backend, init_method=args.init, rank=args.rank,
                                world_size=args.world, timeout=timeout)
    else:
        dist.init_process_group(args.backend, init_method="env://", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def make_model():
    return nn.Sequential(
        nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
        nn.Linear(HIDDEN, CLASSES),
    )


class SyntheticData:
    """Samples labelled by a fixed random teacher network; rank r's shard of each step."""

    def __init__(self, seed, global_batch, rank, world):
        if global_batch % world:
            raise ValueError("--global-batch %d does not split over %d ranks" % (global_batch, world))
        self.seed, self.global_batch = seed, global_batch
        self.shard = global_batch // world
        self.begin = rank * self.shard
        g = torch.Generator().manual_seed(seed + 1)
        self.teacher = torch.randn(IN_FEATURES, CLASSES, generator=g)

    def batch(self, step):
        g = torch.Generator().manual_seed(self.seed * 100003 + step)
        x = torch.randn(self.global_batch, IN_FEATURES, generator=g)
        y = (x @ self.teacher).argmax(dim=1)
        end = self.begin + self.shard
        return x[self.begin:end], y[self.begin:end]


def register_hook(model, hook):
    if hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                            start_powerSGD_iter=2)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def parameter_digest(model):
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv=None):
    args = parse_args(argv)
    rank, world = init_distributed(args)
    # The same initial weights on every rank; DDP's constructor broadcasts rank 0's anyway.
    torch.manual_seed(args.seed)
    module = make_model()
    ddp_options = {"static_graph": True} if args.static_graph else {}
    model = DistributedDataParallel(torch.compile(module) if args.compile else module,
                                    bucket_cap_mb=args.bucket_cap_mb, **ddp_options)
    register_hook(model, args.hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = SyntheticData(args.seed, args.global_batch, rank, world)
    log = open(args.loss_log, "w") if args.loss_log and rank == 0 else None

    for step in range(args.steps):
        x, y = data.batch(step)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        loss_sum = loss.detach().clone()
        dist.all_reduce(loss_sum)
        if log:
            log.write("%d %r %r\n" % (step, loss.item(), loss_sum.item() / world))
            log.flush()
        if args.print_every and step % args.print_every == 0:
            print("rank %d step %d loss %.6f" % (rank, step, loss.item()), flush=True)
        if args.step_delay:
            time.sleep(args.step_delay)

    if log:
        log.close()
    dist.barrier()
    params = {name: p.detach().clone() for name, p in module.state_dict().items()}
    if args.param_dump:
        torch.save(params, args.param_dump.replace("{rank}", str(rank)))
    print("rank %d params sha256 %s" % (rank, parameter_digest(module)), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
