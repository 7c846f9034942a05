#!/usr/bin/env python3
"""UCX beside tessera's own transports, in one run (docs/performance.md#ucx).

1. The raw bound: ucx_perftest -t tag_bw at --perftest-size over UCX_TLS=posix, sysv
   and tcp (loopback), one sender and one receiver.
2. One host, 2 ranks: all_reduce_perf over shared memory (TESSERA_TRANSPORT=shm), over
   UCX as tessera runs it on a host without RDMA (TESSERA_TRANSPORT=ucx: every chunk
   eager), and over UCX with its own rendezvous threshold, as on hosts with RDMA
   (UCX_RNDV_THRESH=auto).
3. Two emulated hosts x 1 rank (tools/cluster, links unshaped unless --rate): over TCP
   (TESSERA_TRANSPORT=tcp) and over UCX's tcp (UCX_TLS=tcp,self), eager and with UCX's
   rendezvous threshold.

--rounds N runs every path N times, alternating, and reports each size's median.
Prints one markdown table: busbw per size per path, and UCX / own transport ratios.
Run as root from the repository (the cluster needs network namespaces), after
`bazel build //bench:all_reduce_perf`.
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (cluster(), parse_rows(), progress())

ROOT = compare.ROOT
PERF = os.path.join(compare.BIN, "all_reduce_perf")


def perftest(tls, size, iters):
    """ucx_perftest tag_bw overall bandwidth in GB/s (10^9 B/s)."""
    env = dict(os.environ, UCX_TLS=tls)
    port = str(20000 + os.getpid() % 10000)
    server = subprocess.Popen(["ucx_perftest", "-p", port], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        out = subprocess.run(["ucx_perftest", "127.0.0.1", "-p", port, "-t", "tag_bw", "-s", str(size),
                              "-n", str(iters)], env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.kill()
        server.wait()
    for line in out.stdout.splitlines():
        if line.startswith("Final:"):
            # Final: iterations, overhead 50%/avg/overall, bandwidth avg/overall (MB/s = MiB/s)
            return float(line.split()[6]) * 1048576 / 1e9
    return None


def one_host(env, flags, timeout):
    cmd = ["timeout", "-k", "5", str(timeout), "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    for key, value in env.items():
        cmd += ["-x", "%s=%s" % (key, value)]
    out = subprocess.run(cmd + [PERF] + flags, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def two_hosts(name, env, flags, timeout):
    cmd = ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "run", "--name", name, "--hosts", "2",
           "--ranks-per-host", "1", "--timeout", str(timeout)]
    for key, value in env.items():
        cmd += ["-x", "%s=%s" % (key, value)]
    out = subprocess.run(cmd + ["--", PERF] + flags, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def median_rows(rounds):
    """{bytes: median busbw} over the rounds that measured the size."""
    sizes = sorted({size for rows in rounds for size in rows})
    out = {}
    for size in sizes:
        values = sorted(rows[size] for rows in rounds if size in rows)
        out[size] = values[len(values) // 2]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", default="none", help="link rate between the emulated hosts (tc tbf), or none")
    p.add_argument("--name", default="tsucx", help="cluster name prefix")
    p.add_argument("--perftest-size", type=int, default=8 << 20)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--rounds", type=int, default=1, help="runs of every path, alternating; medians reported")
    p.add_argument("flags", nargs="*", default=["-b", "64K", "-e", "64M", "-f", "4", "-n", "10", "-w", "3"],
                   help="all_reduce_perf flags (after --)")
    args = p.parse_args()
    if not os.path.exists(PERF):
        sys.exit("build first: bazel build //bench:all_reduce_perf")

    raw = {}
    for tls in ("posix", "sysv", "tcp"):
        compare.progress("ucx_perftest tag_bw %d B over UCX_TLS=%s" % (args.perftest_size, tls))
        raw[tls] = perftest(tls + ",self", args.perftest_size, 200)

    eth0 = {"TESSERA_SOCKET_IFNAME": "eth0", "UCX_NET_DEVICES": "eth0"}
    paths = [
        ("one host: own shm", "host", {"TESSERA_TRANSPORT": "shm"}),
        ("one host: ucx", "host", {"TESSERA_TRANSPORT": "ucx"}),
        ("one host: ucx rndv", "host", {"TESSERA_TRANSPORT": "ucx", "UCX_RNDV_THRESH": "auto"}),
        ("2 hosts: own tcp", "cluster", dict(eth0, TESSERA_TRANSPORT="tcp")),
        ("2 hosts: ucx tcp", "cluster", dict(eth0, TESSERA_TRANSPORT="ucx", UCX_TLS="tcp,self")),
        ("2 hosts: ucx tcp rndv", "cluster", dict(eth0, TESSERA_TRANSPORT="ucx", UCX_TLS="tcp,self",
                                                  UCX_RNDV_THRESH="auto")),
    ]
    # UCX / own transport ratios printed after the bandwidths: (UCX path, own path).
    ratios = [("one host: ucx", "one host: own shm"), ("one host: ucx rndv", "one host: own shm"),
              ("2 hosts: ucx tcp", "2 hosts: own tcp"), ("2 hosts: ucx tcp rndv", "2 hosts: own tcp")]
    compare.progress("cluster up: 2 hosts, rate %s" % args.rate)
    compare.cluster("up", "--hosts", "2", "--rate", args.rate, "--name", args.name, timeout=120)
    runs = {label: [] for label, _, _ in paths}  # each round's {bytes: busbw}
    try:
        for r in range(args.rounds):
            for label, where, env in paths:
                compare.progress("round %d/%d: %s" % (r + 1, args.rounds, label))
                if where == "host":
                    table = one_host(env, args.flags, args.timeout)
                else:
                    table = two_hosts(args.name, env, args.flags, args.timeout)
                if table is None:
                    compare.progress("  failed")
                    continue
                runs[label].append({size: row[1] for size, row in compare.parse_rows(table, 1.0).items()})
    finally:
        compare.cluster("down", "--name", args.name, check=False, timeout=120)
    results = {label: median_rows(rounds) for label, rounds in runs.items()}

    print("## Raw bound: ucx_perftest -t tag_bw, %d MiB messages\n" % (args.perftest_size >> 20))
    print("| UCX_TLS | GB/s |\n|---|---|")
    for tls, gbps in raw.items():
        print("| %s | %s |" % (tls, "%.2f" % gbps if gbps else "failed"))
    sizes = sorted({s for rows in results.values() if rows for s in rows})
    print("\n## 2-rank allreduce busbw (GB/s; busbw = algbw for 2 ranks; median of %d round(s))\n" % args.rounds)
    short = lambda label: label.split(": ", 1)[1]  # noqa: E731
    print("| bytes | " + " | ".join(label for label, _, _ in paths) + " | " +
          " | ".join("%s / %s" % (short(a), short(b)) for a, b in ratios) + " |")
    print("|---" * (len(paths) + len(ratios) + 1) + "|")
    for size in sizes:
        bw = {label: results[label].get(size)
              for label, _, _ in paths}
        ratio = lambda a, b: "%.2f" % (a / b) if a and b else "-"  # noqa: E731
        print("| %d | " % size + " | ".join("%.2f" % bw[label] if bw[label] else "-" for label, _, _ in paths) +
              " | " + " | ".join(ratio(bw[a], bw[b]) for a, b in ratios) + " |")


if __name__ == "__main__":
    main()
