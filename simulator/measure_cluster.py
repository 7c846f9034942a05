#!/usr/bin/env python3
"""Measures what the simulator is validated against (docs/scale.md, "Validation").

On the emulated cluster (tools/cluster/cluster.sh: network namespaces, links shaped by
tbf), for each layout HxR it runs bench/all_reduce_perf once per allreduce algorithm
(TESSERA_ALGO forced), alternating the algorithms for --rounds rounds, and records the
out-of-place time of every size. It also records what the platform is calibrated from,
measured apart from the allreduces: sendrecv_perf (each rank sends to rank+1 and
receives from rank-1, all at once) on every layout, whose small sizes give the time of
one message step and whose large sizes the rate of a link, and the host's reduction
kernel (collectives/kernels_bench) and shared-memory copy rate (sendrecv on one host).

With --hosts-per-rack K --uplink RATE the hosts sit in racks of K behind uplinks of RATE
(cluster.sh's racks); the ranks are told so as a real job would (TESSERA_TOPOLOGY_CONF:
a Slurm topology.conf of the racks, and TESSERA_RACK_UPLINK_PERCENT), and the results go
under the layout's name with "r" and K (e.g. 4x2r2). --auto also runs each round with
no algorithm forced: the cost model's choice.

Run it as root under the machine's exclusive lock (it times things):
  bazel build //bench:all_reduce_perf //bench:sendrecv_perf //collectives:kernels_bench
  for l in 4x1 2x2 4x2; do
    flock -x /work/.machine.lock python3 simulator/measure_cluster.py --layouts $l --out simulator/data/cluster_2gbit.json
  done   # add --kernels --one-host to one of them
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ALGOS = ["ring", "recursive_doubling", "rabenseifner", "torus", "hierarchical", "hierarchical_leader",
         "hierarchical_doubling"]


def cluster(*args, env=None, check=True):
    cmd = ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh")] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=check, timeout=3600)


def perf_rows(stdout):
    """{size: out-of-place time in us} from an nccl-tests-style table."""
    rows = {}
    for line in stdout.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            rows[int(f[0])] = float(f[5])
    return rows


def run_perf(a, hosts, per_host, program, flags, algo=None, racks_env=None):
    env = dict(os.environ, **(racks_env or {}))
    if algo is not None and algo != "auto":
        env["TESSERA_ALGO"] = algo
    out = cluster("run", "--name", a.name, "--hosts", hosts, "--ranks-per-host", per_host, "--timeout", 900, "--",
                  os.path.join(ROOT, "bazel-bin/bench", program), *flags, env=env, check=False)
    if out.returncode != 0:
        sys.exit("%s %s on %dx%d failed (%d):\n%s%s" % (program, algo, hosts, per_host, out.returncode,
                                                     out.stdout[-3000:], out.stderr[-3000:]))
    return perf_rows(out.stdout)


def rate_bits(rate):
    number, unit = re.fullmatch(r"(\d+)(bit|kbit|mbit|gbit)", rate).groups()
    return int(number) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit]


def racks_env(a, hosts, workdir):
    """What tells the ranks about the racks: a topology.conf, and the uplinks' share."""
    if a.hosts_per_rack == 0:
        return {}
    path = os.path.join(workdir, "topology.conf")
    with open(path, "w") as f:
        for rack, first in enumerate(range(1, hosts + 1, a.hosts_per_rack), 1):
            last = min(first + a.hosts_per_rack - 1, hosts)
            f.write("SwitchName=rack%d Nodes=%s-h[%d-%d]\n" % (rack, a.name, first, last))
    share = 100 * rate_bits(a.uplink) / (a.hosts_per_rack * rate_bits(a.rate))
    return {"TESSERA_TOPOLOGY_CONF": path, "TESSERA_RACK_UPLINK_PERCENT": "%g" % min(100, share)}


def kernel_rates():
    """The reduction kernel's rate (GB/s of output) for float32 sum, from kernels_bench."""
    out = subprocess.run([os.path.join(ROOT, "bazel-bin/collectives/kernels_bench"),
                          "--benchmark_filter=^reduce/float32 sum/", "--benchmark_repetitions=3", "--markdown"],
                         capture_output=True, text=True, timeout=600)
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layouts", default="4x1,2x2,4x2", help="HxR: hosts x ranks per host")
    ap.add_argument("--rate", default="2gbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default="simval")
    ap.add_argument("--flags", default="-b 64K -e 64M -f 4 -n 6 -w 2 -c 0")
    ap.add_argument("--sendrecv-flags", default="-b 8 -e 64M -f 8 -n 10 -w 2 -c 0")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", action="store_true", help="also run kernels_bench (float32 sum)")
    ap.add_argument("--one-host", action="store_true", help="also run sendrecv on 1x2 (shared memory)")
    ap.add_argument("--hosts-per-rack", type=int, default=0, help="racks of K hosts (cluster.sh up)")
    ap.add_argument("--uplink", default="none", help="the racks' uplink rate, e.g. 2gbit")
    ap.add_argument("--auto", action="store_true", help="also run the cost model's choice (no TESSERA_ALGO)")
    a = ap.parse_args()
    layouts = [tuple(int(v) for v in l.split("x")) for l in a.layouts.split(",")]
    # Each call adds its layouts to --out (one lock per layout keeps the exclusive lock short).
    result = {"allreduce": {}, "sendrecv": {}, "runs": []}
    if os.path.exists(a.out):
        with open(a.out) as f:
            result = json.load(f)
    result.update({"rate": a.rate, "flags": a.flags, "rounds": a.rounds})
    result["runs"].append({"layouts": a.layouts, "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    if a.kernels:
        result["kernels_bench"] = kernel_rates()
    up = ["up", "--name", a.name, "--hosts", max(h for h, _ in layouts), "--rate", a.rate]
    if a.hosts_per_rack:
        up += ["--hosts-per-rack", a.hosts_per_rack, "--uplink", a.uplink]
    cluster(*up)
    workdir = tempfile.mkdtemp(prefix="measure_cluster.")
    algos = ALGOS + (["auto"] if a.auto else [])
    try:
        result.setdefault("link", {})[a.layouts] = cluster("measure", "--name", a.name).stdout
        if a.one_host:
            result["sendrecv"]["1x2"] = run_perf(a, 1, 2, "sendrecv_perf", a.sendrecv_flags.split())
        for hosts, per_host in layouts:
            key = "%dx%d" % (hosts, per_host) + ("r%d" % a.hosts_per_rack if a.hosts_per_rack else "")
            env = racks_env(a, hosts, workdir)
            if env:
                result.setdefault("racks", {})[key] = {"hosts_per_rack": a.hosts_per_rack, "uplink": a.uplink,
                                                       "env": env}
            result["sendrecv"][key] = run_perf(a, hosts, per_host, "sendrecv_perf", a.sendrecv_flags.split(),
                                               racks_env=env)
            cells = {algo: [] for algo in algos}
            for r in range(a.rounds):
                for algo in algos:
                    print("# %s round %d/%d: %s" % (key, r + 1, a.rounds, algo), file=sys.stderr, flush=True)
                    cells[algo].append(run_perf(a, hosts, per_host, "all_reduce_perf", a.flags.split(), algo, env))
            result["allreduce"][key] = cells
            with open(a.out, "w") as f:  # keep what is done if a later layout fails
                json.dump(result, f, indent=1)
    finally:
        cluster("down", "--name", a.name, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    result["runs"][-1]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
