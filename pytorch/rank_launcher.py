"""Starts the ranks of a torch.distributed job as real processes, for the tests.

A test file calls ``run_ranks(n, __file__, "case_name", ...)``; every rank runs the same
file as ``python3 FILE --rank R --world N --init URL CASE ARGS...`` and the file's
``rank_main()`` dispatches on CASE. Ranks that outlive the deadline are killed and
reported as hung, so a test never hangs; first they print every thread's Python stack
(SIGUSR1, which parse_rank_args makes dump them), so the report says where they hung.
"""

import argparse
import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
import time


class RankResult:
    def __init__(self, rank, returncode, output, hung):
        self.rank = rank
        self.returncode = returncode
        self.output = output
        self.hung = hung

    def __repr__(self):
        state = "hung (killed)" if self.hung else "exit %s" % self.returncode
        return "rank %d: %s\n%s" % (self.rank, state, self.output)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world, script, case, args=(), timeout=120, env=None, init=None, kill=None):
    """Runs `case` of `script` on `world` ranks; returns a RankResult per rank.

    init: the init_method URL (default: a fresh file:// store). kill: (rank, seconds):
    SIGKILL that rank after that many seconds (a rank lost mid-job).
    """
    store_dir = tempfile.mkdtemp(prefix="tessera_torch_")
    init = init or "file://" + os.path.join(store_dir, "store")
    full_env = dict(os.environ)
    full_env.update(env or {})
    procs, files = [], []
    for rank in range(world):
        out = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, script, "--rank", str(rank), "--world", str(world), "--init", init, case]
        cmd += [str(a) for a in args]
        procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                      start_new_session=True))
        files.append(out)
    start = time.monotonic()
    killed = False
    while any(p.poll() is None for p in procs) and time.monotonic() - start < timeout:
        if kill and not killed and time.monotonic() - start >= kill[1]:
            procs[kill[0]].kill()
            killed = True
        time.sleep(0.05)
    results = []
    hung_procs = [p for p in procs if p.poll() is None]
    for p in hung_procs:
        os.kill(p.pid, signal.SIGUSR1)  # the rank's stacks into its output
    if hung_procs:
        time.sleep(1.0)
    for rank, (p, out) in enumerate(zip(procs, files)):
        hung = p in hung_procs
        if hung:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        out.seek(0)
        results.append(RankResult(rank, p.returncode, out.read(), hung))
        out.close()
    return results


def parse_rank_args(argv=None):
    """The arguments run_ranks gives a rank: rank, world, init, case, and the rest.

    Also makes SIGUSR1 print every thread's stack to stderr (run_ranks sends it to a
    rank it is about to kill as hung)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("case")
    parser.add_argument("rest", nargs="*")
    return parser.parse_args(argv)


def is_rank_process(argv=None):
    return "--rank" in (argv if argv is not None else sys.argv)
