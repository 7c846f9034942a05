"""Every collective of the "tessera" torch.distributed backend against Gloo, on real processes.

The parent runs one unittest method per world size (1, 2, 3, 4). Each launches that many
rank processes once (rank_launcher.run_ranks), and every rank runs all the cases below:
it initialises the default group with backend "tessera", makes a Gloo group over the same
ranks (dist.new_group(backend="gloo")), and runs each collective on both backends with
the same inputs. Every input is a function of (dtype, rank, salt), so each rank also
knows every other rank's input and computes the exact expected value itself:

- where torch 1.13's Gloo has the operation and the type, tessera's result must equal
  Gloo's (for bfloat16, bool and int16, which Gloo refuses, Gloo runs on the same values
  as float32, uint8 and int32, and its result is converted back);
- every result must also equal the exact expected value, which is all there is where
  Gloo refuses the operation (AVG, PREMUL_SUM, reduce_scatter, _reduce_scatter_base,
  _all_gather_base, all_to_all of lists).

Reductions use small integers (at most 16 in magnitude, different on each rank at each
position), so sums, products, averages and premultiplied sums are exact in every type,
float16 and bfloat16 included, whatever order an algorithm adds in. Only the random float32/float64 sums of
the "large" cases allow a tolerance, and only on more than 2 ranks (see check_close).

A rank prints one "MISMATCH ..." line per wrong result and ends with "ALL CASES PASSED";
an unexpected exception prints its traceback and exits at once (the others then fail on
the communicator's timeout, or the launch's). To run some world sizes and cases only:
    bazel test //pytorch:collectives_test --test_arg=CollectivesTest.test_world_3 \
        --test_env=COLLECTIVES_TEST_CASES=all_reduce,subgroups
"""

import datetime
import functools
import os
import sys
import time
import traceback
import unittest
import warnings

import torch
import torch.distributed as dist

from rank_launcher import is_rank_process, parse_rank_args, run_ranks

LAUNCH_TIMEOUT_S = 60  # one launch runs every case; a world of 4 on 2 cores takes ~7 s
COMM_TIMEOUT = datetime.timedelta(seconds=30)  # both backends' groups: a hang fails here

# The types tessera reduces, and the types data movement is checked with.
REDUCE_DTYPES = (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                 torch.float32, torch.float64, torch.bool)
MOVE_DTYPES = REDUCE_DTYPES + (torch.int16, torch.complex64, torch.complex128)
# What Gloo runs in place of a type it refuses ("Invalid scalar type"); results are
# converted back. uint8 for bool: SUM/MAX then mean "any", PRODUCT/MIN "all", as tessera.
GLOO_PROXY = {torch.bfloat16: torch.float32, torch.bool: torch.uint8, torch.int16: torch.int32}
BASIC_OPS = ("SUM", "PRODUCT", "MIN", "MAX")
BITWISE_OPS = ("BAND", "BOR", "BXOR")
SHAPE = (3, 5)  # 15 elements: not a multiple of any world size
SENTINEL = 77   # exact in every type; marks memory around a strided view


# --- Inputs and expected values ------------------------------------------------------

def is_integral(dtype):
    return not dtype.is_floating_point and not dtype.is_complex


def small_ints(rank, n, salt):
    """n integers in -2..2; at each position, ranks 0..4 get 5 different values."""
    return (torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt * 11) % 5 - 2


def make(dtype, rank, shape=SHAPE, salt=0, scale=1):
    """Rank `rank`'s input: small integers in `dtype`, times `scale`, in `shape`."""
    n = 1
    for s in shape:
        n *= s
    v = small_ints(rank, n, salt)
    if dtype == torch.bool:
        return (v != 0).reshape(shape)
    if dtype == torch.uint8:
        v = v + 2
    v = v * scale
    if dtype.is_complex:
        return torch.complex(v.double(), (small_ints(rank, n, salt + 1) * scale).double()).to(dtype).reshape(shape)
    return v.to(dtype).reshape(shape)


def inputs_of_all(dtype, world, shape=SHAPE, salt=0, scale=1):
    return [make(dtype, r, shape, salt, scale) for r in range(world)]


TORCH_2 = int(torch.__version__.split(".")[0]) >= 2
# Worlds 2 and 4 run with receives from any source on (the parent sets it), 1 and 3 without.
ANY_SOURCE = os.environ.get("TESSERA_TORCH_ANY_SOURCE") == "1"


def reduce_op(name, dtype=None, factor_as_tensor=False):
    """torch's ReduceOp for `name`; PREMUL_SUM carries premul_factor(dtype) (torch 1.13
    takes a tensor factor in a list, 2.x alone)."""
    if name == "PREMUL_SUM":
        factor = premul_factor(dtype)
        if factor_as_tensor:
            tensor = torch.tensor([factor])
            return dist._make_nccl_premul_sum(tensor if TORCH_2 else [tensor])
        return dist._make_nccl_premul_sum(factor)
    return getattr(dist.ReduceOp, name)


def premul_factor(dtype):
    return 0.5 if dtype.is_floating_point or dtype.is_complex else 2.0


def reference(name, tensors):
    """The exact reduction `name` of `tensors` (every rank's input), in their type."""
    dtype = tensors[0].dtype
    wide_type = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64
    wide = torch.stack(tensors).to(wide_type)
    if dtype == torch.bool and name in ("SUM", "MAX"):
        return wide.amax(0).to(dtype)
    if dtype == torch.bool and name in ("PRODUCT", "MIN"):
        return wide.amin(0).to(dtype)
    if name in ("BAND", "BOR", "BXOR"):
        fold = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[name]
        return functools.reduce(fold, list(wide)).to(dtype)
    if name == "SUM":
        return wide.sum(0).to(dtype)
    if name == "PRODUCT":
        return wide.prod(0).to(dtype)
    if name == "MIN":
        return wide.amin(0).to(dtype)
    if name == "MAX":
        return wide.amax(0).to(dtype)
    if name == "AVG":
        total = wide.sum(0)
        return (total // len(tensors) if wide_type == torch.int64 else total / len(tensors)).to(dtype)
    if name == "PREMUL_SUM":
        return (wide.sum(0) * premul_factor(dtype)).to(dtype)
    raise ValueError(name)


def op_inputs(name, dtype, world, shape=SHAPE, salt=0):
    """Every rank's input for operator `name`. AVG's are multiplied by the world size, so
    that the sum divides exactly in integer types."""
    return inputs_of_all(dtype, world, shape, salt, world if name == "AVG" else 1)


def ops_for(dtype):
    """The operators tessera reduces `dtype` with (bool: no AVG or PREMUL_SUM)."""
    if dtype == torch.bool:
        return BASIC_OPS + BITWISE_OPS
    return BASIC_OPS + (BITWISE_OPS if is_integral(dtype) else ()) + ("AVG", "PREMUL_SUM")


def gloo_has(name):
    return name not in ("AVG", "PREMUL_SUM")


def strided_copy(t):
    """A non-contiguous view holding t's values: every other element of a buffer whose
    other elements hold SENTINEL. Returns (view, buffer)."""
    buffer = torch.full(tuple(t.shape) + (2,), SENTINEL, dtype=t.dtype) if t.dtype != torch.bool else \
        torch.ones(tuple(t.shape) + (2,), dtype=torch.bool)
    view = buffer[..., 0]
    view.copy_(t)
    assert not view.is_contiguous() or t.numel() < 2
    return view, buffer


def transposed_copy(t):
    """A transposed (non-contiguous, gap-free) 2-D view holding t's values."""
    rows, cols = t.shape
    view = torch.empty(cols, rows, dtype=t.dtype).t()
    view.copy_(t)
    assert not view.is_contiguous()
    return view


def empty_strided_like(t):
    """strided_copy of zeros shaped like t: an output view. Returns (view, buffer)."""
    return strided_copy(torch.zeros_like(t))


# --- The checks a rank makes ----------------------------------------------------------

class Rank:
    """One rank's state: its groups and the tally of checks."""

    def __init__(self, rank, world, gloo):
        self.rank = rank
        self.world = world
        self.gloo = gloo
        self.checks = 0
        self.mismatches = 0

    def report(self, what, detail):
        self.mismatches += 1
        print("MISMATCH rank %d: %s: %s" % (self.rank, what, detail), flush=True)

    def check(self, what, actual, expected):
        """Exact equality: same type, shape and values."""
        self.checks += 1
        if actual is None or actual.dtype != expected.dtype or actual.shape != expected.shape:
            self.report(what, "got %r, want %s %s" % (actual, expected.dtype, tuple(expected.shape)))
        elif not torch.equal(actual, expected):
            self.report(what, "got\n%s\nwant\n%s" % (actual, expected))

    def check_close(self, what, actual, expected):
        """Floating-point sums of random values. Two ranks add a + b in either order and get
        the same bits, so they must match exactly; on more than two ranks, algorithms add in
        different orders (ring, recursive doubling, Rabenseifner, Gloo's ring) and the
        rounding differs, so a tolerance of a few ulps of the largest partial sum applies."""
        if self.world <= 2:
            return self.check(what, actual, expected)
        self.checks += 1
        tol = 1e-5 if actual.dtype == torch.float32 else 1e-12
        if actual.dtype != expected.dtype or actual.shape != expected.shape or \
                not torch.allclose(actual, expected, rtol=tol, atol=tol * self.world * 4):
            diff = (actual.double() - expected.double()).abs().max().item()
            self.report(what, "differs by up to %g (tolerance %g)" % (diff, tol))

    def check_sentinel(self, what, buffer):
        """The elements around a strided view were left alone."""
        self.checks += 1
        around = buffer[..., 1]
        want = torch.ones_like(around) if around.dtype == torch.bool else torch.full_like(around, SENTINEL)
        if not torch.equal(around, want):
            self.report(what, "wrote outside the view: %s" % around)

    def check_raises(self, what, fragment, fn):
        """fn() raises a RuntimeError whose message contains `fragment` (None: any)."""
        self.checks += 1
        try:
            fn()
        except RuntimeError as e:
            if fragment is not None and fragment not in str(e):
                self.report(what, "RuntimeError %r does not say %r" % (str(e)[:300], fragment))
            return
        self.report(what, "no RuntimeError (want one saying %r)" % fragment)

    def check_true(self, what, condition, detail=""):
        self.checks += 1
        if not condition:
            self.report(what, detail or "false")

    def gloo_run(self, dtype, fn, *tensors):
        """Runs fn on copies of `tensors` (tensors or lists of tensors) that Gloo takes: in
        GLOO_PROXY's type for `dtype`, complex numbers as pairs of reals. Returns the copies
        converted back to `dtype`."""
        def to_gloo(x):
            return torch.view_as_real(x.clone()) if dtype.is_complex else x.to(GLOO_PROXY.get(dtype, dtype), copy=True)

        def from_gloo(x):
            return torch.view_as_complex(x) if dtype.is_complex else x.to(dtype)

        converted = [[to_gloo(x) for x in t] if isinstance(t, list) else to_gloo(t) for t in tensors]
        fn(*converted)
        return [[from_gloo(x) for x in t] if isinstance(t, list) else from_gloo(t) for t in converted]


# --- Cases: each runs on every rank, in the same order ---------------------------------

def case_all_reduce(c):
    for dtype in REDUCE_DTYPES:
        for name in ops_for(dtype):
            what = "all_reduce %s %s" % (name, dtype)
            inputs = op_inputs(name, dtype, c.world)
            want = reference(name, inputs)
            mine = inputs[c.rank]
            t = mine.clone()
            dist.all_reduce(t, op=reduce_op(name, dtype))
            c.check(what, t, want)
            if gloo_has(name):
                (g,) = c.gloo_run(dtype, lambda x: dist.all_reduce(x, op=reduce_op(name), group=c.gloo), mine)
                c.check(what + " vs gloo", t, g)
            view, buffer = strided_copy(mine)
            dist.all_reduce(view, op=reduce_op(name, dtype))
            c.check(what + " strided", view, want)
            c.check_sentinel(what + " strided", buffer)
            view = transposed_copy(mine)
            dist.all_reduce(view, op=reduce_op(name, dtype))
            c.check(what + " transposed", view, want)
    for dtype in (torch.int32, torch.float32, torch.float64):
        inputs = op_inputs("PREMUL_SUM", dtype, c.world)
        t = inputs[c.rank].clone()
        dist.all_reduce(t, op=reduce_op("PREMUL_SUM", dtype, factor_as_tensor=True))
        c.check("all_reduce PREMUL_SUM with a tensor factor %s" % dtype, t, reference("PREMUL_SUM", inputs))
    for dtype in (torch.complex64, torch.complex128):
        for name in ("SUM", "AVG"):
            what = "all_reduce %s %s" % (name, dtype)
            inputs = op_inputs(name, dtype, c.world)
            t = inputs[c.rank].clone()
            dist.all_reduce(t, op=reduce_op(name, dtype))
            c.check(what, t, reference(name, inputs))
            if gloo_has(name):
                g = inputs[c.rank].clone()
                dist.all_reduce(g, op=reduce_op(name), group=c.gloo)
                c.check(what + " vs gloo", t, g)
    case_complex_through_process_group(c)


def case_complex_through_process_group(c):
    """torch's all_reduce views complex tensors as real before the backend sees them; the
    backend's own complex path (pairs of reals) is reached by calling the group directly."""
    pg = dist.distributed_c10d._get_default_group()
    for dtype in (torch.complex64, torch.complex128):
        for name in ("SUM", "AVG"):
            inputs = op_inputs(name, dtype, c.world)
            t = inputs[c.rank].clone()
            opts = dist.AllreduceOptions()
            opts.reduceOp = reduce_op(name)
            pg.allreduce([t], opts).wait()
            c.check("ProcessGroup.allreduce %s %s" % (name, dtype), t, reference(name, inputs))
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    c.check_raises("ProcessGroup.allreduce MAX complex", "complex tensors reduce with SUM or AVG only",
                   lambda: pg.allreduce([make(torch.complex64, c.rank)], opts))


def case_all_reduce_large(c):
    """Sizes that take several chunks or algorithm steps, and random floats."""
    for dtype in (torch.float32, torch.float64):
        inputs = [torch.randn(70001, generator=torch.Generator().manual_seed(100 + r)).to(dtype)
                  for r in range(c.world)]
        mine = inputs[c.rank]
        t = mine.clone()
        dist.all_reduce(t)
        g = mine.clone()
        dist.all_reduce(g, group=c.gloo)
        c.check_close("all_reduce SUM large random %s vs gloo" % dtype, t, g)
        c.check_close("all_reduce SUM large random %s" % dtype, t, torch.stack(inputs).double().sum(0).to(dtype))
        t = mine.clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        c.check_close("all_reduce AVG large random %s" % dtype, t,
                      (torch.stack(inputs).double().sum(0) / c.world).to(dtype))
        t = mine.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        c.check("all_reduce MAX large random %s" % dtype, t, torch.stack(inputs).amax(0))
    for dtype in (torch.int32, torch.float16, torch.bfloat16):
        inputs = inputs_of_all(dtype, c.world, shape=(300, 333))
        t = inputs[c.rank].clone()
        dist.all_reduce(t)
        c.check("all_reduce SUM large %s" % dtype, t, reference("SUM", inputs))
        (g,) = c.gloo_run(dtype, lambda x: dist.all_reduce(x, group=c.gloo), inputs[c.rank])
        c.check("all_reduce SUM large %s vs gloo" % dtype, t, g)
    t = torch.tensor(float(c.rank + 1))  # 0-dim
    dist.all_reduce(t)
    c.check("all_reduce of a 0-dim tensor", t, torch.tensor(float(c.world * (c.world + 1) // 2)))
    for numel in (0, 1):
        t = torch.ones(numel) * (c.rank + 1)
        dist.all_reduce(t)
        c.check("all_reduce of %d elements" % numel, t, torch.ones(numel) * (c.world * (c.world + 1) // 2))
        t = torch.full((numel,), 1 << c.rank)
        dist.all_reduce(t, op=dist.ReduceOp.BOR)
        c.check("all_reduce BOR of %d elements" % numel, t, torch.full((numel,), (1 << c.world) - 1))
        out = torch.zeros(numel, dtype=torch.int64)
        dist.reduce_scatter(out, [torch.full((numel,), 1 << c.rank) for _ in range(c.world)], op=dist.ReduceOp.BOR)
        c.check("reduce_scatter BOR of %d elements" % numel, out, torch.full((numel,), (1 << c.world) - 1))


def case_all_reduce_coalesced(c):
    shapes = ((4,), (2, 3), (1,), (5, 2))
    for dtype in REDUCE_DTYPES + (torch.complex64,):
        names = ("SUM", "MAX", "BOR") if is_integral(dtype) else ("SUM", "AVG") if dtype.is_complex else ("SUM", "MIN")
        for name in names:
            what = "all_reduce_coalesced %s %s" % (name, dtype)
            per_rank = [op_inputs(name, dtype, c.world, shape, salt) for salt, shape in enumerate(shapes)]
            mine = [inputs[c.rank] for inputs in per_rank]
            tensors = [x.clone() for x in mine]
            view, buffer = strided_copy(mine[1])
            tensors[1] = view
            dist.all_reduce_coalesced(tensors, op=reduce_op(name, dtype))
            for i, inputs in enumerate(per_rank):
                c.check("%s tensor %d" % (what, i), tensors[i], reference(name, inputs))
            c.check_sentinel(what + " strided", buffer)
            if gloo_has(name) and dtype not in GLOO_PROXY:
                g = [x.clone() for x in mine]
                dist.all_reduce_coalesced(g, op=reduce_op(name), group=c.gloo)
                for i in range(len(g)):
                    c.check("%s tensor %d vs gloo" % (what, i), tensors[i], g[i])
    # torch's all_reduce_coalesced refuses mixed types itself; the backend's check is
    # reached through the group.
    pg = dist.distributed_c10d._get_default_group()
    c.check_raises("allreduce_coalesced of mixed types", "tensors of different types",
                   lambda: pg.allreduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.int32)],
                                                  dist.AllreduceCoalescedOptions()))


def case_broadcast(c):
    for dtype in MOVE_DTYPES:
        for src in range(c.world):
            what = "broadcast %s from %d" % (dtype, src)
            mine = make(dtype, c.rank, salt=src)
            want = make(dtype, src, salt=src)
            t = mine.clone()
            dist.broadcast(t, src)
            c.check(what, t, want)
            (g,) = c.gloo_run(dtype, lambda x: dist.broadcast(x, src, group=c.gloo), mine)
            c.check(what + " vs gloo", t, g)
        view, buffer = strided_copy(make(dtype, c.rank))
        dist.broadcast(view, c.world - 1)
        c.check("broadcast %s strided" % dtype, view, make(dtype, c.world - 1))
        c.check_sentinel("broadcast %s strided" % dtype, buffer)
        view = transposed_copy(make(dtype, c.rank))
        dist.broadcast(view, 0)
        c.check("broadcast %s transposed" % dtype, view, make(dtype, 0))


def case_reduce(c):
    for dtype in REDUCE_DTYPES:
        for name in ops_for(dtype):
            dst = (len(name) + c.world) % c.world  # roots vary with the operator
            what = "reduce %s %s to %d" % (name, dtype, dst)
            inputs = op_inputs(name, dtype, c.world)
            mine = inputs[c.rank]
            t = mine.clone()
            dist.reduce(t, dst, op=reduce_op(name, dtype))
            if c.rank == dst:
                c.check(what, t, reference(name, inputs))
            else:
                c.check(what + " leaves a non-root's tensor alone", t, mine)
            if gloo_has(name):
                (g,) = c.gloo_run(dtype, lambda x: dist.reduce(x, dst, op=reduce_op(name), group=c.gloo), mine)
                if c.rank == dst:
                    c.check(what + " vs gloo", t, g)
            view, buffer = strided_copy(mine)
            dist.reduce(view, dst, op=reduce_op(name, dtype))
            c.check(what + " strided", view, reference(name, inputs) if c.rank == dst else mine)
            c.check_sentinel(what + " strided", buffer)


def case_all_gather(c):
    for dtype in MOVE_DTYPES:
        what = "all_gather %s" % dtype
        mine = make(dtype, c.rank)
        want = inputs_of_all(dtype, c.world)
        outs = [torch.zeros_like(mine) for _ in range(c.world)]
        dist.all_gather(outs, mine)
        for r in range(c.world):
            c.check("%s from %d" % (what, r), outs[r], want[r])
        g = c.gloo_run(dtype, lambda o, i: dist.all_gather(o, i, group=c.gloo),
                       [torch.zeros_like(mine) for _ in range(c.world)], mine)[0]
        for r in range(c.world):
            c.check("%s from %d vs gloo" % (what, r), outs[r], g[r])
        expanded = mine.reshape(-1)[:1].reshape(1, 1).expand(SHAPE)  # one element, stride 0
        outs = [torch.zeros_like(mine) for _ in range(c.world)]
        dist.all_gather(outs, expanded)
        for r in range(c.world):
            c.check("%s of an expanded tensor from %d" % (what, r), outs[r], make(dtype, r).reshape(-1)[:1].expand(SHAPE))
        views = [empty_strided_like(mine) for _ in range(c.world)]
        dist.all_gather([v for v, _ in views], transposed_copy(mine))
        for r, (view, buffer) in enumerate(views):
            c.check("%s strided from %d" % (what, r), view, want[r])
            c.check_sentinel("%s strided from %d" % (what, r), buffer)


def case_all_gather_base(c):
    warnings.simplefilter("ignore")  # _all_gather_base "will be deprecated"
    for dtype in MOVE_DTYPES:
        what = "_all_gather_base %s" % dtype
        mine = make(dtype, c.rank)
        want = torch.cat(inputs_of_all(dtype, c.world))
        out = torch.zeros((c.world * SHAPE[0], SHAPE[1]), dtype=dtype)
        dist._all_gather_base(out, mine)
        c.check(what, out, want)
        view, buffer = empty_strided_like(want)
        dist._all_gather_base(view, transposed_copy(mine))
        c.check(what + " strided", view, want)
        c.check_sentinel(what + " strided", buffer)
    out = torch.zeros(c.world * 6)
    dist.all_gather_into_tensor(out, torch.full((6,), float(c.rank)))
    c.check("all_gather_into_tensor", out, torch.arange(c.world).float().repeat_interleave(6))
    c.check_raises("_all_gather_base wrong size", "elements, want",
                   lambda: dist._all_gather_base(torch.zeros(c.world * 6 + 1), torch.zeros(6)))


def case_in_place(c):
    """Inputs that alias outputs, as FSDP and in-place gathers pass them."""
    for dtype in (torch.int8, torch.float32, torch.bfloat16, torch.bool):
        mine = make(dtype, c.rank)
        want = torch.cat(inputs_of_all(dtype, c.world))
        out = torch.zeros_like(want)
        rows = slice(c.rank * SHAPE[0], (c.rank + 1) * SHAPE[0])
        out[rows].copy_(mine)
        dist._all_gather_base(out, out[rows])
        c.check("_all_gather_base in place %s" % dtype, out, want)
        outs = [torch.zeros_like(mine) for _ in range(c.world)]
        outs[c.rank].copy_(mine)
        dist.all_gather(outs, outs[c.rank])
        for r in range(c.world):
            c.check("all_gather in place %s from %d" % (dtype, r), outs[r], make(dtype, r))
        dst = c.world - 1
        outs = [torch.zeros_like(mine) for _ in range(c.world)]
        outs[c.rank].copy_(mine)
        dist.gather(outs[c.rank], outs if c.rank == dst else None, dst=dst)
        if c.rank == dst:
            for r in range(c.world):
                c.check("gather in place %s from %d" % (dtype, r), outs[r], make(dtype, r))
        chunks = [make(dtype, 0, salt=p) for p in range(c.world)]
        dist.scatter(chunks[c.rank], chunks if c.rank == 0 else None, src=0)
        c.check("scatter in place %s" % dtype, chunks[c.rank], make(dtype, 0, salt=c.rank))
        for name in ("SUM", "BOR") if is_integral(dtype) else ("SUM", "AVG"):
            blocks, want = reduce_scatter_case_inputs(name, dtype, c.world, c.rank)
            flat = torch.cat(blocks)
            dist._reduce_scatter_base(flat[rows], flat, op=reduce_op(name, dtype))
            c.check("_reduce_scatter_base in place %s %s" % (name, dtype), flat[rows], want)


def case_large_movement(c):
    """Data movement of 1 MiB and more per rank: several chunks or pipeline steps."""
    warnings.simplefilter("ignore")
    n = 262147  # float32 elements, a prime count
    mine = torch.randn(n, generator=torch.Generator().manual_seed(7 + c.rank))
    everyone = [torch.randn(n, generator=torch.Generator().manual_seed(7 + r)) for r in range(c.world)]
    t = mine.clone()
    dist.broadcast(t, c.world - 1)
    c.check("large broadcast", t, everyone[-1])
    out = torch.zeros(c.world * n)
    dist._all_gather_base(out, mine)
    c.check("large _all_gather_base", out, torch.cat(everyone))
    outs = [torch.zeros(n) for _ in range(c.world)]
    dist.all_gather(outs, mine)
    g = [torch.zeros(n) for _ in range(c.world)]
    dist.all_gather(g, mine, group=c.gloo)
    for r in range(c.world):
        c.check("large all_gather from %d vs gloo" % r, outs[r], g[r])
    ints = [make(torch.int32, r, (c.world * 70001,)) for r in range(c.world)]
    out = torch.zeros(70001, dtype=torch.int32)
    dist._reduce_scatter_base(out, ints[c.rank])
    c.check("large _reduce_scatter_base", out, torch.stack(ints).sum(0).view(c.world, -1)[c.rank].int())
    inp = make(torch.int64, c.rank, (c.world * 40000,))
    out = torch.zeros_like(inp)
    dist.all_to_all_single(out, inp)
    g = torch.zeros_like(inp)
    dist.all_to_all_single(g, inp, group=c.gloo)
    c.check("large all_to_all_single vs gloo", out, g)
    if c.world > 1:
        nxt, prev = (c.rank + 1) % c.world, (c.rank - 1) % c.world
        got = torch.zeros(n)
        works = [dist.isend(mine, nxt), dist.irecv(got, prev)]
        for w in works:
            w.wait()
        c.check("large isend/irecv", got, everyone[prev])


def case_all_gather_coalesced(c):
    shapes = ((4,), (2, 3), (1,))
    for dtype in REDUCE_DTYPES + (torch.int16,):
        what = "all_gather_coalesced %s" % dtype
        mine = [make(dtype, c.rank, shape, salt) for salt, shape in enumerate(shapes)]
        outs = [[torch.zeros_like(x) for x in mine] for _ in range(c.world)]
        view, buffer = empty_strided_like(mine[1])
        outs[c.world - 1][1] = view
        dist.all_gather_coalesced(outs, mine)
        for r in range(c.world):
            for i, shape in enumerate(shapes):
                c.check("%s rank %d tensor %d" % (what, r, i), outs[r][i], make(dtype, r, shape, i))
        c.check_sentinel(what + " strided", buffer)
        if dtype not in GLOO_PROXY:
            g = [[torch.zeros_like(x) for x in mine] for _ in range(c.world)]
            dist.all_gather_coalesced(g, mine, group=c.gloo)
            for r in range(c.world):
                for i in range(len(shapes)):
                    c.check("%s rank %d tensor %d vs gloo" % (what, r, i), outs[r][i], g[r][i])
    # The backend takes mixed types in one call (it moves bytes); torch's
    # all_gather_coalesced refuses them, the group is called directly.
    mine = [make(torch.int8, c.rank, (3,)), make(torch.float64, c.rank, (2, 2)), make(torch.bool, c.rank, (5,))]
    outs = [[torch.zeros_like(x) for x in mine] for _ in range(c.world)]
    dist.distributed_c10d._get_default_group().allgather_coalesced(outs, mine).wait()
    for r in range(c.world):
        for i, x in enumerate(mine):
            c.check("all_gather_coalesced mixed types rank %d tensor %d" % (r, i), outs[r][i],
                    make(x.dtype, r, tuple(x.shape)))


def case_gather(c):
    for dtype in MOVE_DTYPES:
        for dst in range(c.world):
            what = "gather %s to %d" % (dtype, dst)
            mine = make(dtype, c.rank, salt=dst)
            outs = [torch.zeros_like(mine) for _ in range(c.world)] if c.rank == dst else None
            dist.gather(mine, outs, dst=dst)
            gouts = [torch.zeros_like(mine) for _ in range(c.world)] if c.rank == dst else None
            if c.rank == dst:
                g = c.gloo_run(dtype, lambda i, o: dist.gather(i, o, dst=dst, group=c.gloo), mine, gouts)[1]
            else:
                c.gloo_run(dtype, lambda i: dist.gather(i, None, dst=dst, group=c.gloo), mine)
            if c.rank == dst:
                for r in range(c.world):
                    c.check("%s from %d" % (what, r), outs[r], make(dtype, r, salt=dst))
                    c.check("%s from %d vs gloo" % (what, r), outs[r], g[r])
        dst = c.world - 1
        views = [empty_strided_like(make(dtype, 0)) for _ in range(c.world)] if c.rank == dst else []
        dist.gather(transposed_copy(make(dtype, c.rank)), [v for v, _ in views] if views else None, dst=dst)
        for r, (view, buffer) in enumerate(views):
            c.check("gather %s strided from %d" % (dtype, r), view, make(dtype, r))
            c.check_sentinel("gather %s strided from %d" % (dtype, r), buffer)


def case_scatter(c):
    for dtype in MOVE_DTYPES:
        for src in range(c.world):
            what = "scatter %s from %d" % (dtype, src)
            chunks = [make(dtype, src, salt=p) for p in range(c.world)] if c.rank == src else None
            out = torch.zeros_like(make(dtype, 0))
            dist.scatter(out, chunks, src=src)
            c.check(what, out, make(dtype, src, salt=c.rank))
            if c.rank == src:
                (g, _) = c.gloo_run(dtype, lambda o, i: dist.scatter(o, i, src=src, group=c.gloo),
                                    torch.zeros_like(out), chunks)
            else:
                (g,) = c.gloo_run(dtype, lambda o: dist.scatter(o, None, src=src, group=c.gloo), torch.zeros_like(out))
            c.check(what + " vs gloo", out, g)
        view, buffer = empty_strided_like(make(dtype, 0))
        chunks = [transposed_copy(make(dtype, 0, salt=p)) for p in range(c.world)] if c.rank == 0 else None
        dist.scatter(view, chunks, src=0)
        c.check("scatter %s strided" % dtype, view, make(dtype, 0, salt=c.rank))
        c.check_sentinel("scatter %s strided" % dtype, buffer)


def reduce_scatter_case_inputs(name, dtype, world, rank):
    """Block p of rank r's input is salted with p; returns (my blocks, my expected block)."""
    blocks = [op_inputs(name, dtype, world, SHAPE, salt=p) for p in range(world)]  # [p][r]
    mine = [blocks[p][rank] for p in range(world)]
    return mine, reference(name, blocks[rank])


def case_reduce_scatter(c):
    warnings.simplefilter("ignore")  # _reduce_scatter_base "will be deprecated"
    for dtype in REDUCE_DTYPES:
        for name in ops_for(dtype):
            what = "reduce_scatter %s %s" % (name, dtype)
            mine, want = reduce_scatter_case_inputs(name, dtype, c.world, c.rank)
            out = torch.zeros_like(want)
            dist.reduce_scatter(out, [x.clone() for x in mine], op=reduce_op(name, dtype))
            c.check(what, out, want)
            view, buffer = empty_strided_like(want)
            dist.reduce_scatter(view, [transposed_copy(x) for x in mine], op=reduce_op(name, dtype))
            c.check(what + " strided", view, want)
            c.check_sentinel(what + " strided", buffer)
            view = transposed_copy(torch.zeros_like(want))
            dist.reduce_scatter(view, [strided_copy(x)[0] for x in mine], op=reduce_op(name, dtype))
            c.check(what + " transposed", view, want)
            what = "_reduce_scatter_base %s %s" % (name, dtype)
            flat = torch.cat(mine)
            out = torch.zeros_like(want)
            dist._reduce_scatter_base(out, flat, op=reduce_op(name, dtype))
            c.check(what, out, want)
            c.check(what + " leaves its input alone", flat, torch.cat(mine))
            view, buffer = empty_strided_like(want)
            flat_view, _ = strided_copy(flat)
            dist._reduce_scatter_base(view, flat_view, op=reduce_op(name, dtype))
            c.check(what + " strided", view, want)
            c.check_sentinel(what + " strided", buffer)
            view = transposed_copy(torch.zeros_like(want))
            dist._reduce_scatter_base(view, flat, op=reduce_op(name, dtype))
            c.check(what + " transposed", view, want)
    mine, want = reduce_scatter_case_inputs("SUM", torch.float32, c.world, c.rank)
    out = torch.zeros_like(want)
    dist.reduce_scatter_tensor(out, torch.cat(mine))
    c.check("reduce_scatter_tensor", out, want)
    c.check_raises("reduce_scatter int16", "cannot be reduced",
                   lambda: dist.reduce_scatter(torch.zeros(2, dtype=torch.int16),
                                               [torch.zeros(2, dtype=torch.int16)] * c.world))


def split_rows(sender, receiver):
    """Rows rank `sender` sends rank `receiver` in the uneven all-to-all cases."""
    return (sender * 2 + receiver * 3) % 4  # 0..3: some pairs exchange nothing


def split_rows_rank0_even(sender, receiver):
    """Rank 0 sends and receives 1 row with everyone (so its own view of the exchange is
    even), while the other ranks' exchanges are uneven."""
    return 1 if sender == 0 or receiver == 0 else sender + receiver


def a2a_chunk(dtype, sender, receiver, rows, cols=3):
    return make(dtype, sender, (rows, cols), salt=receiver)


def case_all_to_all(c):
    for dtype in MOVE_DTYPES:
        for label, rows in (("even", lambda s, r: 2), ("uneven", split_rows), ("rank 0 even", split_rows_rank0_even)):
            what = "all_to_all %s %s" % (label, dtype)
            ins = [a2a_chunk(dtype, c.rank, p, rows(c.rank, p)) for p in range(c.world)]
            want = [a2a_chunk(dtype, p, c.rank, rows(p, c.rank)) for p in range(c.world)]
            outs = [torch.zeros_like(w) for w in want]
            dist.all_to_all(outs, ins)
            for p in range(c.world):
                c.check("%s from %d" % (what, p), outs[p], want[p])
            views = [empty_strided_like(w) for w in want]
            dist.all_to_all([v for v, _ in views], [strided_copy(x)[0] for x in ins])
            for p, (view, buffer) in enumerate(views):
                c.check("%s strided from %d" % (what, p), view, want[p])
                c.check_sentinel("%s strided from %d" % (what, p), buffer)


def case_all_to_all_single(c):
    for dtype in MOVE_DTYPES:
        for label, rows in (("even", None), ("uneven", split_rows), ("rank 0 even", split_rows_rank0_even)):
            what = "all_to_all_single %s %s" % (label, dtype)
            sizes = rows or (lambda s, r: 2)
            inp = torch.cat([a2a_chunk(dtype, c.rank, p, sizes(c.rank, p)) for p in range(c.world)])
            want = torch.cat([a2a_chunk(dtype, p, c.rank, sizes(p, c.rank)) for p in range(c.world)])
            in_splits = [sizes(c.rank, p) for p in range(c.world)] if rows else None
            out_splits = [sizes(p, c.rank) for p in range(c.world)] if rows else None
            out = torch.zeros_like(want)
            dist.all_to_all_single(out, inp, out_splits, in_splits)
            c.check(what, out, want)
            (g, _) = c.gloo_run(dtype, lambda o, i: dist.all_to_all_single(o, i, out_splits, in_splits, group=c.gloo),
                                torch.zeros_like(want), inp)
            c.check(what + " vs gloo", out, g)
            view, buffer = empty_strided_like(want)
            dist.all_to_all_single(view, strided_copy(inp)[0], out_splits, in_splits)
            c.check(what + " strided", view, want)
            c.check_sentinel(what + " strided", buffer)
    # Split sizes on one side only: every rank's input splits evenly, in blocks of a
    # size that differs between ranks, and the outputs say which size comes from whom.
    block = lambda sender: sender + 1  # noqa: E731
    inp = torch.cat([a2a_chunk(torch.int32, c.rank, p, block(c.rank)) for p in range(c.world)])
    want = torch.cat([a2a_chunk(torch.int32, p, c.rank, block(p)) for p in range(c.world)])
    out = torch.zeros_like(want)
    dist.all_to_all_single(out, inp, [block(p) for p in range(c.world)], None)
    c.check("all_to_all_single with output splits only", out, want)
    c.check_raises("all_to_all_single bad splits", "split sizes add up to",
                   lambda: dist.all_to_all_single(torch.zeros(c.world + 1), torch.zeros(c.world),
                                                  [1] * c.world, [1] * c.world))


def p2p_tensor(dtype, sender, receiver, salt=0):
    return make(dtype, sender, salt=receiver * 10 + salt)


def case_send_recv(c):
    # torch 2.x refuses a send to oneself in Python; the group's send reaches the backend.
    pg = dist.distributed_c10d._get_default_group()
    if c.world == 1:
        c.check_raises("send to itself", "is not another rank", lambda: pg.send([torch.ones(2)], 0, 0))
        return
    nxt, prev = (c.rank + 1) % c.world, (c.rank - 1) % c.world
    for dtype in MOVE_DTYPES:
        for group, label in ((None, ""), (c.gloo, " on gloo")):
            if group is not None and dtype in GLOO_PROXY:
                continue
            what = "send/recv %s%s" % (dtype, label)
            out = torch.zeros_like(make(dtype, 0))
            view, buffer = empty_strided_like(out)
            second = p2p_tensor(dtype, c.rank, nxt, 1)
            if group is None:  # Gloo takes contiguous tensors only
                second = transposed_copy(second)
            else:
                view = buffer = None
            # Even ranks send first, odd ranks receive first: a ring without a cycle of
            # blocked sends, even if sends wait for their receiver.
            for step in (0, 1):
                if (step == 0) == (c.rank % 2 == 0):
                    dist.send(p2p_tensor(dtype, c.rank, nxt), nxt, group=group)
                    dist.send(second, nxt, group=group)
                else:
                    dist.recv(out, prev, group=group)
                    dist.recv(view if view is not None else out, prev, group=group)
            if view is not None:
                c.check(what + " strided", view, p2p_tensor(dtype, prev, c.rank, 1))
                c.check_sentinel(what + " strided", buffer)
                c.check(what, out, p2p_tensor(dtype, prev, c.rank))
            else:
                c.check(what, out, p2p_tensor(dtype, prev, c.rank, 1))
    c.check_raises("send to itself", "is not another rank", lambda: pg.send([torch.ones(2)], c.rank, 0))


def case_isend_irecv(c):
    if c.world == 1:
        return
    nxt, prev = (c.rank + 1) % c.world, (c.rank - 1) % c.world
    for dtype in MOVE_DTYPES:
        what = "isend/irecv %s" % dtype
        # Two messages each way around the ring; they match in issue order.
        outs = [torch.zeros_like(make(dtype, 0)) for _ in range(2)]
        back = [torch.zeros_like(make(dtype, 0)) for _ in range(2)]
        works = [dist.isend(p2p_tensor(dtype, c.rank, nxt, i), nxt) for i in range(2)]
        works += [dist.irecv(outs[i], prev) for i in range(2)]
        works += [dist.isend(p2p_tensor(dtype, c.rank, prev, 5), prev)]
        works += [dist.irecv(back[0], nxt)]
        for w in reversed(works):  # waiting for a receive first must not deadlock
            w.wait()
        for i in range(2):
            c.check("%s message %d" % (what, i), outs[i], p2p_tensor(dtype, prev, c.rank, i))
        c.check(what + " backwards", back[0], p2p_tensor(dtype, nxt, c.rank, 5))
    # A collective posted after held sends and receives runs after them.
    out = torch.zeros(4)
    send = dist.isend(torch.full((4,), float(c.rank)), nxt)
    recv = dist.irecv(out, prev)
    t = torch.ones(3)
    dist.all_reduce(t)
    c.check("all_reduce after held isend/irecv", t, torch.full((3,), float(c.world)))
    c.check_true("irecv completed before the later all_reduce returned", recv.is_completed())
    send.wait()
    recv.wait()
    c.check("irecv released by a collective", out, torch.full((4,), float(prev)))


def case_batch_isend_irecv(c):
    if c.world == 1:
        return
    nxt, prev = (c.rank + 1) % c.world, (c.rank - 1) % c.world
    for dtype in MOVE_DTYPES:
        what = "batch_isend_irecv %s" % dtype
        from_prev = torch.zeros_like(make(dtype, 0))
        from_next, _ = empty_strided_like(make(dtype, 0))
        ops = [
            dist.P2POp(dist.isend, p2p_tensor(dtype, c.rank, nxt), nxt),
            dist.P2POp(dist.irecv, from_prev, prev),
            dist.P2POp(dist.isend, transposed_copy(p2p_tensor(dtype, c.rank, prev, 1)), prev),
            dist.P2POp(dist.irecv, from_next, nxt),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        c.check(what + " from the previous rank", from_prev, p2p_tensor(dtype, prev, c.rank))
        c.check(what + " from the next rank, strided", from_next, p2p_tensor(dtype, nxt, c.rank, 1))


def sparse_input(rank, dtype, dense_dim):
    """Rank `rank`'s sparse COO gradient of a 10-row table: rows rank, rank+2 and 7 (7 is
    every rank's, and rank 0 sends row 7 twice, uncoalesced), values small integers;
    dense_dim 0: a vector, else rows of dense_dim elements."""
    rows = torch.tensor([[rank, rank + 2, 7] + ([7] if rank == 0 else [])])
    shape = (rows.shape[1],) + ((dense_dim,) if dense_dim else ())
    values = small_ints(rank, rows.shape[1] * max(dense_dim, 1), 3).reshape(shape).to(dtype)
    return torch.sparse_coo_tensor(rows, values, (10,) + ((dense_dim,) if dense_dim else ()))


def case_sparse(c):
    """all_reduce of sparse COO tensors (SUM), as embedding gradients: the coalesced sum,
    the same as Gloo's."""
    for dtype in (torch.float32, torch.float64, torch.int64):
        for dense_dim in (0, 3):
            what = "all_reduce sparse %s dense_dim %d" % (dtype, dense_dim)
            everyone = [sparse_input(r, dtype, dense_dim) for r in range(c.world)]
            want = torch.stack([t.to_dense() for t in everyone]).sum(0)
            t = everyone[c.rank].clone()
            dist.all_reduce(t)
            c.check_true(what + " is sparse", t.is_sparse, "got a %s tensor" % t.layout)
            c.check(what, t.to_dense(), want)
            c.check_true(what + " is coalesced", t.is_coalesced())
            g = everyone[c.rank].clone()
            dist.all_reduce(g, group=c.gloo)
            c.check(what + " vs gloo", t.to_dense(), g.to_dense())
    empty = torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.int64), torch.zeros(0), (10,))
    t = empty.clone() if c.rank % 2 else sparse_input(c.rank, torch.float32, 0)
    dist.all_reduce(t)
    c.check("all_reduce sparse with empty ranks", t.to_dense(),
            torch.stack([sparse_input(r, torch.float32, 0).to_dense() for r in range(0, c.world, 2)]).sum(0))
    work = dist.all_reduce(sparse_input(c.rank, torch.float32, 3), async_op=True)
    work.wait()
    (result,) = work.result()
    c.check("async all_reduce sparse result", result.to_dense(),
            torch.stack([sparse_input(r, torch.float32, 3).to_dense() for r in range(c.world)]).sum(0))


def case_monitored_barrier(c):
    """monitored_barrier passes when every rank calls it, and names the ranks that do not
    (in a group of its own: a failed round leaves that group's ranks out of step); the
    group's communicator is untouched by it."""
    for wait_all in (False, True, False):
        dist.monitored_barrier(timeout=COMM_TIMEOUT, wait_all_ranks=wait_all)
    if c.world == 1:
        return
    short = datetime.timedelta(seconds=1)
    for wait_all in (False, True):
        group = dist.new_group(backend="tessera", timeout=COMM_TIMEOUT)
        dist.monitored_barrier(group=group, timeout=COMM_TIMEOUT)
        absent = [1, c.world - 1] if wait_all and c.world > 2 else [c.world - 1]
        what = "monitored_barrier without rank%s %s (wait_all_ranks=%s)" % (
            "s" if len(absent) > 1 else "", ", ".join(map(str, absent)), wait_all)
        barrier = functools.partial(dist.monitored_barrier, group=group, timeout=short, wait_all_ranks=wait_all)
        if c.rank == 0:
            named = "Ranks %s" % ", ".join(map(str, absent)) if len(absent) > 1 else "Rank %d" % absent[0]
            c.check_raises(what, "[Rank 0]: %s failed to pass monitoredBarrier in 1000 ms (rank %d: pid "
                           % (named, absent[0]), barrier)
        elif c.rank not in absent:
            c.check_raises(what + " on rank %d" % c.rank, "rank 0 did not release it within 1000 ms", barrier)
        t = make(torch.int32, c.rank)
        dist.all_reduce(t, group=group)
        c.check(what + ": the group works after it", t, reference("SUM", inputs_of_all(torch.int32, c.world)))
        dist.destroy_process_group(group)


def case_timeout(c):
    """A collective that one rank never joins fails on the others within the group's
    timeout, saying "timed out" (as Gloo's and NCCL's do) and naming that rank."""
    if c.world == 1:
        return
    group = dist.new_group(backend="tessera", timeout=datetime.timedelta(seconds=2))
    absent = c.world - 1
    if c.rank != absent:
        c.check_raises("all_reduce that rank %d skips" % absent, "timed out",
                       lambda: dist.all_reduce(torch.ones(4), group=group))
        c.check_raises("the error names rank %d" % absent, "[culprit: rank %d]" % absent,
                       lambda: dist.all_reduce(torch.ones(4), group=group))
    dist.barrier()
    dist.destroy_process_group(group)


def case_any_source(c):
    """dist.recv without src (TESSERA_TORCH_ANY_SOURCE=1): rank 0 receives one message from
    every other rank, in whatever order they come, and learns each sender; specific
    receives posted around them still get their own peer's messages."""
    if not ANY_SOURCE or c.world == 1:
        return
    for round_ in range(2):
        if c.rank == 0:
            senders = []
            for _ in range(c.world - 1):
                t = torch.zeros(3, dtype=torch.int64)
                sender = dist.recv(t)
                senders.append(sender)
                c.check("recv from any source got rank %d's tensor" % sender, t, torch.full((3,), sender * 10 + round_))
            c.check_true("recv from any source heard every rank once", sorted(senders) == list(range(1, c.world)),
                         str(senders))
        else:
            if c.rank % 2:
                time.sleep(0.05 * c.rank)  # the order of arrival varies
            dist.send(torch.full((3,), c.rank * 10 + round_, dtype=torch.int64), 0)
        dist.barrier()  # no rank sends the next round's message before this round is received
    # A specific receive from the last rank posted first, then any-source ones: the last
    # rank sends twice; the any-source receives must leave it one message.
    last = c.world - 1
    if c.rank == 0:
        mine = torch.zeros(1, dtype=torch.int64)
        work = dist.irecv(mine, src=last)
        got = []
        for _ in range(c.world - 1):
            t = torch.zeros(1, dtype=torch.int64)
            got.append((dist.recv(t), int(t)))
        work.wait()
        c.check("specific receive beside any-source ones", mine, torch.tensor([last * 100]))
        c.check_true("any-source receives took the rest", sorted(got) == sorted(
            [(r, r * 100 + (1 if r == last else 0)) for r in range(1, c.world)]), str(got))
    else:
        dist.send(torch.tensor([c.rank * 100]), 0)
        if c.rank == last:
            dist.send(torch.tensor([c.rank * 100 + 1]), 0)
    dist.barrier()
    if c.rank in (0, last):
        work = dist.irecv(torch.zeros(1)) if c.rank == 0 else dist.isend(torch.ones(1), 0)
        work.wait()
        if c.rank == 0:
            c.check_true("irecv from any source says its sender", work._source_rank() == last,
                         str(work._source_rank()))


def case_barrier(c):
    dist.barrier()
    start = time.monotonic()
    if c.rank == 0:
        time.sleep(0.5)
    dist.barrier()
    elapsed = time.monotonic() - start
    c.check_true("barrier waits for the last rank", elapsed >= 0.4, "left after %.3f s" % elapsed)
    work = dist.barrier(async_op=True)
    c.check_true("async barrier wait", work.wait())
    c.check_true("async barrier completed", work.is_completed())


def case_async(c):
    # async_op=True returns at once: rank 0 issues an all_reduce that the others only
    # join a second later.
    dist.barrier()
    t = make(torch.float32, c.rank)
    want = reference("SUM", inputs_of_all(torch.float32, c.world))
    if c.rank != 0:
        time.sleep(1.0)
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    issued = time.monotonic() - start
    if c.rank == 0 and c.world > 1:
        c.check_true("async all_reduce returns at once", issued < 0.5, "took %.3f s" % issued)
        if time.monotonic() - start < 0.5:
            c.check_true("async all_reduce not completed before its peers join", not work.is_completed())
    c.check_true("work.wait() is true", work.wait())
    c.check_true("work.is_completed() after wait", work.is_completed())
    c.check("async all_reduce result", t, want)
    value = work.get_future().wait()
    c.check_true("future value is a list of one tensor", isinstance(value, list) and len(value) == 1, repr(value))
    c.check("future value", value[0], want)
    c.check("work.result()", work.result()[0], want)
    # Several operations in flight, waited for in reverse order, and a chained future.
    a = make(torch.int64, c.rank)
    b = make(torch.float16, c.rank) if c.rank == 0 else torch.zeros_like(make(torch.float16, 0))
    outs = [torch.zeros_like(make(torch.int32, 0)) for _ in range(c.world)]
    w1 = dist.all_reduce(a, op=dist.ReduceOp.MAX, async_op=True)
    w2 = dist.broadcast(b, 0, async_op=True)
    w3 = dist.all_gather(outs, make(torch.int32, c.rank), async_op=True)
    doubled = w1.get_future().then(lambda fut: fut.value()[0] * 2)
    for w in (w3, w2, w1):
        w.wait()
    c.check("async all_reduce MAX", a, reference("MAX", inputs_of_all(torch.int64, c.world)))
    c.check("async broadcast", b, make(torch.float16, 0))
    for r in range(c.world):
        c.check("async all_gather from %d" % r, outs[r], make(torch.int32, r))
    c.check("chained future", doubled.wait(), reference("MAX", inputs_of_all(torch.int64, c.world)) * 2)
    # wait(timeout) gives up after the timeout while the peers are away, like Gloo's, and
    # a plain wait() then still completes the work.
    dist.barrier()
    if c.rank != 0:
        time.sleep(1.0)
    t = make(torch.float32, c.rank)
    work = dist.all_reduce(t, async_op=True)
    if c.rank == 0 and c.world > 1:
        start = time.monotonic()
        c.check_raises("work.wait(timeout) while the peers are away", "timed out",
                       lambda: work.wait(datetime.timedelta(milliseconds=200)))
        waited = time.monotonic() - start
        c.check_true("work.wait(timeout) returns after about the timeout", waited < 0.7, "took %.3f s" % waited)
    work.wait()
    c.check("all_reduce after a timed-out wait", t, want)
    # Every collective takes async_op and completes through wait().
    t = make(torch.int32, c.rank)
    dist.reduce(t, 0, async_op=True).wait()
    if c.rank == 0:
        c.check("async reduce", t, reference("SUM", inputs_of_all(torch.int32, c.world)))
    out = torch.zeros(SHAPE, dtype=torch.int32)
    dist.reduce_scatter(out, [make(torch.int32, c.rank, salt=p) for p in range(c.world)], async_op=True).wait()
    c.check("async reduce_scatter", out, reference("SUM", [make(torch.int32, r, salt=c.rank)
                                                          for r in range(c.world)]))


def case_errors(c):
    """What the backend refuses raises a RuntimeError on the caller, on every rank alike,
    before anything is sent: the group stays usable."""
    c.check_raises("all_reduce int16", "tensors of type Short cannot be reduced",
                   lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)))
    c.check_raises("reduce int16", "tensors of type Short cannot be reduced",
                   lambda: dist.reduce(torch.ones(4, dtype=torch.int16), 0))
    c.check_raises("all_reduce BAND float32", "BAND needs an integer or bool tensor",
                   lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND))
    c.check_raises("all_reduce AVG bool", "AVG is not defined on bool tensors",
                   lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG))
    # A tensor on another device (meta is the one every build has) is refused by torch
    # 1.13's dispatcher before the backend sees it: only "a RuntimeError" can be checked
    # here. torch 2.x runs its meta kernels instead (for tracing), which move nothing.
    if not TORCH_2:
        c.check_raises("all_reduce on the meta device", None, lambda: dist.all_reduce(torch.ones(4, device="meta")))
        c.check_raises("broadcast on the meta device", None, lambda: dist.broadcast(torch.ones(4, device="meta"), 0))
    c.check_raises("all_reduce MAX sparse", "sparse tensors reduce with SUM only",
                   lambda: dist.all_reduce(torch.ones(4).to_sparse(), op=dist.ReduceOp.MAX))
    # torch's dispatcher refuses sparse tensors for every collective but all_reduce.
    c.check_raises("broadcast sparse", None, lambda: dist.broadcast(torch.ones(4).to_sparse(), 0))
    if not ANY_SOURCE:
        for what, fn in (("recv", dist.recv), ("irecv", dist.irecv)):
            c.check_raises(what + " from any source without the setting", "needs TESSERA_TORCH_ANY_SOURCE=1",
                           lambda: fn(torch.zeros(4)))
    pg = dist.distributed_c10d._get_default_group()
    c.check_raises("broadcast from a root outside the group", "is not a rank of this group",
                   lambda: pg.broadcast([torch.zeros(4)], _broadcast_opts(c.world)))
    t = torch.ones(2)
    dist.all_reduce(t)
    c.check("the group works after refusals", t, torch.full((2,), float(c.world)))


def _broadcast_opts(root):
    opts = dist.BroadcastOptions()
    opts.rootRank = root
    return opts


def case_subgroups(c):
    """Subgroups on tessera, used between and alongside world-group calls."""
    if c.world == 1:
        sub = dist.new_group(ranks=[0], backend="tessera")
        t = make(torch.int32, 0)
        dist.all_reduce(t, group=sub)
        c.check("subgroup of 1", t, make(torch.int32, 0))
        return
    upper = list(range(1, c.world)) if c.world > 2 else [1]     # ranks 1.. (just 1 on 2 ranks)
    ends = [0, c.world - 1]                                      # the first and last rank
    # Every rank creates every group, in the same order; only members use one.
    sub_upper = dist.new_group(ranks=upper, backend="tessera", timeout=COMM_TIMEOUT)
    sub_ends = dist.new_group(ranks=ends, backend="tessera", timeout=COMM_TIMEOUT)
    gloo_upper = dist.new_group(ranks=upper, backend="gloo", timeout=COMM_TIMEOUT)
    everyone = inputs_of_all(torch.int64, c.world)
    for round_ in range(2):
        t = make(torch.int64, c.rank)
        dist.all_reduce(t)
        c.check("world all_reduce round %d" % round_, t, reference("SUM", everyone))
        if c.rank in upper:
            t = make(torch.int64, c.rank)
            dist.all_reduce(t, group=sub_upper)
            c.check("subgroup all_reduce round %d" % round_, t, reference("SUM", [everyone[r] for r in upper]))
            g = make(torch.int64, c.rank)
            dist.all_reduce(g, group=gloo_upper)
            c.check("subgroup all_reduce round %d vs gloo" % round_, t, g)
            t = make(torch.float32, c.rank)
            dist.broadcast(t, src=upper[-1], group=sub_upper)  # src is a global rank
            c.check("subgroup broadcast from global rank %d" % upper[-1], t, make(torch.float32, upper[-1]))
            t = make(torch.int32, c.rank)
            dist.reduce(t, dst=upper[0], op=dist.ReduceOp.MAX, group=sub_upper)
            if c.rank == upper[0]:
                c.check("subgroup reduce to global rank %d" % upper[0], t,
                        reference("MAX", [make(torch.int32, r) for r in upper]))
        t = make(torch.float64, c.rank)
        dist.broadcast(t, src=c.world - 1)
        c.check("world broadcast round %d" % round_, t, make(torch.float64, c.world - 1))
        if c.rank in ends:
            outs = [torch.zeros_like(make(torch.bfloat16, 0)) for _ in ends]
            dist.all_gather(outs, make(torch.bfloat16, c.rank), group=sub_ends)
            for i, r in enumerate(ends):
                c.check("subgroup all_gather from global rank %d" % r, outs[i], make(torch.bfloat16, r))
            # Point to point inside the subgroup names peers by global rank.
            peer = ends[1] if c.rank == ends[0] else ends[0]
            out = torch.zeros_like(make(torch.int8, 0))
            works = [dist.isend(p2p_tensor(torch.int8, c.rank, peer), peer, group=sub_ends),
                     dist.irecv(out, peer, group=sub_ends)]
            for w in works:
                w.wait()
            c.check("subgroup isend/irecv from global rank %d" % peer, out, p2p_tensor(torch.int8, peer, c.rank))
        # Both groups in flight at once.
        t_world = make(torch.int32, c.rank)
        w_world = dist.all_reduce(t_world, async_op=True)
        if c.rank in upper:
            t_sub = make(torch.int32, c.rank)
            w_sub = dist.all_reduce(t_sub, group=sub_upper, async_op=True)
            w_sub.wait()
            c.check("subgroup all_reduce beside a world one", t_sub,
                    reference("SUM", [make(torch.int32, r) for r in upper]))
        w_world.wait()
        c.check("world all_reduce beside a subgroup one", t_world,
                reference("SUM", inputs_of_all(torch.int32, c.world)))
        if c.rank in upper:
            dist.barrier(group=sub_upper)
        dist.barrier()


def case_teardown(c):
    """Destroying a group while its last operation is in flight, on a tensor that Python
    no longer holds. The worker thread then holds that tensor's last reference, which
    needs the GIL to die, while the destroying thread holds the GIL and joins the worker:
    the backend must not let the worker drop it (this hung)."""
    for round_ in range(4):
        group = dist.new_group(backend="tessera", timeout=COMM_TIMEOUT)
        dist.all_reduce(torch.ones(100000), op=dist._make_nccl_premul_sum(2.0), group=group, async_op=True)
        dist.destroy_process_group(group)
    t = torch.ones(3)
    dist.all_reduce(t)
    c.check("world group after destroying others", t, torch.full((3,), float(c.world)))


CASES = [
    ("all_reduce", case_all_reduce),
    ("all_reduce_large", case_all_reduce_large),
    ("all_reduce_coalesced", case_all_reduce_coalesced),
    ("broadcast", case_broadcast),
    ("reduce", case_reduce),
    ("all_gather", case_all_gather),
    ("all_gather_base", case_all_gather_base),
    ("all_gather_coalesced", case_all_gather_coalesced),
    ("in_place", case_in_place),
    ("large_movement", case_large_movement),
    ("gather", case_gather),
    ("scatter", case_scatter),
    ("reduce_scatter", case_reduce_scatter),
    ("all_to_all", case_all_to_all),
    ("all_to_all_single", case_all_to_all_single),
    ("send_recv", case_send_recv),
    ("isend_irecv", case_isend_irecv),
    ("batch_isend_irecv", case_batch_isend_irecv),
    ("sparse", case_sparse),
    ("any_source", case_any_source),
    ("barrier", case_barrier),
    ("monitored_barrier", case_monitored_barrier),
    ("timeout", case_timeout),
    ("async", case_async),
    ("errors", case_errors),
    ("subgroups", case_subgroups),
    ("teardown", case_teardown),
]


def rank_main():
    args = parse_rank_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # torch's deprecation notes for the private collectives
    import tessera_torch  # noqa: F401  registers the backend "tessera"
    dist.init_process_group("tessera", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=COMM_TIMEOUT)
    c = Rank(args.rank, args.world, dist.new_group(backend="gloo", timeout=COMM_TIMEOUT))
    wanted = None if args.case == "all" else {args.case, *args.rest}  # COLLECTIVES_TEST_CASES
    for name, case in CASES:
        if wanted is not None and name not in wanted:
            continue
        start = time.monotonic()
        before = c.checks
        try:
            case(c)
        except Exception:  # a rank that stops here leaves the others waiting: end them all
            print("MISMATCH rank %d: case %s raised:\n%s" % (c.rank, name, traceback.format_exc()), flush=True)
            os._exit(1)
        print("case %-22s %5d checks %6.2f s" % (name, c.checks - before, time.monotonic() - start), flush=True)
    # No reference to a group may outlive destroy_process_group: a group that dies in the
    # interpreter's finalization can abort the process (Gloo's worker threads take the
    # GIL to release tensors, and Python ends threads that ask for it then).
    c.gloo = None
    dist.destroy_process_group()
    if c.mismatches:
        print("%d of %d checks failed" % (c.mismatches, c.checks), flush=True)
        sys.exit(1)
    print("ALL CASES PASSED (%d checks)" % c.checks, flush=True)


# --- The parent: one launch per world size ---------------------------------------------

class CollectivesTest(unittest.TestCase):

    def run_world(self, world):
        start = time.monotonic()
        cases = os.environ.get("COLLECTIVES_TEST_CASES", "all").split(",")
        env = {"TESSERA_TORCH_ANY_SOURCE": "1"} if world % 2 == 0 else {}
        results = run_ranks(world, os.path.abspath(__file__), cases[0], cases[1:], timeout=LAUNCH_TIMEOUT_S, env=env)
        report = "\n".join(repr(r) for r in results)
        print("world %d: %.1f s" % (world, time.monotonic() - start), file=sys.stderr)
        for r in results:
            self.assertFalse(r.hung, "rank %d hung\n%s" % (r.rank, report))
            self.assertEqual(r.returncode, 0, "rank %d failed\n%s" % (r.rank, report))
            self.assertNotIn("MISMATCH", r.output, report)
            self.assertIn("ALL CASES PASSED", r.output, report)

    def test_world_1(self):
        self.run_world(1)

    def test_world_2(self):
        self.run_world(2)

    def test_world_3(self):
        self.run_world(3)

    def test_world_4(self):
        self.run_world(4)


if __name__ == "__main__":
    if is_rank_process():
        rank_main()
    else:
        unittest.main()
