#!/usr/bin/env python3
"""bench/compare.py: tessera beside its peers, per collective, in one run.

For each collective asked for (allreduce, allgather, reducescatter, broadcast) it runs,
with the same nccl-tests flags and the same layout:
  tessera                 all_reduce_perf, all_gather_perf, ...
  Open MPI default        mpi_all_reduce_perf, ... (Open MPI's own choice)
  Open MPI forced N       the same with --mca coll_tuned_use_dynamic_rules 1
                          --mca coll_tuned_<coll>_algorithm N, for every N; the best
                          busbw per size over N is "Open MPI best forced"
  Gloo ring_chunked,      gloo_all_reduce_perf -A ALGO (allreduce only, when
  Gloo halving_doubling   bazel-bin/bench/gloo_all_reduce_perf exists)
Layout: --np N (mpirun on this host), or --hosts H --ranks-per-host R: an emulated
cluster (tools/cluster/cluster.sh, links shaped to --rate) that this script brings up
before and down after.

Output in --out (default bench_compare/): one nccl-tests table per library and
collective (COLL.LIBRARY.txt, as the program printed it; "best forced" as a table of
the best rows), summary.md (busbw per size per library, and tessera / peer ratios), and
COLL.png (busbw vs bytes, log x, one line per library, plus the link rate when shaped),
drawn with gnuplot. Progress goes to stderr. Comparisons use the out-of-place group.

  bazel build --jobs=2 //bench:all_reduce_perf //bench:mpi_all_reduce_perf \\
      //bench:more_perf_programs
  python3 bench/compare.py --np 2 -- -b 8 -e 16M -f 4 -n 5 -w 2
  python3 bench/compare.py --hosts 2 --ranks-per-host 1 --rate 2gbit \\
      --collectives allreduce,allgather -- -b 8 -e 64M -f 4
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bazel-bin", "bench")

# collective -> (tessera program, Open MPI program, coll_tuned parameter, its algorithms)
COLLECTIVES = {
    "allreduce": ("all_reduce_perf", "mpi_all_reduce_perf", "allreduce",
                  {1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring",
                   5: "segmented_ring", 6: "rabenseifner"}),
    "allgather": ("all_gather_perf", "mpi_all_gather_perf", "allgather",
                  {1: "linear", 2: "bruck", 3: "recursive_doubling", 4: "ring", 5: "neighbor",
                   6: "two_proc"}),
    # mpi_reduce_scatter_perf calls MPI_Reduce_scatter_block.
    "reducescatter": ("reduce_scatter_perf", "mpi_reduce_scatter_perf", "reduce_scatter_block",
                      {1: "basic_linear", 2: "recursive_doubling", 3: "recursive_halving",
                       4: "butterfly"}),
    "broadcast": ("broadcast_perf", "mpi_broadcast_perf", "bcast",
                  {1: "basic_linear", 2: "chain", 3: "pipeline", 4: "split_binary_tree",
                   5: "binary_tree", 6: "binomial", 7: "knomial", 8: "scatter_allgather",
                   9: "scatter_allgather_ring"}),
}
GLOO_ALGORITHMS = ["ring_chunked", "halving_doubling"]
DEFAULT_FLAGS = ["-b", "8", "-e", "16M", "-f", "4", "-n", "5", "-w", "2", "-c", "0"]


def names_in(text, known, complaint):
    """The comma-separated names of `text`, each a key of `known`; exits naming any other."""
    names = [n for n in text.split(",") if n]
    for n in names:
        if n not in known:
            sys.exit("%s %r (have %s)" % (complaint, n, ", ".join(known)))
    return names


def progress(message):
    print("[compare %s] %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def cluster(*words, check=True, timeout=None):
    cmd = ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh")] + list(words)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        sys.exit("compare: %s failed (%d):\n%s%s" % (" ".join(cmd), out.returncode, out.stdout,
                                                      out.stderr))
    return out


def run_program(args, program, program_args, mca):
    """Runs one program in the layout; returns (stdout, error or None)."""
    path = os.path.join(BIN, program)
    if args.hosts:
        cmd = ["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "run", "--name", args.name,
               "--hosts", str(args.hosts), "--ranks-per-host", str(args.ranks_per_host),
               "--timeout", str(args.timeout)]
        for key, value in mca:
            cmd += ["--mca", key, value]
        # Gloo binds loopback unless told which interface links the hosts.
        cmd += ["-x", "GLOO_SOCKET_IFNAME=eth0", "--", path] + program_args
    else:
        cmd = ["timeout", "-k", "5", str(args.timeout), "mpirun", "--allow-run-as-root",
               "--oversubscribe", "-np", str(args.np)]
        for key, value in mca:
            cmd += ["--mca", key, value]
        cmd += [path] + program_args
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        # The program's own message, not mpirun's banner of dashes.
        lines = [l for l in out.stderr.splitlines() if l.strip() and not l.startswith("---")]
        return out.stdout, "exit %d: %s" % (out.returncode, (lines or ["(no message)"])[0])
    return out.stdout, None


# busbw = algbw * this (nccl-tests' factors), recomputed from the time: the tables
# round bandwidths to 0.01 GB/s, too coarse for small sizes.
BUS_FACTOR = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def parse_rows(table, factor):
    """{bytes: (time_us, algbw, busbw, wrong)} of the out-of-place group."""
    rows = {}
    for line in table.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            size, time_us = int(f[0]), float(f[5])
            algbw = size / time_us / 1e3 if time_us > 0 else 0.0
            rows[size] = (time_us, algbw, algbw * factor, f[8])
    return rows


def wrong_rows(rows):
    return [size for size, row in rows.items() if row[3] not in ("0", "N/A")]


def best_forced_table(collective, forced):
    """nccl-tests-like table of the best forced algorithm per size."""
    lines = ["# %s: Open MPI best forced coll_tuned algorithm per size (out-of-place)" % collective,
             "#       size     time   algbw   busbw  algorithm"]
    sizes = sorted(set().union(*[rows.keys() for rows in forced.values()])) if forced else []
    best = {}
    for size in sizes:
        candidates = [(rows[size][2], name, rows[size]) for name, rows in forced.items()
                      if size in rows]
        busbw, name, row = max(candidates)
        best[size] = row
        lines.append("%12d %8.1f %9.4f %9.4f  %s" % (size, row[0], row[1], row[2], name))
    return best, "\n".join(lines) + "\n"


def link_rate_gbytes(rate):
    """'2gbit' -> 0.25 (GB/s); None when unshaped."""
    if not rate or rate == "none":
        return None
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.lower())
    if not m:
        return None
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return float(m.group(1)) * scale / 8 / 1e9


def plot(path_png, collective, libraries, layout, link_rate):
    data_path = path_png[:-4] + ".dat"
    names = list(libraries)
    sizes = sorted(set().union(*[rows.keys() for rows in libraries.values()]))
    with open(data_path, "w") as f:
        f.write("# bytes " + " ".join('"%s"' % n for n in names) + "\n")
        for size in sizes:
            cells = ["%.6g" % libraries[n][size][2] if size in libraries[n] else "NaN"
                     for n in names]
            f.write("%d %s\n" % (size, " ".join(cells)))
    commands = [
        "set terminal pngcairo size 1000,600" if _has_pngcairo() else "set terminal png size 1000,600",
        "set output '%s'" % path_png,
        "set title '%s busbw, %s'" % (collective, layout),
        "set logscale x 2", "set format x '%.0b%B'", "set xlabel 'bytes'",
        "set termoption noenhanced", "set ylabel 'busbw (GB/s)'", "set key top left", "set grid", "set datafile missing 'NaN'",
    ]
    series = ["'%s' using 1:%d with linespoints title '%s'" % (data_path, i + 2, n)
              for i, n in enumerate(names)]
    if link_rate:
        series.append("%g with lines dashtype 2 title 'link rate %.3g GB/s'" % (link_rate, link_rate))
    commands.append("plot " + ", ".join(series))
    out = subprocess.run(["gnuplot"], input="\n".join(commands) + "\n", capture_output=True,
                         text=True)
    if out.returncode != 0:
        progress("gnuplot failed for %s: %s" % (collective, out.stderr.strip()))


def _has_pngcairo():
    out = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collectives", default="allreduce,allgather,reducescatter,broadcast")
    ap.add_argument("--np", type=int, default=2, help="local ranks (without --hosts)")
    ap.add_argument("--hosts", type=int, default=0, help="emulated cluster hosts")
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--rate", default="2gbit", help="cluster link rate (none: unshaped)")
    ap.add_argument("--mtu", default="1500", help="cluster MTU (9000: jumbo frames)")
    ap.add_argument("--name", default="cmp%d" % os.getpid(), help="cluster name prefix")
    ap.add_argument("--out", default="bench_compare")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per program run")
    ap.add_argument("--no-forced", action="store_true", help="skip the forced Open MPI runs")
    ap.add_argument("flags", nargs="*", help="nccl-tests flags after -- (default: %s)" %
                    " ".join(DEFAULT_FLAGS))
    a = ap.parse_args()
    flags = a.flags or DEFAULT_FLAGS
    collectives = names_in(a.collectives, COLLECTIVES, "compare: unknown collective")
    if not shutil.which("gnuplot"):
        sys.exit("compare: gnuplot not found (apt-get install gnuplot-nox)")
    os.makedirs(a.out, exist_ok=True)
    if a.hosts:
        layout = "%d hosts x %d ranks, links %s" % (a.hosts, a.ranks_per_host, a.rate)
        progress("bringing up cluster %s: %s" % (a.name, layout))
        cluster("up", "--name", a.name, "--hosts", str(a.hosts), "--rate", a.rate, "--mtu", a.mtu)
    else:
        layout = "%d local ranks (mpirun -np %d)" % (a.np, a.np)
    nranks = a.hosts * a.ranks_per_host if a.hosts else a.np
    link_rate = link_rate_gbytes(a.rate) if a.hosts else None
    summary = ["# tessera vs peers: %s" % layout, "",
               "nccl-tests flags: `%s`; busbw in GB/s, out-of-place group; ratio = tessera / peer "
               "busbw (> 1: tessera faster)." % " ".join(flags), ""]
    problems = []
    try:
        for collective in collectives:
            tessera_prog, mpi_prog, tuned, algorithms = COLLECTIVES[collective]
            libraries = {}
            plan = [("tessera", tessera_prog, [], [])]
            plan.append(("Open MPI default", mpi_prog, [], []))
            if not a.no_forced:
                for n, algo in sorted(algorithms.items()):
                    plan.append(("Open MPI forced %d %s" % (n, algo), mpi_prog, [],
                                 [("coll_tuned_use_dynamic_rules", "1"),
                                  ("coll_tuned_%s_algorithm" % tuned, str(n))]))
            gloo = os.path.join(BIN, "gloo_all_reduce_perf")
            if collective == "allreduce" and os.path.exists(gloo):
                for algo in GLOO_ALGORITHMS:
                    plan.append(("Gloo %s" % algo, "gloo_all_reduce_perf", ["-A", algo], []))
            forced = {}
            for i, (label, program, extra, mca) in enumerate(plan):
                progress("%s: %d/%d %s" % (collective, i + 1, len(plan), label))
                stdout, error = run_program(a, program, extra + flags, mca)
                slug = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
                with open(os.path.join(a.out, "%s.%s.txt" % (collective, slug)), "w") as f:
                    f.write(stdout)
                rows = parse_rows(stdout, BUS_FACTOR[collective](nranks))
                if error or not rows:
                    problems.append("%s, %s: %s" % (collective, label, error or "no table rows"))
                    progress("  failed: %s" % (error or "no table rows"))
                    continue
                bad = wrong_rows(rows)
                if bad:
                    problems.append("%s, %s: wrong values at sizes %s" % (collective, label, bad))
                if label.startswith("Open MPI forced"):
                    forced[label[len("Open MPI forced "):]] = rows
                else:
                    libraries[label] = rows
            if forced:
                best, table = best_forced_table(collective, forced)
                libraries["Open MPI best forced"] = best
                with open(os.path.join(a.out, "%s.open_mpi_best_forced.txt" % collective), "w") as f:
                    f.write(table)
            png = os.path.join(a.out, "%s.png" % collective)
            if libraries:
                plot(png, collective, libraries, layout, link_rate)
            summary += summary_table(collective, libraries, forced, png)
    finally:
        if a.hosts:
            progress("taking cluster %s down" % a.name)
            cluster("down", "--name", a.name, check=False)
    if problems:
        summary += ["## Problems", ""] + ["- %s" % p for p in problems] + [""]
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(summary))
    print("\n".join(summary))
    progress("wrote %s" % a.out)
    # A peer's forced algorithm may legitimately refuse a layout; tessera may not.
    return 1 if any(", tessera:" in p for p in problems) else 0


def summary_table(collective, libraries, forced, png):
    lines = ["## %s" % collective, ""]
    if "tessera" not in libraries:
        return lines + ["tessera did not run; see Problems.", ""]
    peers = [n for n in libraries if n != "tessera"]
    header = ["size (B)", "tessera"] + peers + ["tessera / %s" % p for p in peers]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---:|" * len(header))
    for size in sorted(libraries["tessera"]):
        t = libraries["tessera"][size][2]
        cells = ["%d" % size, "%.4g" % t]
        for p in peers:
            cells.append("%.4g" % libraries[p][size][2] if size in libraries[p] else "-")
        for p in peers:
            peer = libraries[p].get(size)
            cells.append("%.2f" % (t / peer[2]) if peer and peer[2] > 0 else "-")
        lines.append("| " + " | ".join(cells) + " |")
    if forced:
        lines += ["", "Forced Open MPI algorithms measured: %s." % ", ".join(sorted(forced))]
    lines += ["", "Plot: `%s`" % png, ""]
    return lines


if __name__ == "__main__":
    sys.exit(main())
