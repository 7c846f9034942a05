"""FSDP2, HSDP and distributed checkpoints on the "tessera" backend (torch 2.x), as real
processes, against the same jobs on Gloo.

    bazel test //pytorch:torch2_fsdp_test

Every job trains the same small transformer (two encoder layers of width 64 and a linear
head; fsdp_model below) from the same initial weights on the same data, each rank its
slice of every global batch, with SGD and momentum, and rank 0 saves the full parameters:

  test_fully_shard_four_ranks  fully_shard on a 1-D mesh of 4 ranks (FSDP2: all_gather_
                               into_tensor of the shards, reduce_scatter_tensor of the
                               gradients): tessera's final parameters against Gloo's.
  test_hsdp_2x2                HSDP: fully_shard on a 2 x 2 DeviceMesh ("replicate",
                               "shard"): shards over one dimension, all_reduce over the
                               other, on subgroups the mesh makes of the world group.
  test_checkpoint_4_to_2       torch.distributed.checkpoint: saved by 4 ranks sharding the
                               model, loaded by 2 ranks sharding it differently; the loaded
                               parameters are the saved ones, bit for bit.

Tolerance. With 2 ranks per reduction every element is one addition, the same in either
order: HSDP (reduce-scatter over 2, then all_reduce over 2) must match Gloo bit for bit.
With 4 ranks the backends add the ranks' float32 gradients in different orders, an ulp or
so apart per step (the same as DDP on 4 ranks, ddp_test.py). Measured over 10 steps: the
parameters differ by up to 1.2e-7 (|params| <= ~0.5: an ulp or two); the tolerance is
1e-6, about 8x that, and far below what training moves a weight (0.07 here) or what one
step's wrong reduction would.
"""

import os
import sys
import tempfile
import time
import unittest

import torch

import rank_launcher

RANK_TIMEOUT = 180  # seconds; a job of 4 ranks takes ~10 s on 2 idle cores
STEPS = 10
LOCAL_BATCH = 4
TOLERANCE = 1e-6  # 4 ranks; 2 ranks per reduction: 0 (see above)


def fsdp_model(seed=0):
    import torch.nn as nn
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True) for _ in range(2)],
                         nn.Linear(64, 8))


def shard(model, mesh):
    """FSDP2: each encoder layer a unit of its own, then the whole model."""
    from torch.distributed.fsdp import fully_shard
    for layer in model[:2]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def make_mesh(shape):
    from torch.distributed.device_mesh import init_device_mesh
    if len(shape) == 2:
        return init_device_mesh("cpu", shape, mesh_dim_names=("replicate", "shard"))
    return init_device_mesh("cpu", shape, mesh_dim_names=("shard",))


def batch(step, rank, world):
    """Rank `rank`'s slice of step `step`'s global batch (the same data on any backend)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(LOCAL_BATCH * world, 16, 64, generator=g)
    y = torch.randint(0, 8, (LOCAL_BATCH * world,), generator=g)
    begin = rank * LOCAL_BATCH
    return x[begin:begin + LOCAL_BATCH], y[begin:begin + LOCAL_BATCH]


def train(model, rank, world, steps):
    import torch.nn.functional as F
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        x, y = batch(step, rank, world)
        loss = F.cross_entropy(model(x).mean(1), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


def full_parameters(model):
    """Every parameter whole (DTensor.full_tensor: an all-gather), by name."""
    return {name: value.full_tensor().detach().clone() for name, value in model.state_dict().items()}


def join(args, backend):
    import datetime

    import torch.distributed as dist
    if backend == "tessera":
        import tessera_torch  # noqa: F401  registers the backend "tessera"
    dist.init_process_group(backend, init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=60))


def rank_main():
    """A rank of a job: CASE is train (BACKEND MESH OUT), save (MESH DIR OUT) or load
    (MESH DIR OUT); MESH is "4" or "2x2"; rank 0 writes the full parameters to OUT."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    args = rank_launcher.parse_rank_args()
    torch.set_num_threads(1)
    if args.case == "train":
        backend, mesh_text, out = args.rest
    else:
        backend, (mesh_text, directory, out) = "tessera", args.rest
    join(args, backend)
    mesh = make_mesh(tuple(int(n) for n in mesh_text.split("x")))
    start = time.monotonic()
    if args.case == "train":
        model = shard(fsdp_model(), mesh)
        loss = train(model, args.rank, args.world, STEPS)
        print("rank %d loss %.6f after %d steps, %.2f s" % (args.rank, loss, STEPS, time.monotonic() - start))
    elif args.case == "save":
        model = shard(fsdp_model(), mesh)
        train(model, args.rank, args.world, 3)
        dcp.save({"model": model.state_dict()}, checkpoint_id=directory)
    else:  # load: other initial weights, another sharding
        model = shard(fsdp_model(seed=99), mesh)
        state = {"model": model.state_dict()}
        dcp.load(state, checkpoint_id=directory)
        model.load_state_dict(state["model"])
    params = full_parameters(model)
    if args.rank == 0:
        torch.save(params, out)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d done" % args.rank, flush=True)


class FsdpTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="fsdp_test_")

    def run_job(self, world, case, *rest):
        start = time.monotonic()
        results = rank_launcher.run_ranks(world, os.path.abspath(__file__), case, list(rest), timeout=RANK_TIMEOUT,
                                          env={"OMP_NUM_THREADS": "1"})
        for r in results:
            self.assertFalse(r.hung, repr(r))
            self.assertEqual(r.returncode, 0, repr(r))
            self.assertIn("rank %d done" % r.rank, r.output, repr(r))
        print("  %s on %d ranks %s: %.1f s" % (case, world, " ".join(rest[:2]), time.monotonic() - start),
              file=sys.stderr)

    def trained(self, backend, world, mesh):
        out = os.path.join(self.workdir, "%s_%s.pt" % (backend, mesh))
        self.run_job(world, "train", backend, mesh, out)
        return torch.load(out)

    def compare(self, world, mesh, tolerance):
        gloo = self.trained("gloo", world, mesh)
        tessera = self.trained("tessera", world, mesh)
        self.assertEqual(sorted(gloo), sorted(tessera))
        worst = max((gloo[name] - tessera[name]).abs().max().item() for name in gloo)
        moved = max((gloo[name] - fsdp_model().state_dict()[name]).abs().max().item() for name in gloo)
        print("  %s: max |tessera - gloo| %.3g (tolerance %g); training moved weights by up to %.3g"
              % (mesh, worst, tolerance, moved), file=sys.stderr)
        self.assertLessEqual(worst, tolerance)
        self.assertGreater(moved, 1e-3, "training did not move the weights: the comparison would prove nothing")

    def test_fully_shard_four_ranks(self):
        self.compare(4, "4", TOLERANCE)

    def test_hsdp_2x2(self):
        self.compare(4, "2x2", 0.0)

    def test_checkpoint_4_to_2(self):
        directory = os.path.join(self.workdir, "checkpoint")
        saved, loaded = os.path.join(self.workdir, "saved.pt"), os.path.join(self.workdir, "loaded.pt")
        self.run_job(4, "save", "4", directory, saved)
        self.run_job(2, "load", "2", directory, loaded)
        saved, loaded = torch.load(saved), torch.load(loaded)
        self.assertEqual(sorted(saved), sorted(loaded))
        for name in saved:
            self.assertTrue(torch.equal(saved[name], loaded[name]), name)
        fresh = fsdp_model(seed=99).state_dict()
        self.assertFalse(all(torch.equal(saved[n], fresh[n]) for n in saved), "the load changed nothing")


if __name__ == "__main__":
    if rank_launcher.is_rank_process():
        rank_main()
    else:
        unittest.main(verbosity=2)
