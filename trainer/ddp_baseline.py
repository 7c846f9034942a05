#!/usr/bin/python3
"""PyTorch DDP baseline for train_resnet's throughput: the same work with stock tools.

torchvision's resnet50 under DistributedDataParallel on the gloo backend (Debian's
python3-torch 1.13 and python3-torchvision 0.14, CPU), with what train_resnet --synthetic
does per step: a fixed random batch per rank, bfloat16 autocast, label-smoothed
cross-entropy, SGD with momentum and no weight decay on batch-norm parameters and biases,
25 MiB gradient buckets, buffers broadcast from rank 0 before each forward.

Launch like the trainer:
    mpirun -np 2 /usr/bin/python3 trainer/ddp_baseline.py --batch=16 --steps=8
(rank and size from OMPI_COMM_WORLD_*, or RANK/WORLD_SIZE as torchrun sets them;
MASTER_ADDR/MASTER_PORT default to 127.0.0.1:29533). Rank 0 prints one line per step
and a summary with images/s over the steps after --warmup.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def rank_and_size():
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("RANK", "WORLD_SIZE")):
        if rank_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def local_size():
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"):
        if var in os.environ:
            return max(1, int(os.environ[var]))
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=16, help="global batch (split evenly over ranks)")
    parser.add_argument("--steps", type=int, default=8, help="steps to run")
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the summary")
    parser.add_argument("--crop_size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--bucket_mb", type=float, default=25.0)
    parser.add_argument("--lr", type=float, default=0.1, help="at batch 256 (linear scaling)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / local ranks)")
    args = parser.parse_args()

    rank, world = rank_and_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(args.threads or max(1, os.cpu_count() // local_size()))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if args.batch % world:
        raise SystemExit("global batch %d is not a multiple of %d ranks" % (args.batch, world))
    per_rank = args.batch // world

    torch.manual_seed(1)
    model = torchvision.models.resnet50(num_classes=args.classes)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb, broadcast_buffers=True)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.SGD(
        [{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr * args.batch / 256, momentum=0.9)

    torch.manual_seed(1001 + rank)
    images = torch.randn(per_rank, 3, args.crop_size, args.crop_size)
    labels = torch.randint(args.classes, (per_rank,))

    times = []
    for step in range(args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logits = ddp(images)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=0.1)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        if rank == 0:
            print("ddp step %d/%d loss %.4f %.3f s %.2f images/s" %
                  (step + 1, args.steps, loss.item(), times[-1], args.batch / times[-1]), flush=True)
    steady = times[args.warmup:] or times
    if rank == 0:
        print("ddp_baseline: %d rank(s), batch %d (%d per rank), %s, gloo: %.2f images/s over %d steps (%.3f s/step)" %
              (world, args.batch, per_rank, args.precision, args.batch * len(steady) / sum(steady), len(steady),
               sum(steady) / len(steady)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
