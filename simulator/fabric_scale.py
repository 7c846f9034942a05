#!/usr/bin/env python3
"""tessera's choice against the simulated best, on a fabric, from 8 GPUs up (docs/scale.md).

For each GPU count (nodes of --per-node GPUs, block placement) one run of
bazel-bin/simulator/simulate over the sizes (-b -e -f, in fp16 reduced in fp16 as NCCL
and Mikami et al. do) simulates, of tessera's automatic allreduce algorithms, those the
cost model predicts within 3x of its best (--contenders: as TESSERA_AUTOTUNE measures
them), and the model's choice; every simulation becomes a JSON line in --out.
--report reads such files and prints, per platform, the choice and the ratio of its
simulated time to the best's for every GPU count and size, the largest ratio, and with
--plot that ratio as a plot; --detail BYTES prints every algorithm at that size.

  bazel build //simulator:simulate
  python3 simulator/fabric_scale.py --platform simulator/platforms/abci.platform --per-node 4 \\
      --gpus 8,16,32,64,128,256,512,1024,1088,2048,2176,4096,4352 --out simulator/data/scale_abci.json
  python3 simulator/fabric_scale.py --report simulator/data/scale_abci.json --plot docs/img/scale_abci.png
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def platform_with(path, settings):
    """The platform file at `path` with KEY=VALUE lines replaced (a temporary file)."""
    if not settings:
        return path
    lines = open(path).read().splitlines()
    for kv in settings:
        key, value = kv.split("=", 1)
        lines = [l for l in lines if l.split("=")[0].strip() != key]
        lines.append("%s = %s" % (key, value))
    f = tempfile.NamedTemporaryFile("w", suffix=".platform", delete=False)
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


def run(a):
    platform = platform_with(a.platform, a.set or [])
    for gpus in [int(g) for g in a.gpus.split(",")]:
        if gpus % a.per_node:
            sys.exit("%d GPUs are not whole nodes of %d" % (gpus, a.per_node))
        layout = "%dx%d" % (gpus // a.per_node, a.per_node) if gpus >= a.per_node else "1x%d" % gpus
        cmd = [a.simulate, "--platform", platform, "--layout", layout,
               "-d", "half", "--half-wire", "half", "-b", a.b, "-e", a.e, "-f", a.f, "--json", a.out]
        if not a.all:
            cmd.append("--contenders")
        if a.algo:
            cmd += ["--algo", a.algo]
        start = time.time()
        print("#", " ".join(cmd[1:]), file=sys.stderr, flush=True)
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired as e:  # the sizes it finished are in --out
            sys.stdout.write(e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
            print("# %d GPUs: timed out after %d s" % (gpus, a.timeout), flush=True)
            continue
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            print("# %d GPUs: simulate failed (status %d)" % (gpus, out.returncode), flush=True)
        print("# %d GPUs: %.0f s" % (gpus, time.time() - start), file=sys.stderr, flush=True)


def load(paths):
    """{platform: {(gpus, bytes): {algorithm: row}}}; a later line replaces an earlier one."""
    rows = {}
    for path in paths:
        for line in open(path):
            d = json.loads(line)
            name = d.get("platform_name") or os.path.basename(d["platform"]).replace(".platform", "")
            rows.setdefault(name, {}).setdefault((d["ranks"], d["bytes"]), {})[d["algorithm"]] = d
    return rows


def size_name(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%.1f MB" % (b / 1e6)


def ratios(cells):
    """{(gpus, bytes): (choice, choice seconds / best seconds, best)} of what was simulated."""
    out = {}
    for key, by in cells.items():
        choice = next(iter(by.values()))["auto_choice"]
        if choice not in by:
            continue
        best = min(by, key=lambda n: by[n]["seconds"])
        out[key] = (choice, by[choice]["seconds"] / by[best]["seconds"], best)
    return out


def report(a):
    for name, cells in sorted(load(a.report.split(",")).items()):
        r = ratios(cells)
        gpus = sorted({g for g, _ in r})
        sizes = sorted({b for _, b in r})
        print("\n**%s**: the cost model's choice and its simulated time over the best's\n" % name)
        print("| GPUs | " + " | ".join(size_name(b) for b in sizes) + " |")
        print("|---:|" + "---|" * len(sizes))
        for g in gpus:
            cells_text = []
            for b in sizes:
                if (g, b) not in r:
                    cells_text.append("")
                    continue
                choice, ratio, best = r[(g, b)]
                text = "%s %.2f" % (choice.replace("hierarchical", "hier"), ratio)
                cells_text.append("**%s** (%s)" % (text, best) if ratio > 1.05 else text)
            print("| %d | %s |" % (g, " | ".join(cells_text)))
        worst = max(r.items(), key=lambda kv: kv[1][1])
        walls = [d["replay_wall_s"] + d["record_wall_s"] for by in cells.values() for d in by.values()]
        print("\nLargest ratio: %.3f (%d GPUs, %s: %s chosen, %s best); %d of %d cells within 1.05; "
              "%d simulations, %.0f s in all, the longest %.0f s." %
              (worst[1][1], worst[0][0], size_name(worst[0][1]), worst[1][0], worst[1][2],
               sum(1 for v in r.values() if v[1] <= 1.05), len(r), len(walls), sum(walls), max(walls)))
        if a.detail:
            detail(cells, int(a.detail))
        if a.plot:
            plot(name, r, gpus, sizes, a.plot.replace("NAME", name))


def detail(cells, size):
    """Every algorithm simulated at `size`, per GPU count: simulated and predicted."""
    print("\n| GPUs | algorithm | simulated (ms) | predicted (ms) | busbw (GB/s) | simulated / best |")
    print("|---:|---|---:|---:|---:|---:|")
    for (g, b), by in sorted(cells.items()):
        if b != size:
            continue
        best = min(d["seconds"] for d in by.values())
        choice = next(iter(by.values()))["auto_choice"]
        for n, d in sorted(by.items(), key=lambda kv: kv[1]["seconds"]):
            busbw = d["bytes"] / d["seconds"] / 1e9 * 2 * (g - 1) / g
            name = ("**%s** (chosen)" % n) if n == choice else n
            print("| %d | %s | %.2f | %.2f | %.1f | %.2f |" % (g, name, d["seconds"] * 1e3,
                                                              d["predicted_seconds"] * 1e3, busbw,
                                                              d["seconds"] / best))


def plot(name, r, gpus, sizes, path):
    data = path + ".dat"
    with open(data, "w") as f:
        for g in gpus:
            f.write("%d %s\n" % (g, " ".join("%.4f" % r[(g, b)][1] if (g, b) in r else "?" for b in sizes)))
    lines = ", ".join("'%s' using 1:%d with linespoints title '%s'" % (data, i + 2, size_name(b))
                      for i, b in enumerate(sizes))
    script = """set terminal pngcairo size 900,520 font ',11'
set output '%s'
set title "%s: tessera's choice over the simulated best (allreduce, fp16)"
set xlabel 'GPUs'
set ylabel 'chosen / best (simulated)'
set logscale x 2
set yrange [0.95:*]
set key top left
set grid
set datafile missing '?'
plot %s, 1.05 with lines dashtype 2 lc rgb 'gray' title 'goal 1.05'
""" % (path, name, lines)
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print("\nwrote %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform")
    ap.add_argument("--simulate", default=os.path.join(ROOT, "bazel-bin/simulator/simulate"))
    ap.add_argument("--set", action="append", help="KEY=VALUE replacing the platform file's line (repeatable)")
    ap.add_argument("--per-node", type=int, default=4)
    ap.add_argument("--gpus", default="8,16,32,64,128,256,512,1024")
    ap.add_argument("-b", default="64K")
    ap.add_argument("-e", default="256M")
    ap.add_argument("-f", default="4")
    ap.add_argument("--algo", help="limit the algorithms (simulate --algo)")
    ap.add_argument("--all", action="store_true", help="every algorithm, not only the model's contenders")
    ap.add_argument("--timeout", type=int, default=6 * 3600)
    ap.add_argument("--out")
    ap.add_argument("--report", help="JSON files (comma-separated) written by --out")
    ap.add_argument("--detail", help="with --report: every algorithm at this size (bytes)")
    ap.add_argument("--plot", help="with --report: a PNG per platform (NAME in the path is replaced)")
    a = ap.parse_args()
    if a.report:
        report(a)
    elif a.out and a.platform:
        run(a)
    else:
        ap.error("--platform and --out (simulate), or --report (tables and plots)")


if __name__ == "__main__":
    main()
