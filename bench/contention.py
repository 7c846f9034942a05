#!/usr/bin/env python3
"""bench/contention.py: allreduce where cores are shared, tessera beside Open MPI and Gloo.

The cases of docs/performance.md#contention, each run in one go with the peers beside
tessera, alternating round by round (--rounds; the median time per size is reported):

  1x4       4 ranks on this host (2 cores here: ranks outnumber cores)
  1x2-busy  2 ranks on this host, and one CPU-bound process per core running throughout
  2x2, 4x2  emulated hosts (tools/cluster, links shaped to --rate, their buckets of
            --burst bytes where given); with --pin-hosts each host runs on its own share
            of the cores, as on real hosts, where unpinned the kernel moves ranks of
            different hosts onto one core and back during a run
In 1x4, 2x2 and 4x2 tessera also runs with every allreduce algorithm forced
(TESSERA_ALGO; those that do not apply are left out), to show how far its automatic
choice is from the best forced one at each size ("auto ran": what the choice ran there,
in every round; "choice / best": the forced run of that algorithm over the best forced
one, the choice apart from the spread between separate programs). On emulated hosts the
torus grid is the host grid (TESSERA_TORUS unset), so the torus and hierarchical run one
schedule: choice / best takes the faster of their two forced runs for either.

Sizes can be split into spans (--span, repeated), each program run once per span with
that span's nccl-tests flags, its rows merged, so that small sizes get many calls and
large ones few. Beside CPU-bound processes, a size's timed loop should last many of
their time slices: a loop that fits between two of them (1000 8-byte calls last about a
millisecond) runs as on a quiet host, and whether one slice falls inside it decides the
row. -D (the harness's minimum duration per size) makes every size's loop last that
long, whatever the library's speed:

  bazel build --jobs=2 //bench:all_reduce_perf //bench:mpi_all_reduce_perf \\
      //bench:gloo_all_reduce_perf
  python3 bench/contention.py --cases 1x4,1x2-busy --rounds 5 \\
      --span "-b 8 -e 32K -f 4 -n 100 -w 20 -D 200" --span "-b 128K -e 32M -f 4 -n 5 -w 2 -D 200" \\
      --span "-b 64M -e 64M -f 2 -n 5 -w 2 -D 200"
  python3 bench/contention.py --cases 2x2 --pin-hosts --rounds 2 \\
      --span "-b 8 -e 32K -f 4 -n 1000 -w 50" --span "-b 128K -e 32M -f 4 -n 20 -w 5"
  (-f 4 stops at 32M whether it starts at 8 or at 128K, hence the third span for 64M;
  4x2: "-n 100 -w 10" for the small span, since Open MPI's small calls there take
  milliseconds and 1000 of each size outlast --timeout. -f 4 never samples 16K or 64K,
  where pinned 2x2 and 4x2 miss the best algorithm: docs/performance.md#gaps-attributed)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BIN, ROOT, cluster, names_in, parse_rows  # noqa: E402

ALGORITHMS = ["ring", "board", "recursive_doubling", "rabenseifner", "torus", "hierarchical", "hierarchical_leader",
              "hierarchical_doubling"]
GLOO = ["ring_chunked", "halving_doubling"]
DEFAULT_FLAGS = ["-b", "8", "-e", "64M", "-f", "4", "-n", "20", "-w", "5"]
CASES = {  # name -> (hosts, ranks per host, CPU-bound processes per core, every algorithm forced too)
    "1x4": (0, 4, 0, True),
    "1x2-busy": (0, 2, 1, False),
    "2x2": (2, 2, 0, True),
    "4x2": (4, 2, 0, True),
}


def progress(message):
    print("[contention %s] %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def command(a, hosts, per_host, name, program, env, args):
    path = os.path.join(BIN, program)
    exports = []
    for key, value in env.items():
        exports += ["-x", "%s=%s" % (key, value)]
    if hosts:
        return (["bash", os.path.join(ROOT, "tools/cluster/cluster.sh"), "run", "--name", name, "--hosts",
                 str(hosts), "--ranks-per-host", str(per_host), "--timeout", str(a.timeout)] +
                (["--pin-hosts"] if a.pin_hosts else []) + exports +
                ["-x", "GLOO_SOCKET_IFNAME=eth0", "--", path] + args)
    return (["timeout", "-k", "5", str(a.timeout), "mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
             str(per_host)] + exports + [path] + args)


def ran_algorithms(stdout):
    """[(algorithm, first, last size)] all_reduce_perf says it ran ("# algorithm ring: 8 to 1024 B")."""
    ranges = []
    for line in stdout.splitlines():
        f = line.split()
        if line.startswith("# algorithm ") and len(f) == 7:
            ranges.append((f[2].rstrip(":"), int(f[3]), int(f[5])))
    return ranges


def algorithms_at(rounds, size):
    """The algorithm(s) the rounds' ranges (ran_algorithms) ran at `size`, "/" between differing ones."""
    names = []
    for ranges in rounds:
        name = next((n for n, lo, hi in ranges if lo <= size <= hi), "?")
        if name not in names:
            names.append(name)
    return "/".join(names)


def run(cmd, forced=None, ranges=None):
    """{bytes: time_us} of the out-of-place group, where `forced` (TESSERA_ALGO) ran only
    the sizes it ran (elsewhere it does not apply: the model chose); RuntimeError when
    the program fails. `ranges`, when given, gets the algorithms tessera ran
    (ran_algorithms) added."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    ran = ran_algorithms(out.stdout)
    if ranges is not None:
        ranges += ran
    rows = parse_rows(out.stdout, 1.0)
    if out.returncode != 0 or not rows:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), out.returncode, out.stdout[-2000:],
                                                       out.stderr[-2000:]))
    wrong = [size for size, row in rows.items() if row[3] not in ("0", "N/A")]
    if wrong:
        raise RuntimeError("%s: wrong values at sizes %s" % (" ".join(cmd), wrong))
    return {size: row[0] for size, row in rows.items()
            if not forced or any(name == forced and lo <= size <= hi for name, lo, hi in ran)}


def plan(forced, gloo=True):
    runs = [("tessera", "all_reduce_perf", {}, [])]
    runs.append(("Open MPI", "mpi_all_reduce_perf", {}, []))
    if gloo and os.path.exists(os.path.join(BIN, "gloo_all_reduce_perf")):
        runs += [("Gloo " + g, "gloo_all_reduce_perf", {}, ["-A", g]) for g in GLOO]
    if forced:
        runs += [("tessera " + algo, "all_reduce_perf", {"TESSERA_ALGO": algo}, []) for algo in ALGORITHMS]
    return runs


def start_hogs(count):
    """count CPU-bound processes per core, running until stopped."""
    cores = len(os.sched_getaffinity(0))
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count * cores)]


def measure(a, case, spans):
    hosts, per_host, hogs_per_core, forced = CASES[case]
    name = "ctn%d" % os.getpid()
    if hosts:
        progress("%s: bringing up %d emulated hosts at %s" % (case, hosts, a.rate))
        cluster("up", "--name", name, "--hosts", str(hosts), "--rate", a.rate,
                *(["--burst", str(a.burst)] if a.burst else []))
    hogs = start_hogs(hogs_per_core)
    times = {}
    auto_ranges = []  # per round
    try:
        for r in range(a.rounds):
            auto_ranges.append([])
            for label, program, env, extra in plan(forced, not a.without_gloo):
                progress("%s: round %d/%d, %s" % (case, r + 1, a.rounds, label))
                rows = {}
                try:
                    for flags in spans:
                        rows.update(run(command(a, hosts, per_host, name, program, env, extra + flags),
                                        env.get("TESSERA_ALGO"), auto_ranges[-1] if label == "tessera" else None))
                except RuntimeError as e:
                    sys.exit("contention: %s" % e)
                if not rows:
                    progress("  %s does not run here, left out" % label)
                    continue
                times.setdefault(label, []).append(rows)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if hosts:
            cluster("down", "--name", name, check=False)
    medians = {label: {size: statistics.median(r[size] for r in rounds if size in r)
                       for size in set().union(*rounds)} for label, rounds in times.items()}
    return medians, auto_ranges


def schedule(algorithm, hosts):
    """The schedule an algorithm runs: on emulated hosts hierarchical runs the torus's (the
    torus grid is the host grid), and their forced runs are two programs of one schedule."""
    return "torus" if hosts and algorithm == "hierarchical" else algorithm


def us(t):
    """A time in microseconds as nccl-tests prints it: two decimals below 10 us."""
    return "%.2f" % t if t < 10 else "%.1f" % t


def table(case, med, auto_ranges, pinned, hosts):
    sizes = sorted(med["tessera"])
    gloo = [label for label in med if label.startswith("Gloo ")]
    forced = [label for label in med if label.startswith("tessera ")]
    head = ["size (B)", "tessera (us)", "Open MPI (us)"] + (["Gloo best (us)"] if gloo else [])
    head += ["x OMPI"] + (["x Gloo"] if gloo else [])
    if forced:
        head += ["auto ran", "best forced", "auto / best", "choice / best"]
    title = "### %s%s" % (case, ", hosts pinned" if pinned else "")
    lines = [title, "", "| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in sizes:
        t = med["tessera"][size]
        cells = [str(size), us(t), us(med["Open MPI"][size])]
        if gloo:
            cells.append(us(min(med[g][size] for g in gloo)))
        cells.append("%.2f" % (t / med["Open MPI"][size]))
        if gloo:
            cells.append("%.2f" % (t / min(med[g][size] for g in gloo)))
        here = [label for label in forced if size in med[label]]  # those that ran at this size
        if here:
            best = min(here, key=lambda label: med[label][size])
            ran = algorithms_at(auto_ranges, size)
            runs = [med[label][size] for label in here  # none where the rounds ran different ones
                    if schedule(label[len("tessera "):], hosts) == schedule(ran, hosts)]
            same = min(runs) if runs else None
            cells += [ran, "%s %s" % (best[len("tessera "):], us(med[best][size])), "%.2f" % (t / med[best][size]),
                      "%.2f" % (same / med[best][size]) if same else "-"]
        elif forced:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="1x4,1x2-busy,2x2", help="comma-separated: %s" % ", ".join(CASES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", default="2gbit", help="emulated hosts' link rate")
    ap.add_argument("--burst", type=int, default=0,
                    help="bytes of the emulated links' token bucket (cluster.sh up --burst; default: the cluster's)")
    ap.add_argument("--without-gloo", action="store_true",
                    help="leave Gloo out (0.4-0.7 ms a call at small sizes: long runs of small sizes are mostly Gloo)")
    ap.add_argument("--pin-hosts", action="store_true",
                    help="each emulated host on its own share of the cores (cluster.sh run --pin-hosts)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per program run")
    ap.add_argument("--span", action="append", default=[],
                    help="nccl-tests flags of one span of sizes (quoted; repeat for more spans, their rows merged); "
                         "instead of the flags after --")
    ap.add_argument("flags", nargs="*", help="nccl-tests flags after -- (default: %s)" % " ".join(DEFAULT_FLAGS))
    a = ap.parse_args()
    if a.span and a.flags:
        sys.exit("contention: --span or flags after --, not both")
    spans = [span.split() for span in a.span] or [a.flags or DEFAULT_FLAGS]
    cases = names_in(a.cases, CASES, "contention: unknown case")
    out = ["nccl-tests flags: %s; %d rounds, median; %d cores here." % (
        ", ".join("`%s`" % " ".join(f) for f in spans), a.rounds, len(os.sched_getaffinity(0))), ""]
    for case in cases:
        out += table(case, *measure(a, case, spans), a.pin_hosts and CASES[case][0] > 0, CASES[case][0])
        print("\n".join(out), flush=True)
        out = []
    return 0


if __name__ == "__main__":
    sys.exit(main())
