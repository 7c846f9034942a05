#!/usr/bin/env python3
"""PyTorch's own NCCL backend (ProcessGroupNCCL) and DistributedDataParallel over
tessera's CUDA drop-in libnccl.so.2, with every rank on one GPU (NVIDIA's NCCL refuses
two ranks on one device; the drop-in stages through host memory and accepts them).

Run with the drop-in preloaded, so that torch's NCCL calls reach it and not the
libnccl.so.2 of its wheel:

  LD_PRELOAD=$PWD/bazel-bin/nccl/cuda/libnccl.so.2 python3 nccl/cuda/torch_nccl_check.py

Checks, each exact unless said (values are small integers, exact in every type):
  - all_reduce: 8 datatypes x sum, product, min, max (and avg, PreMulSum for floats) at
    1, 1031 and 262147 elements, against the reduction computed on the CPU;
  - broadcast, reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single,
    a send/recv ring (batch_isend_irecv), an asynchronous call waited on, barrier;
  - 64 MiB float32 all_reduce, exact, and its bandwidth (nccl-tests' busbw);
  - DistributedDataParallel, 10 SGD steps: float32 against one process training on the
    whole batch (within 1e-5), and float16 autocast with a GradScaler and float16
    gradients on the wire (fp16_compress_hook): identical weights on every rank.
Prints one line per check group and exits 0 when all pass. --backend gloo runs what gloo
supports on CPU tensors, to try the script where no GPU is.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = (1, 1031, 262147)
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64,
          torch.int8, torch.uint8, torch.int32, torch.int64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class Checks:
    def __init__(self, rank):
        self.rank = rank
        self.failed = []
        self.count = 0

    def expect(self, ok, what):
        self.count += 1
        if not ok:
            self.failed.append(what)
            print(f"rank {self.rank}: FAIL {what}", flush=True)


def values(n, rank, dtype):
    """Rank `rank`'s input: small integers, 1..rank+5, in every type."""
    return ((torch.arange(n, dtype=torch.int64) % 5) + rank + 1).to(dtype)


def reduce_on_cpu(world, n, dtype, op):
    inputs = [values(n, r, torch.float64) for r in range(world)]
    out = inputs[0].clone()
    for x in inputs[1:]:
        if op == "sum" or op == "avg" or op == "premul":
            out = out + x
        elif op == "product":
            out = out * x
        elif op == "min":
            out = torch.minimum(out, x)
        elif op == "max":
            out = torch.maximum(out, x)
    if op == "avg":
        out = out / world
    if op == "premul":
        # torch hands NCCL a bfloat16 PreMulSum's factor as a float, where NCCL reads the
        # first two bytes as a bfloat16: 0.5 becomes 0 (NVIDIA's NCCL 2.28 gives zeros on
        # an H100, and so does the drop-in, which reads the scalar as NCCL does).
        out = out * (0.0 if dtype == torch.bfloat16 else 0.5)
    return out.to(dtype)


def torch_op(op, dtype):
    ops = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
           "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    if op == "premul":
        return dist._make_nccl_premul_sum(0.5)
    return ops[op]


def check_all_reduce(checks, args, rank, world, device):
    nccl = args.backend == "nccl"
    for dtype in DTYPES if nccl else (torch.float32, torch.float64, torch.int32, torch.int64):
        ops = ["sum", "product", "min", "max"]
        if nccl and dtype in FLOATS:
            ops += ["avg", "premul"]
        for op in ops:
            for n in SIZES:
                x = values(n, rank, dtype).to(device)
                dist.all_reduce(x, op=torch_op(op, dtype))
                expected = reduce_on_cpu(world, n, dtype, op)
                got = x.cpu()
                checks.expect(torch.equal(got, expected),
                              f"all_reduce {dtype} {op} n={n}: {got[:3].tolist()} (expected {expected[:3].tolist()})")


def check_collectives(checks, args, rank, world, device):
    n = 1031
    x = values(n, rank, torch.float32).to(device)
    dist.broadcast(x, src=world - 1)
    checks.expect(torch.equal(x.cpu(), values(n, world - 1, torch.float32)), "broadcast")

    x = values(n, rank, torch.int32).to(device)
    dist.reduce(x, dst=0)
    if rank == 0:
        checks.expect(torch.equal(x.cpu(), reduce_on_cpu(world, n, torch.int32, "sum")), "reduce")

    mine = values(n, rank, torch.float16).to(device)
    expected = torch.cat([values(n, r, torch.float16) for r in range(world)])
    pieces = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(pieces, mine)
    checks.expect(torch.equal(torch.cat(pieces).cpu(), expected), "all_gather")
    if args.backend == "gloo":  # torch 1.13's Gloo has neither of the next two
        return
    gathered = torch.empty(world * n, dtype=torch.float16, device=device)
    dist.all_gather_into_tensor(gathered, mine)
    checks.expect(torch.equal(gathered.cpu(), expected), "all_gather_into_tensor")

    whole = values(world * n, rank, torch.float32).to(device)
    part = torch.empty(n, dtype=torch.float32, device=device)
    dist.reduce_scatter_tensor(part, whole)
    expected = reduce_on_cpu(world, world * n, torch.float32, "sum")[rank * n:(rank + 1) * n]
    checks.expect(torch.equal(part.cpu(), expected), "reduce_scatter_tensor")

    send = (torch.arange(world * n, dtype=torch.int64) + 1000 * rank).to(device)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    expected = torch.cat([torch.arange(rank * n, (rank + 1) * n, dtype=torch.int64) + 1000 * r
                          for r in range(world)])
    checks.expect(torch.equal(recv.cpu(), expected), "all_to_all_single")

    right, left = (rank + 1) % world, (rank - 1) % world
    out = values(n, rank, torch.float32).to(device)
    into = torch.empty_like(out)
    ops = [dist.P2POp(dist.isend, out, right), dist.P2POp(dist.irecv, into, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    checks.expect(torch.equal(into.cpu(), values(n, left, torch.float32)), "send/recv ring")

    x = values(n, rank, torch.float32).to(device)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    checks.expect(torch.equal(x.cpu(), reduce_on_cpu(world, n, torch.float32, "sum")), "async all_reduce")
    dist.barrier()


def check_large(checks, args, rank, world, device):
    n = 16 << 20  # 64 MiB of float32
    x = values(n, rank, torch.float32).to(device)
    dist.all_reduce(x)
    checks.expect(torch.equal(x.cpu(), reduce_on_cpu(world, n, torch.float32, "sum")), "all_reduce 64 MiB")
    iters = args.iters
    for _ in range(3):
        dist.all_reduce(x)
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    sync(device)
    seconds = (time.perf_counter() - start) / iters
    algbw = x.numel() * 4 / seconds / 1e9
    if rank == 0:
        print(f"all_reduce 64 MiB float32, {world} ranks: {seconds * 1e3:.2f} ms, "
              f"algbw {algbw:.2f} GB/s, busbw {algbw * 2 * (world - 1) / world:.2f} GB/s", flush=True)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_and_data(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(10, 32, 64, generator=generator)  # 10 steps of a global batch of 32
    labels = torch.randint(0, 10, (10, 32), generator=generator)
    return model, inputs.to(device), labels.to(device)


def train(model, inputs, labels, half, rank, world, hook=None):
    """10 SGD steps; with world > 1 each rank takes its slice of every global batch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda") if half else None
    per_rank = inputs.shape[1] // world
    for step in range(inputs.shape[0]):
        x = inputs[step, rank * per_rank:(rank + 1) * per_rank]
        y = labels[step, rank * per_rank:(rank + 1) * per_rank]
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16, enabled=half):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def check_ddp(checks, args, rank, world, device):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    for half in ([False, True] if device.type == "cuda" else [False]):
        model, inputs, labels = model_and_data(device)
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=0.05)
        if half:
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        weights = train(ddp, inputs, labels, half, rank, world)
        everyone = [torch.empty_like(weights) for _ in range(world)]
        dist.all_gather(everyone, weights)
        same = all(torch.equal(w, weights) for w in everyone)
        label = "float16 autocast, float16 wire" if half else "float32"
        checks.expect(same, f"DDP {label}: identical weights on every rank")
        if not half:
            reference, inputs, labels = model_and_data(device)
            expected = train(reference, inputs, labels, False, 0, 1)
            diff = (weights - expected).abs().max().item()
            checks.expect(diff < 1e-5, f"DDP float32 against one process on the whole batch (max diff {diff:.2e})")
            if rank == 0:
                print(f"DDP float32: max difference from one process on the whole batch {diff:.2e}", flush=True)


def nccl_libraries():
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libnccl" in line})


def run(rank, args):
    world = args.ranks
    if args.backend == "nccl":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    options = {"device_id": device} if device.type == "cuda" else {}  # eager NCCL set-up
    dist.init_process_group(args.backend, init_method=f"file://{args.store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120), **options)
    checks = Checks(rank)
    groups = {"all_reduce": check_all_reduce, "collectives": check_collectives, "large": check_large,
              "ddp": check_ddp}
    for group in (groups[name] for name in args.checks.split(",")):
        before = (checks.count, len(checks.failed))
        group(checks, args, rank, world, device)
        if rank == 0:
            print(f"{group.__name__}: {checks.count - before[0] - (len(checks.failed) - before[1])}"
                  f"/{checks.count - before[0]} passed", flush=True)
    if rank == 0:
        print(f"NCCL libraries in rank 0: {nccl_libraries()}", flush=True)
    dist.destroy_process_group()
    if checks.failed:
        raise SystemExit(f"rank {rank}: {len(checks.failed)} of {checks.count} checks failed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--checks", default="all_reduce,collectives,large,ddp",
                        help="which groups of checks, comma-separated")
    args = parser.parse_args()
    if args.backend == "nccl" and not torch.cuda.is_available():
        print("skipped: no GPU (torch.cuda.is_available() is False)")
        return 0
    args.store = f"/tmp/torch_nccl_check.{os.getpid()}"
    print(f"torch {torch.__version__}, backend {args.backend}, {args.ranks} ranks, "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}", flush=True)
    try:
        mp.spawn(run, args=(args,), nprocs=args.ranks)
    finally:
        if os.path.exists(args.store):
            os.remove(args.store)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
