"""What torch 2.x asks of a backend beyond the collectives themselves, on the "tessera"
backend, as real processes (4 ranks unless a case says otherwise):

    bazel test //pytorch:torch2_backend_api_test

  test_eager_init_and_subgroups  init_process_group(device_id=cpu:0) (eager: torch binds
                                 the group to the device and splits from it): new_group with
                                 ranks left out (they call perform_nocolor_split), then the
                                 world and the subgroups all work.
  test_split_group_and_mesh      split_group into pairs, and a 2 x 2 DeviceMesh's row and
                                 column groups, each reducing what it should.
  test_coalescing                _coalescing_manager around all_gather_into_tensor,
                                 reduce_scatter_tensor and all_reduce (torch calls the
                                 backend's *_coalesced once, between start/endCoalescing), and
                                 the group's allgather_into_tensor_coalesced directly.
  test_shrink                    rank 3 is left out: the others shrink_group([3]) and reduce
                                 on the 3 that remain.
  test_abort_and_errors          get_error before and after a failure (a rank that skips a
                                 collective: TIMEOUT, naming it); abort() makes the next
                                 collective fail at once saying so; shutdown().
  test_sequence_numbers          the group's sequence number counts collectives, the same on
                                 every rank, and each Work carries its own.
  test_mixed_backend_string      init_process_group("cpu:tessera,cuda:gloo"): CPU tensors go
                                 to tessera (cuda:nccl needs a GPU, which CI lacks).
"""

import datetime
import os
import sys
import time
import unittest

import torch
import torch.distributed as dist

import rank_launcher
from torch._C._distributed_c10d import ErrorType

RANK_TIMEOUT = 120
TIMEOUT = datetime.timedelta(seconds=30)


def ints(rank, n=6):
    return torch.arange(n, dtype=torch.int64) + 10 * rank


def total(ranks, n=6):
    return sum(ints(r, n) for r in ranks)


class Checks:
    def __init__(self, rank):
        self.rank = rank
        self.failed = 0

    def equal(self, what, actual, expected):
        if not torch.equal(actual, expected):
            self.failed += 1
            print("MISMATCH rank %d: %s: got %s, want %s" % (self.rank, what, actual, expected), flush=True)

    def true(self, what, condition, detail=""):
        if not condition:
            self.failed += 1
            print("MISMATCH rank %d: %s %s" % (self.rank, what, detail), flush=True)

    def raises(self, what, fragments, fn):
        try:
            fn()
        except RuntimeError as e:
            for fragment in fragments:
                self.true(what + " says %r" % fragment, fragment in str(e), str(e)[:400])
            return str(e)
        self.true(what + " raises", False)
        return ""


def backend_of(group=None):
    group = group or dist.distributed_c10d._get_default_group()
    return group._get_backend(torch.device("cpu"))


# --- Cases (each a job of its own) -----------------------------------------------------

def case_eager_init_and_subgroups(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT, device_id=torch.device("cpu:0"))
    c.true("the group is bound to cpu:0", dist.distributed_c10d._get_default_group().bound_device_id ==
           torch.device("cpu:0"))
    low = dist.new_group([0, 1])   # ranks 2 and 3 are left out
    high = dist.new_group([2, 3])
    t = ints(args.rank)
    dist.all_reduce(t)
    c.equal("world all_reduce", t, total(range(args.world)))
    mine, members = (low, [0, 1]) if args.rank < 2 else (high, [2, 3])
    t = ints(args.rank)
    dist.all_reduce(t, group=mine)
    c.equal("subgroup all_reduce", t, total(members))


def case_split_group_and_mesh(args, c):
    from torch.distributed.device_mesh import init_device_mesh
    import tessera_torch  # noqa: F401
    dist.init_process_group("cpu:tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT)
    c.true("the backend supports splitting", backend_of().supports_splitting)
    pairs = [[0, 1], [2, 3]]
    pair = dist.split_group(split_ranks=pairs, timeout=TIMEOUT)
    mine = pairs[args.rank // 2]
    c.true("split_group's size", pair.size() == 2, str(pair.size()))
    t = ints(args.rank)
    dist.all_reduce(t, group=pair)
    c.equal("split_group all_reduce", t, total(mine))
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("row", "column"))
    row, column = args.rank // 2, args.rank % 2
    t = ints(args.rank)
    dist.all_reduce(t, group=mesh.get_group("column"))  # along a row: ranks of this row
    c.equal("mesh row group", t, total([row * 2, row * 2 + 1]))
    t = ints(args.rank)
    dist.all_reduce(t, group=mesh.get_group("row"))  # along a column
    c.equal("mesh column group", t, total([column, column + 2]))


def case_coalescing(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT)
    world = args.world
    c.true("the backend supports coalescing", backend_of().supports_coalescing)
    shapes = ((3,), (2, 5), (7,))
    inputs = [ints(args.rank, n=int(torch.Size(s).numel())).reshape(s).to(dtype)
              for s, dtype in zip(shapes, (torch.int64, torch.float32, torch.int32))]
    outputs = [torch.empty((world,) + tuple(t.shape), dtype=t.dtype) for t in inputs]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for out, inp in zip(outputs, inputs):
            dist.all_gather_into_tensor(out, inp)
    for i, (out, inp) in enumerate(zip(outputs, inputs)):
        want = torch.stack([ints(r, n=inp.numel()).reshape(inp.shape).to(inp.dtype) for r in range(world)])
        c.equal("coalesced all_gather_into_tensor %d" % i, out, want)
    outs = [torch.empty(2, dtype=torch.float64), torch.empty(3, dtype=torch.float64)]
    ins = [torch.arange(2.0 * world, dtype=torch.float64) + args.rank,
           torch.arange(3.0 * world, dtype=torch.float64) * (args.rank + 1)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for out, inp in zip(outs, ins):
            dist.reduce_scatter_tensor(out, inp)
    for i, (out, n) in enumerate(zip(outs, (2, 3))):
        everyone = [torch.arange(n * world, dtype=torch.float64) + r if i == 0 else
                    torch.arange(n * world, dtype=torch.float64) * (r + 1) for r in range(world)]
        want = sum(everyone)[args.rank * n:(args.rank + 1) * n]
        c.equal("coalesced reduce_scatter_tensor %d" % i, out, want)
    tensors = [ints(args.rank, n) for n in (1, 4, 9)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for t in tensors:
            dist.all_reduce(t)
    for t, n in zip(tensors, (1, 4, 9)):
        c.equal("coalesced all_reduce of %d" % n, t, total(range(world), n))
    pg = dist.distributed_c10d._get_default_group()
    outputs = [torch.empty(world * 4, dtype=torch.int64)]
    pg.allgather_into_tensor_coalesced(outputs, [ints(args.rank, 4)]).wait()
    c.equal("ProcessGroup.allgather_into_tensor_coalesced", outputs[0],
            torch.cat([ints(r, 4) for r in range(world)]))


def case_shrink(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT)
    group = dist.new_group(timeout=TIMEOUT)
    c.true("the backend supports shrinking", backend_of(group).supports_shrinking)
    lost = args.world - 1
    if args.rank == lost:
        dist.destroy_process_group(group)  # left out: takes no part in the shrink
    else:
        shrunk = dist.shrink_group([lost], group=group)
        c.true("the shrunk group's size", shrunk.size() == args.world - 1, str(shrunk.size()))
        t = ints(args.rank)
        dist.all_reduce(t, group=shrunk)
        c.equal("all_reduce on the shrunk group", t, total(range(args.world - 1)))
    dist.barrier()


def case_abort_and_errors(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT)
    short = dist.new_group(timeout=datetime.timedelta(seconds=2))
    c.true("get_error while working", backend_of(short).get_error() == ErrorType.SUCCESS,
           str(backend_of(short).get_error()))
    skipper = args.world - 1
    if args.rank != skipper:
        message = c.raises("all_reduce that a rank skips", ["timed out", "[culprit: rank %d]" % skipper],
                           lambda: dist.all_reduce(torch.ones(4), group=short))
        c.true("the error is a DistBackendError", "tessera allreduce timed out" in message, message[:200])
        c.true("get_error after a timeout", backend_of(short).get_error() == ErrorType.TIMEOUT,
               str(backend_of(short).get_error()))
    dist.barrier()  # the skipper waits here, on the world group, until the others failed
    dist.destroy_process_group(short)
    aborted = dist.new_group(timeout=TIMEOUT)
    backend_of(aborted).abort()
    c.raises("all_reduce after abort()", ["aborted"], lambda: dist.all_reduce(torch.ones(2), group=aborted))
    c.true("get_error after abort()", backend_of(aborted).get_error() != ErrorType.SUCCESS)
    closed = dist.new_group(timeout=TIMEOUT)
    t = torch.ones(2)
    dist.all_reduce(t, group=closed)
    c.equal("all_reduce before shutdown()", t, torch.full((2,), float(args.world)))
    backend_of(closed).shutdown()
    c.raises("all_reduce after shutdown()", ["tessera allreduce"], lambda: dist.all_reduce(torch.ones(2), group=closed))
    t = torch.ones(2)
    dist.all_reduce(t)
    c.equal("the world group after the others' ends", t, torch.full((2,), float(args.world)))


def case_sequence_numbers(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=TIMEOUT)
    pg = dist.distributed_c10d._get_default_group()
    before = pg._get_sequence_number_for_group()
    works = [dist.all_reduce(torch.ones(3), async_op=True) for _ in range(5)]
    for w in works:
        w.wait()
    after = pg._get_sequence_number_for_group()
    c.true("five collectives, five sequence numbers", after - before == 5, "%d -> %d" % (before, after))
    numbers = [w._get_sequence_number() if hasattr(w, "_get_sequence_number") else None for w in works]
    if numbers[0] is not None:
        c.true("each Work has its sequence number", numbers == list(range(before + 1, after + 1)), str(numbers))
    everyone = [torch.zeros(1, dtype=torch.int64) for _ in range(args.world)]
    dist.all_gather(everyone, torch.tensor([after]))
    c.true("every rank has the same sequence number", len(set(int(x) for x in everyone)) == 1, str(everyone))


def case_mixed_backend_string(args, c):
    import tessera_torch  # noqa: F401
    dist.init_process_group("cpu:tessera,cuda:gloo", init_method=args.init, rank=args.rank,
                            world_size=args.world, timeout=TIMEOUT)
    c.true("the backend string", dist.get_backend() == "cpu:tessera,cuda:gloo", dist.get_backend())
    c.true("CPU tensors go to tessera", backend_of().name() == "tessera", backend_of().name())
    t = ints(args.rank)
    dist.all_reduce(t)
    c.equal("all_reduce", t, total(range(args.world)))


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def rank_main():
    args = rank_launcher.parse_rank_args()
    torch.set_num_threads(1)
    c = Checks(args.rank)
    CASES[args.case](args, c)
    if dist.is_initialized():
        dist.destroy_process_group()
    print("rank %d %s" % (args.rank, "FAILED" if c.failed else "PASSED"), flush=True)
    sys.exit(1 if c.failed else 0)


class BackendApiTest(unittest.TestCase):
    def run_case(self, case, world=4):
        start = time.monotonic()
        results = rank_launcher.run_ranks(world, os.path.abspath(__file__), case, timeout=RANK_TIMEOUT,
                                          env={"OMP_NUM_THREADS": "1"})
        report = "\n".join(repr(r) for r in results)
        for r in results:
            self.assertFalse(r.hung, report)
            self.assertNotIn("MISMATCH", r.output, report)
            self.assertEqual(r.returncode, 0, report)
        print("  %s: %.1f s" % (case, time.monotonic() - start), file=sys.stderr)


for _case in CASES:
    setattr(BackendApiTest, "test_" + _case, lambda self, case=_case: self.run_case(case))


if __name__ == "__main__":
    if rank_launcher.is_rank_process():
        rank_main()
    else:
        unittest.main(verbosity=2)
