#!/usr/bin/env python3
"""The simulator against the emulated cluster (docs/scale.md, "Validation").

  calibrate  Writes one platform file per layout from what measure_cluster.py measured
             apart from the allreduces: the link rate (sendrecv_perf on 4x1 at its
             largest size), the time of one message step on the layout (sendrecv_perf's
             fastest size there, a small one, less the wire's own latency: the software and
             scheduling cost of a message, the same for shared memory and TCP on this
             machine, where it is a process waking on one of 2 cores), the idle round
             trip (cluster.sh measure), the shared-memory copy rate (sendrecv_perf on
             1x2) and the reduction and copy kernels (kernels_bench, 8 MiB buffers).
             No allreduce time is used.
  compare    Runs the simulator for every layout, algorithm and size that was measured
             and prints the table: measured and simulated time, and their ratio.

  Racks (a layout measured as HxRrK, measure_cluster.py --hosts-per-rack K): its platform
  also has the racks, a leaf switch per rack of K hosts and one uplink to a spine at the
  uplink's rate; what a racks run did not measure (the link alone, shared memory, the
  kernels) is taken from --base, the run without racks. compare then also prints the cost
  model's choice (measured with measure_cluster.py --auto) against the best forced
  algorithm, measured and simulated.

  python3 simulator/validate.py calibrate --measured simulator/data/cluster_2gbit.json
  bazel build //simulator:simulate
  python3 simulator/validate.py compare --measured simulator/data/cluster_2gbit.json \\
      --out simulator/data/validation_2gbit.json
  (--reuse prints the table again from --out without simulating)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ALGOS = ["ring", "recursive_doubling", "rabenseifner", "torus", "hierarchical", "hierarchical_leader",
         "hierarchical_doubling"]
TOLERANCE = 0.15


def platform_path(layout):
    return os.path.join(ROOT, "simulator/platforms/emulated_2gbit_%s.platform" % layout)


def split_layout(key):
    """("4x2", 2) from "4x2r2"; ("4x2", 0) from "4x2"."""
    m = re.fullmatch(r"(\d+x\d+)(?:r(\d+))?", key)
    return m.group(1), int(m.group(2) or 0)


def with_base(m, base_path):
    """The racks run's measurements, completed by the base run's for what it lacks."""
    if not base_path:
        return m
    base = json.load(open(base_path))
    merged = dict(m)
    merged["sendrecv"] = dict(base["sendrecv"], **m["sendrecv"])
    merged["link"] = dict(base["link"], **{"racks " + k: v for k, v in m["link"].items()})
    merged.setdefault("kernels_bench", base.get("kernels_bench"))
    return merged


def rack_lines(m, key, nic_gbps):
    _, per_rack = split_layout(key)
    if per_rack == 0:
        return "fabric.link_GBps = 100       # the bridge: not shaped\nfabric.latency_us = 0\n"
    racks = m["racks"][key]
    uplink = rate_bits(racks["uplink"]) / rate_bits(m["rate"]) * nic_gbps
    return ("fabric.nodes_per_leaf = %d      # racks of %d hosts (cluster.sh up --hosts-per-rack)\n"
            "fabric.spines = 1\nfabric.links_per_spine = 1\n"
            "fabric.link_GBps = %.4f       # the uplink (%s) as the hosts' TCP rate scales to it\n"
            "fabric.latency_us = 0\n" % (per_rack, per_rack, uplink, racks["uplink"]))


def rate_bits(rate):
    number, unit = re.fullmatch(r"(\d+)(bit|kbit|mbit|gbit)", rate).groups()
    return int(number) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit]


def times(rows):
    """{size: time in us} from a sendrecv or allreduce table (JSON keys are strings)."""
    return {int(k): v for k, v in rows.items()}


def kernel_rates(text):
    """(reduce output GB/s, copy output GB/s) of float32 sum at 8 MiB, medians."""
    for line in text.splitlines():
        if line.startswith("reduce/float32 sum/8MiB") and "median" in line:
            fields = line.split()
            # ... kernel_GBps memcpy_GBps output_GBps pct_of_memcpy (the last four columns)
            memcpy, output = float(fields[-3]), float(fields[-2])
            return output, memcpy / 2
    sys.exit("kernels_bench output has no float32 sum 8MiB median row")


def calibrate(a):
    m = with_base(json.load(open(a.measured)), a.base)
    rtt_us = min(float(x) for t in m["link"].values() for x in re.findall(r"rtt_us (\d+)", t))
    four = times(m["sendrecv"]["4x1"])
    big = max(four)
    small = min(four)
    nic_gbps = big / ((four[big] - four[small]) * 1e-6) / 1e9
    shm = times(m["sendrecv"]["1x2"])
    shm_gbps = max(shm) / ((shm[max(shm)] - shm[min(shm)]) * 1e-6) / 1e9
    reduce_gbps, copy_gbps = kernel_rates(m["kernels_bench"])
    wire_us = rtt_us / 2  # one way: two NIC links of rtt/4 each
    for layout in m["allreduce"]:
        step_us = min(times(m["sendrecv"][layout]).values())
        overhead_us = max(0.0, step_us - wire_us)
        text = """# Generated by simulator/validate.py calibrate from %s (measured %s).
# The emulated cluster (docs/cluster.md) in layout %s: hosts are network namespaces
# of one 2-core machine, each behind a veth shaped by tbf at %s.
name = emulated-%s-%s
intra.transport = shm
intra.GBps = %.3f            # sendrecv_perf 1x2, largest size: one pair's copy rate each way
intra.latency_us = 1
intra.overhead_us = %.1f     # sendrecv_perf %s, its fastest size (%.1f us), less the wire's %.1f us
inter.transport = tcp
inter.overhead_us = %.1f
nic.count = 1
nic.GBps = %.4f             # sendrecv_perf 4x1, largest size: TCP through the shaped link
nic.latency_us = %.1f        # a quarter of the idle round trip (%.0f us, cluster.sh measure)
%sreduce.GBps = %.2f           # kernels_bench float32 sum, 8 MiB: output bytes per second
copy.GBps = %.2f             # kernels_bench memcpy, 8 MiB
cpu.shared_cores = 2         # every host's ranks share the machine's 2 cores
""" % (os.path.basename(a.measured), m["runs"][0]["started"], layout, m["rate"], m["rate"], layout, shm_gbps,
       overhead_us, layout, step_us, wire_us, overhead_us, nic_gbps, rtt_us / 4, rtt_us, rack_lines(m, layout, nic_gbps),
       reduce_gbps, copy_gbps)
        with open(platform_path(layout), "w") as f:
            f.write(text)
        print("wrote %s" % platform_path(layout))


def simulate(layout, sizes, out_json):
    cmd = [os.path.join(ROOT, "bazel-bin/simulator/simulate"), "--platform", platform_path(layout), "--layout",
           split_layout(layout)[0],
           "-b", str(min(sizes)), "-e", str(max(sizes)), "-f", "4", "--json", out_json]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=3600)


def compare(a):
    m = json.load(open(a.measured))
    if not a.reuse:
        if os.path.exists(a.out):
            os.remove(a.out)
        for layout in m["allreduce"]:
            sizes = sorted(times(m["allreduce"][layout]["ring"][0]))
            simulate(layout, sizes, a.out)
    simulated = {}
    for line in open(a.out):
        d = json.loads(line)
        key = os.path.basename(d["platform"])[len("emulated_2gbit_"):-len(".platform")]
        simulated[(key, d["algorithm"], d["bytes"])] = d
    within = total = 0
    for layout, cells in m["allreduce"].items():
        algos = [x for x in ALGOS if cells.get(x)]
        print("\n**%s** (measured / simulated, us; their ratio):\n" % layout)
        print("| size | " + " | ".join(algos) + " |")
        print("|---:|" + "---:|" * len(algos))
        for size in sorted(times(cells["ring"][0])):
            row = []
            for algo in algos:
                measured = statistics.median(times(r)[size] for r in cells[algo])
                d = simulated.get((layout, algo, size))
                if d is None:
                    row.append("")
                    continue
                ratio = d["seconds"] * 1e6 / measured
                ok = abs(ratio - 1) <= TOLERANCE
                within += ok
                total += 1
                mark = "" if ok else "**"
                row.append("%.0f / %.0f (%s%.2f%s)" % (measured, d["seconds"] * 1e6, mark, ratio, mark))
            print("| %s | %s |" % (human(size), " | ".join(row)))
    print("\n%d of %d cells within %.0f%%." % (within, total, TOLERANCE * 100))
    for layout, cells in m["allreduce"].items():
        if cells.get("auto"):
            choice_table(layout, cells, simulated)


def choice_table(layout, cells, simulated):
    """The cost model's choice against the best forced algorithm, measured and simulated."""
    algos = [x for x in ALGOS if cells.get(x)]
    print("\n**%s: the choice against the best** (us; measured: medians of the rounds):\n" % layout)
    print("| size | measured best | measured choice | choice / best | simulated best | model's choice | "
          "its simulated time / best |")
    print("|---:|---|---:|---:|---|---|---:|")
    for size in sorted(times(cells["ring"][0])):
        measured = {x: statistics.median(times(r)[size] for r in cells[x]) for x in algos}
        best = min(measured, key=measured.get)
        auto = statistics.median(times(r)[size] for r in cells["auto"])
        sims = {x: simulated[(layout, x, size)] for x in algos if (layout, x, size) in simulated}
        row = "| %s | %s %.0f | %.0f | %.2f |" % (human(size), best, measured[best], auto, auto / measured[best])
        if sims:
            sbest = min(sims, key=lambda x: sims[x]["seconds"])
            choice = next(iter(sims.values()))["auto_choice"]
            ratio = sims[choice]["seconds"] / sims[sbest]["seconds"] if choice in sims else float("nan")
            row += " %s %.0f | %s | %.2f |" % (sbest, sims[sbest]["seconds"] * 1e6, choice, ratio)
        else:
            row += " | | |"
        print(row)


def human(size):
    for unit, shift in (("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %siB" % (size >> shift, unit)
    return "%d B" % size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["calibrate", "compare"])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--out", default="/tmp/validation.json", help="the simulations' JSON lines")
    ap.add_argument("--reuse", action="store_true", help="compare: print the table from --out, simulating nothing")
    ap.add_argument("--base", help="calibrate: the run without racks, for what a racks run did not measure")
    a = ap.parse_args()
    (calibrate if a.command == "calibrate" else compare)(a)


if __name__ == "__main__":
    main()
