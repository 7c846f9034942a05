#!/usr/bin/env python3
"""Sony's setting simulated (docs/scale.md, "At Sony's size").

ResNet-50's gradient (25,557,032 parameters in fp16, reduced in fp16 as NCCL and
Mikami et al. do: TESSERA_HALF_WIRE=half) on the ABCI platform
(simulator/platforms/abci.platform), 4 GPUs per node, for each GPU count: every
algorithm asked for, simulated from tessera's own schedules, and the algorithm the cost
model picks (tessera's default torus grid, the hosts', as with TESSERA_TORUS unset).
"torus" runs on --torus-width x (p / width) (TESSERA_TORUS); on the node grid,
4 x (p / 4), the torus is the hierarchical schedule itself.

  bazel build //simulator:simulate
  python3 simulator/sony_scale.py --out simulator/data/abci_resnet50.json \\
      --gpus 64,128,256,512,1024,1088,2048,2176,4096,4352
  python3 simulator/sony_scale.py --report simulator/data/abci_resnet50.json \\
      --rows 1088,2176 --plot docs/img/scale_abci_resnet50.png
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GRADIENT_BYTES = 25557032 * 2
ALGOS = ["ring", "torus", "hierarchical", "rabenseifner"]


def simulate(a, gpus, algos, torus):
    cmd = [os.path.join(ROOT, "bazel-bin/simulator/simulate"), "--platform", a.platform, "--layout",
           "%dx4" % (gpus // 4), "-d", "half", "--half-wire", "half", "-b", str(GRADIENT_BYTES), "-e",
           str(GRADIENT_BYTES), "--algo", ",".join(algos), "--json", a.out]
    if torus:
        cmd += ["--torus", torus]
    print("#", " ".join(cmd[1:]), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=4 * 3600)
    return out.stdout


def run(a):
    for gpus in [int(g) for g in a.gpus.split(",")]:
        width = a.torus_width if gpus % a.torus_width == 0 and gpus > a.torus_width else 0
        others = [x for x in a.algos.split(",") if x != "torus"]
        # The cost model's choice on tessera's default grid is printed with these rows.
        print(simulate(a, gpus, others, ""), flush=True)
        if "torus" in a.algos.split(",") and width:
            print(simulate(a, gpus, ["torus"], "%dx%d" % (width, gpus // width)), flush=True)


ORDER = ["ring", "recursive_doubling", "rabenseifner", "hierarchical", "torus", "hierarchical_leader"]


def load(paths):
    """{gpus: {algorithm: row}}; later lines win (a rerun replaces a row)."""
    rows = {}
    for path in paths:
        for line in open(path):
            d = json.loads(line)
            rows.setdefault(d["ranks"], {})[d["algorithm"]] = d
    return rows


def auto_ms(by):
    """The time of the cost model's choice on the default grid (the hosts'): the torus
    there is the hierarchical schedule itself."""
    choice = by["hierarchical"]["auto_choice"] if "hierarchical" in by else next(iter(by.values()))["auto_choice"]
    row = by.get("hierarchical" if choice == "torus" else choice)
    return choice, (row["seconds"] * 1e3 if row else None)


def report(a):
    rows = load(a.report.split(","))
    names = [n for n in ORDER if any(n in by for by in rows.values())]
    title = {"torus": "torus (grid)", "hierarchical": "hierarchical = torus 4 x p/4"}
    print("| GPUs | " + " | ".join("%s (ms)" % title.get(n, n) for n in names) + " | auto chose | auto (ms) | best |")
    print("|---:|" + "---:|" * len(names) + "---|---:|---|")
    for gpus in sorted(rows):
        by = rows[gpus]
        cells = []
        for n in names:
            if n not in by:
                cells.append("")
            elif n == "torus":
                cells.append("%.2f (%s)" % (by[n]["seconds"] * 1e3, by[n]["torus"]))
            else:
                cells.append("%.2f" % (by[n]["seconds"] * 1e3))
        choice, ms = auto_ms(by)
        best = min(by, key=lambda n: by[n]["seconds"])
        print("| %d | %s | %s | %s | %s |" % (gpus, " | ".join(cells), choice, "%.2f" % ms if ms else "", best))
    for gpus in [int(g) for g in a.rows.split(",")] if a.rows else []:
        detail(rows[gpus], gpus)
    if a.plot:  # the algorithms simulated at every GPU count
        plot(rows, [n for n in names if all(n in by for by in rows.values())], a.plot)


def detail(by, gpus):
    """Every algorithm at one GPU count: simulated, predicted, nccl-tests' bandwidths."""
    best = min(d["seconds"] for d in by.values())
    print("\n| GPUs | algorithm | simulated (ms) | predicted (ms) | algbw (GB/s) | busbw (GB/s) | simulated / best |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in [x for x in ORDER if x in by]:
        d = by[n]
        algbw = d["bytes"] / d["seconds"] / 1e9
        name = {"torus": "torus %s" % d["torus"], "hierarchical": "hierarchical (= torus %s)" % d["torus"]}.get(n, n)
        print("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (gpus, name, d["seconds"] * 1e3,
                                                                 d["predicted_seconds"] * 1e3, algbw,
                                                                 algbw * 2 * (gpus - 1) / gpus, d["seconds"] / best))
    choice, ms = auto_ms(by)
    print("| %d | **auto: %s** | %.2f | | | | %.2f |" % (gpus, choice + (" (node grid)" if choice == "torus" else ""), ms,
                                                        ms / 1e3 / best))


LABEL = {"torus": "torus 32 x p/32", "hierarchical": "hierarchical (= torus 4 x p/4)"}


def plot(rows, names, path):
    data = path + ".dat"
    with open(data, "w") as f:
        f.write("# gpus " + " ".join(names) + "\n")
        for gpus in sorted(rows):
            f.write("%d %s\n" % (gpus, " ".join("%.4f" % (rows[gpus][n]["seconds"] * 1e3) if n in rows[gpus] else "?"
                                                for n in names)))
    script = """set terminal pngcairo size 900,560 font ',11'
set output '%s'
set title "ResNet-50 gradient (51 MB, fp16) allreduce on simulated ABCI: tessera's schedules"
set xlabel 'GPUs (4 per node)'
set ylabel 'time (ms)'
set logscale xy 2
set key top left
set grid
set datafile missing '?'
plot %s
""" % (path, ", ".join("'%s' using 1:%d with linespoints title '%s'" % (data, i + 2, LABEL.get(n, n).replace("_", " "))
                       for i, n in enumerate(names)))
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print("\nwrote %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default=os.path.join(ROOT, "simulator/platforms/abci.platform"))
    ap.add_argument("--gpus", default="64,128,256,512,1024,1088,2048,2176,4096,4352")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--torus-width", type=int, default=32)
    ap.add_argument("--out")
    ap.add_argument("--report", help="JSON files (comma-separated) written by --out")
    ap.add_argument("--plot")
    ap.add_argument("--rows", help="GPU counts whose every algorithm --report details, e.g. 1088,2176")
    a = ap.parse_args()
    if a.report:
        report(a)
    elif a.out:
        run(a)
    else:
        ap.error("--out (simulate) or --report (tables and plot)")


if __name__ == "__main__":
    main()
