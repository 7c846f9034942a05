"""Training-level tests of the tessera backend: ddp_train.py, an ordinary DDP script, as
real processes on tessera and on Gloo, launched by run_ranks, torchrun and mpirun, and
with a rank lost mid-training.

    bazel test //pytorch:ddp_test //pytorch:ddp_launch_test //pytorch:ddp_failure_test

The three targets run the classes below (python_test.sh pytorch/ddp_test.py CLASS):
  DdpParityTest   gloo and tessera train the same model on the same data, 2 and 4 ranks,
                  with no hook, fp16_compress_hook and the PowerSGD hook: final parameters
                  and per-step losses agree, and every rank ends with the same parameters.
  DdpLaunchTest   the script runs unchanged under torchrun (--standalone), mpirun and tcp://.
  DdpFailureTest  SIGKILL of one of 4 ranks, of rank 0 of 3, SIGSTOP of one of 3, mid-
                  training: every survivor raises a RuntimeError naming allreduce and a
                  rank within the group's timeout (plus a margin), and no shared-memory
                  segment of the job is left in /dev/shm.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import torch

import rank_launcher

# The script itself, as a file (not through this module's import), so that torchrun and
# mpirun run it exactly as a user would.
TRAIN_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(rank_launcher.__file__)), "ddp_train.py")

# Small buckets: every weight matrix is a bucket of its own, so several allreduces are in
# flight at once during backward, as in a real model.
COMMON = ["--bucket-cap-mb", "0.005"]

# How close gloo and tessera must be after 20 steps: |gloo - tessera| <= atol elementwise
# on the final parameters, and <= rtol * |loss| on every logged loss.
#
# With 2 ranks every reduced element is one addition, a + b, the same in either order, so
# gloo and tessera agree bit for bit (measured: identical, with every hook): tolerance 0.
#
# With 3 and 4 ranks the backends add the ranks' float32 gradients in different orders
# ((a + b) + (c + d) against ((a + b) + c) + d), an ulp or so apart per step. Measured
# over seeds 1-5, 3 and 4 ranks: |param diff| <= 4.5e-8 (|params| <= 0.33: 1.5 ulp of the
# largest weight), relative loss diff <= 2.4e-7 (2 ulp of float32). Margins of about 20x
# and 8x: atol 1e-6, rtol 2e-6. One step's wrong reduction (a rank's shard missing from
# the sum) moves weights by up to 2e-3 (measured), far beyond either.
#
# fp16_compress_hook all-reduces float16 tensors: Gloo adds float16 values and rounds to
# float16 after every addition, tessera adds in float32 and rounds once (docs/semantics.md),
# so on 3 and 4 ranks the averaged gradients differ by up to an fp16 ulp (2^-11 relative)
# per step. Measured over seeds 1-5: |param diff| <= 5.5e-5, relative loss diff <= 7.1e-6.
# Margins of about 4.5x and 7x: atol 2.5e-4, rtol 5e-5 (still 8x under the 2e-3 above).
TOLERANCE = {  # hook -> (param atol, loss rtol), for more than 2 ranks
    "none": (1e-6, 2e-6),
    "fp16": (2.5e-4, 5e-5),
    "powersgd": (1e-6, 2e-6),  # run on 2 ranks only
}

RANK_TIMEOUT = 60  # seconds a healthy run may take on 2 busy cores (it takes 1-5)

TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def rank_main():
    """A rank process started by run_ranks: runs ddp_train.main with the launcher's
    rank, world and init URL; on an exception, prints when it was raised (for the
    failure test's latency) before the traceback. The arguments for ddp_train follow a
    "--" (run_ranks(..., "train", ["--", "--backend", ...])), which keeps parse_rank_args
    from reading them as its own options."""
    import ddp_train
    args = rank_launcher.parse_rank_args()
    assert args.case == "train", args.case
    print("rank %d pid %d" % (args.rank, os.getpid()), flush=True)
    freeze = os.environ.get("DDP_TEST_FREEZE")  # "RANK,STOP_AFTER,KILL_AFTER" (seconds)
    if freeze and int(freeze.split(",")[0]) == args.rank:
        # A rank that stops answering without exiting (SIGSTOP: every thread frozen, its
        # sockets and shared memory still open), then dies once the test has seen the others.
        _, stop_after, kill_after = freeze.split(",")
        subprocess.Popen(["sh", "-c", "sleep %s; kill -STOP %d; sleep %s; kill -KILL %d" %
                          (stop_after, os.getpid(), kill_after, os.getpid())])
    try:
        return ddp_train.main(["--rank", str(args.rank), "--world", str(args.world), "--init", args.init] +
                              args.rest)
    except BaseException as e:  # noqa: B902  reported, then re-raised: the process exits
        # as the script alone would, through the interpreter's teardown (which must not hang).
        print("RAISED at %.3f: %s: %s" % (time.time(), type(e).__name__, e), flush=True)
        raise


def load_log(path):
    """[(step, local_loss, mean_loss)] from a --loss-log file."""
    rows = []
    with open(path) as f:
        for line in f:
            step, local, mean = line.split()
            rows.append((int(step), float(local), float(mean)))
    return rows


DIGEST = re.compile(r"rank (\d+) params sha256 ([0-9a-f]{64})")


def digests(results):
    """{rank: sha256 of its final parameters} from the ranks' output."""
    found = {}
    for r in results:
        m = DIGEST.search(r.output)
        if m:
            found[int(m.group(1))] = m.group(2)
    return found


class TrainingRun:
    """One ddp_train.py job's outputs, in a directory of its own."""

    def __init__(self, workdir, name):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, "loss.txt")
        self.dump = os.path.join(self.dir, "params.{rank}.pt")

    def args(self):
        return ["--loss-log", self.log, "--param-dump", self.dump]

    def params(self, rank=0):
        import torch
        return torch.load(self.dump.replace("{rank}", str(rank)))


class DdpTestCase(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="ddp_test_")
        self.env = {"OMP_NUM_THREADS": "1"}

    def tearDown(self):
        shutil.rmtree(self.workdir, ignore_errors=True)

    def train(self, backend, world, hook="none", steps=20, seed=7, extra=(), options=COMMON, timeout=RANK_TIMEOUT):
        """Runs ddp_train on `world` ranks through run_ranks; returns its TrainingRun."""
        run = TrainingRun(self.workdir, "%s_%d_%s_%d" % (backend, world, hook, seed))
        args = ["--", "--backend", backend, "--steps", steps, "--seed", seed, "--hook", hook] + list(options)
        args += run.args() + list(extra)
        start = time.monotonic()
        results = rank_launcher.run_ranks(world, __file__, "train", args, timeout=timeout, env=self.env)
        elapsed = time.monotonic() - start
        for r in results:
            if backend == "gloo" and r.hung and DIGEST.search(r.output):
                # The reference finished training and printed its result, then hung in its
                # own teardown (torch 1.13's Gloo with PowerSGD, once in many runs): its
                # results stand; tessera's runs get no such allowance.
                print("  gloo rank %d hung after its result, killed: %r" % (r.rank, r), file=sys.stderr)
                continue
            self.assertFalse(r.hung, "%s on %d ranks, hook %s: %r" % (backend, world, hook, r))
            self.assertEqual(r.returncode, 0, "%s on %d ranks, hook %s: %r" % (backend, world, hook, r))
        print("  %s, %d ranks, hook %s: %.1f s" % (backend, world, hook, elapsed), file=sys.stderr)
        self.assertRanksAgree(results, world, "%s on %d ranks, hook %s" % (backend, world, hook))
        return run

    def assertRanksAgree(self, results, world, what):
        """DDP keeps replicas identical: every rank's parameters hash the same."""
        found = digests(results)
        self.assertEqual(sorted(found), list(range(world)), "%s: a rank printed no digest: %r" % (what, results))
        self.assertEqual(len(set(found.values())), 1, "%s: ranks ended with different parameters: %s" % (what, found))


class DdpParityTest(DdpTestCase):
    """tessera against Gloo on the same job."""

    def compare(self, world, hook, steps=20, options=COMMON, timeout=RANK_TIMEOUT):
        gloo = self.train("gloo", world, hook, steps, options=options, timeout=timeout)
        tessera = self.train("tessera", world, hook, steps, options=options, timeout=timeout)
        atol, rtol = TOLERANCE[hook] if world > 2 else (0.0, 0.0)
        worst = 0.0
        g_params, t_params = gloo.params(), tessera.params()
        self.assertEqual(sorted(g_params), sorted(t_params))
        for name in g_params:
            diff = (g_params[name] - t_params[name]).abs().max().item()
            worst = max(worst, diff)
            self.assertLessEqual(diff, atol, "%s: gloo and tessera differ by %g (> %g)" % (name, diff, atol))
        g_log, t_log = load_log(gloo.log), load_log(tessera.log)
        self.assertEqual([row[0] for row in g_log], list(range(steps)))
        self.assertEqual([row[0] for row in t_log], list(range(steps)))
        worst_loss = 0.0
        for g_row, t_row in zip(g_log, t_log):
            for g_loss, t_loss in zip(g_row[1:], t_row[1:]):
                rel = abs(g_loss - t_loss) / abs(g_loss)
                worst_loss = max(worst_loss, rel)
                self.assertLessEqual(rel, rtol, "step %d: gloo loss %r, tessera %r" % (g_row[0], g_loss, t_loss))
        print("  %d ranks, hook %s: max |param diff| %.3g (tolerance %g), max relative loss diff %.3g (%g)"
              % (world, hook, worst, atol, worst_loss, rtol), file=sys.stderr)

    def test_two_ranks(self):
        self.compare(2, "none")

    def test_four_ranks(self):
        self.compare(4, "none")

    # The hooks' futures carry Python callbacks: the group's end (destroy_process_group,
    # or DDP's reducer) must not join its workers while holding the GIL (it once did, and
    # hung about 3 runs in 20 here).
    def test_fp16_compress_hook(self):
        self.compare(2, "fp16")

    def test_fp16_compress_hook_four_ranks(self):
        self.compare(4, "fp16")

    def test_powersgd_hook(self):
        # torch 1.13's powerSGD_hook posts an allreduce inside a future callback and waits
        # for it there (`.get_future().wait()`): another worker of the group must run it
        # while the callback blocks the one that completed the future.
        # On torch 2.x, with several buckets in flight, the hook's callbacks (which run on
        # the backend's threads on any CPU backend) and the autograd thread post the next
        # buckets' allreduces in an order that differs between ranks: Gloo fails
        # (gloo::EnforceNotMet "Received data size doesn't match expected size"), tessera
        # raises "mismatched calls" naming both ranks' calls. With one bucket the order is
        # fixed, and both run it.
        self.compare(2, "powersgd", options=[] if TORCH_2 else COMMON)

    def test_static_graph(self):
        self.compare(2, "none", options=COMMON + ["--static-graph"])

    @unittest.skipUnless(TORCH_2, "torch.compile is torch 2.x's")
    def test_compiled_model(self):
        # DDP around a torch.compile'd module: inductor compiles the forward and backward
        # (a C++ compiler run per rank: minutes on 2 busy cores), DDP's hooks still fire.
        self.compare(2, "none", steps=8, timeout=600)


class DdpLaunchTest(DdpTestCase):
    """The script, unchanged, under the launchers users have."""

    def launch(self, cmd, env, timeout=RANK_TIMEOUT):
        full_env = dict(os.environ)
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            full_env.pop(name, None)  # only what the launcher gives
        full_env.update(self.env)
        full_env.update(env)
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=timeout, text=True, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            self.fail("%s hung: %s" % (cmd[0], e.output))
        print("  %s: %.1f s" % (" ".join(cmd[:3]), time.monotonic() - start), file=sys.stderr)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        return proc.stdout

    def check_job(self, output, run, world, steps):
        found = {int(r): d for r, d in re.findall(r"rank (\d+) params sha256 ([0-9a-f]{64})", output)}
        self.assertEqual(sorted(found), list(range(world)), output)
        self.assertEqual(len(set(found.values())), 1, "ranks ended with different parameters: %s" % found)
        self.assertEqual([row[0] for row in load_log(run.log)], list(range(steps)))
        return found[0]

    def reference_digest(self, steps):
        """The same job on tessera through run_ranks: the launchers must give the same
        parameters (2 ranks: bit for bit, see TOLERANCE)."""
        return digests(rank_launcher.run_ranks(
            2, __file__, "train", ["--", "--backend", "tessera", "--steps", steps] + COMMON,
            timeout=RANK_TIMEOUT, env=self.env))[0]

    def test_torchrun(self):
        steps = 10
        run = TrainingRun(self.workdir, "torchrun")
        # Debian's torch 1.13.1 on Python 3.11: torchrun's default `--redirects 0 --tee 0`
        # fails in every script's launch ("'NoneType' object has no attribute 'get'" in
        # elastic/multiprocessing/api.py to_map): Std is an IntFlag, and Python 3.11 no
        # longer yields its zero member NONE (nor the alias ALL) when iterated, so
        # Std.from_str("0") returns None. A per-rank mapping of OUT (1), which does parse,
        # tees each rank's stdout to the console.
        streams = ",".join("%d:1" % r for r in range(2))
        output = self.launch([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                              "--redirects", streams, "--tee", streams,
                              TRAIN_SCRIPT, "--backend", "tessera", "--steps", str(steps)] + COMMON + run.args(), {})
        self.assertEqual(self.check_job(output, run, 2, steps), self.reference_digest(steps))

    def test_tcp_init_method(self):
        # init_process_group(init_method="tcp://HOST:PORT", rank=..., world_size=...): the
        # store is a TCPStore served by rank 0.
        steps = 10
        init = "tcp://127.0.0.1:%d" % rank_launcher.free_port()
        found = digests(rank_launcher.run_ranks(
            2, __file__, "train", ["--", "--backend", "tessera", "--steps", steps] + COMMON,
            timeout=RANK_TIMEOUT, env=self.env, init=init))
        self.assertEqual(sorted(found), [0, 1], "a rank did not finish")
        self.assertEqual(found[0], found[1], "ranks ended with different parameters")
        self.assertEqual(found[0], self.reference_digest(steps))

    @unittest.skipUnless(shutil.which("mpirun"), "Open MPI's mpirun is not installed")
    def test_mpirun(self):
        # env:// with only MASTER_ADDR and MASTER_PORT given: RANK and WORLD_SIZE come from
        # tessera_torch's fill-in from OMPI_COMM_WORLD_*, and nothing else names the rank.
        steps = 10
        run = TrainingRun(self.workdir, "mpirun")
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(rank_launcher.free_port())}
        forwarded = []
        for name in ("MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "PYTHONSAFEPATH", "OMP_NUM_THREADS"):
            if name in env or name in os.environ or name in self.env:
                forwarded += ["-x", name]
        output = self.launch(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"] + forwarded +
                             [sys.executable, TRAIN_SCRIPT, "--backend", "tessera", "--steps", str(steps)] +
                             COMMON + run.args(), env)
        self.assertEqual(self.check_job(output, run, 2, steps), self.reference_digest(steps))


def tessera_segments(pids):
    """The /dev/shm names tessera gives the shared memory of these processes:
    "/tessera-<pid>-<counter>-..." (ShmTransport::NewSegmentName, transport/shm)."""
    return sorted(name for pid in pids for name in glob.glob("/dev/shm/tessera-%d-*" % pid))


class DdpFailureTest(DdpTestCase):
    """A rank lost mid-training: the others must fail, quickly and saying why."""

    GROUP_TIMEOUT = 20.0  # init_process_group(timeout=...): the communicator's timeout
    MARGIN = 15.0         # process exit, a loaded machine
    LOSE_AFTER = 12.0     # seconds after the start: every rank is past init and training

    def lose_one(self, world, victim, how, group_timeout):
        """Runs a long training on `world` ranks and loses rank `victim` LOSE_AFTER seconds
        in: "kill" (SIGKILL: the process is gone) or "stop" (SIGSTOP: silent, still there)."""
        args = ["--", "--backend", "tessera", "--steps", 1000000, "--step-delay", 0.02, "--print-every", 10,
                "--timeout", group_timeout] + COMMON
        limit = self.LOSE_AFTER + group_timeout + self.MARGIN
        env = dict(self.env)
        kill = None
        if how == "kill":
            kill = (victim, self.LOSE_AFTER)
        else:
            env["DDP_TEST_FREEZE"] = "%d,%g,%g" % (victim, self.LOSE_AFTER, group_timeout + 5)
        start = time.time()
        results = rank_launcher.run_ranks(world, __file__, "train", args, timeout=limit, env=env, kill=kill)
        lost_at = start + self.LOSE_AFTER
        self.assertEqual(results[victim].returncode, -9, "rank %d was to be killed: %r" % (victim, results[victim]))
        pids = []
        for r in results:
            m = re.search(r"rank \d+ pid (\d+)", r.output)
            self.assertIsNotNone(m, repr(r))
            pids.append(int(m.group(1)))
            if r.rank == victim:
                continue
            what = "survivor %r" % r
            self.assertFalse(r.hung, "hung instead of raising: " + what)
            self.assertRegex(r.output, r"rank %d step \d+ loss" % r.rank, "never trained: " + what)
            m = re.search(r"RAISED at ([0-9.]+): (\w+): (.*)", r.output)
            self.assertIsNotNone(m, "did not raise: " + what)
            raised_at, kind, message = float(m.group(1)), m.group(2), m.group(3)
            # torch 2.x raises a backend's failure as DistBackendError, a RuntimeError.
            self.assertIn(kind, ("RuntimeError", "DistBackendError"), what)
            self.assertIn("allreduce", message, what)
            self.assertIn("[culprit: rank %d]" % victim, message, what)
            latency = raised_at - lost_at
            print("  %s of rank %d: rank %d raised after %.1f s: %s" % (how, victim, r.rank, latency, message),
                  file=sys.stderr)
            self.assertLess(latency, group_timeout + self.MARGIN, what)
            self.assertNotEqual(r.returncode, 0, what)
        self.assertEqual(tessera_segments(pids), [], "shared memory left behind")

    def test_rank_killed_mid_training(self):
        self.lose_one(4, victim=2, how="kill", group_timeout=self.GROUP_TIMEOUT)

    def test_rank_zero_killed_mid_training(self):
        # Rank 0 published the communicator's unique id and starts every ring; the
        # file:// store does not depend on it.
        self.lose_one(3, victim=0, how="kill", group_timeout=self.GROUP_TIMEOUT)

    def test_rank_stopped_mid_training(self):
        # A silent peer cannot be told from a slow one: only the timeout (10 s here, to
        # keep the test short) ends the wait.
        self.lose_one(3, victim=1, how="stop", group_timeout=10.0)


if __name__ == "__main__":
    if rank_launcher.is_rank_process():
        sys.exit(rank_main())
    unittest.main(verbosity=2)
