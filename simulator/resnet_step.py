#!/usr/bin/env python3
"""ResNet-50's training step at scale: the backward pass overlapping the gradient
allreduce, on a simulated platform (docs/scale.md, "The training step at scale").

The step of one GPU, as data-parallel training runs it:
  - forward, then backward layer by layer from the last layer to the first;
  - the gradients fill buckets of --bucket-mb in that order (as PyTorch's DDP and
    tessera's trainer do); a bucket's allreduce is queued once its last gradient is
    computed, and the buckets' allreduces run one after another on one communicator,
    each while the backward pass goes on;
  - the step ends when the backward pass and the last allreduce are both done.
Each bucket's allreduce is simulated (bazel-bin/simulator/simulate) on the platform with
the algorithm tessera's cost model chooses for its size, in fp16 on the wire; the step's
timeline is composed from those times here. Nothing else shares the network, and the
allreduces do not slow the computation.

The layers are ResNet-50 v1.5's (torchvision's resnet50: 25,557,032 parameters, checked
below), with each layer's forward FLOPs at 224 x 224. A GPU's compute per step is
--batch images at --images-per-s, split over the layers in proportion to their FLOPs,
a third forward and two thirds backward (a layer's backward computes two products of
its forward's size). Scaling efficiency = that compute time / the step's time.

  bazel build //simulator:simulate
  python3 simulator/resnet_step.py --gpus 1088,2176 --out simulator/data/resnet_step_abci.json
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RESNET50_PARAMETERS = 25557032


def resnet50_layers():
    """[(name, parameters, forward FLOPs)] in forward order, for one 224 x 224 image."""
    layers = []

    def conv(name, cin, cout, k, hw_out):
        layers.append((name, k * k * cin * cout, 2 * k * k * cin * cout * hw_out * hw_out))

    def bn(name, c, hw):
        layers.append((name, 2 * c, 4 * c * hw * hw))

    conv("conv1", 3, 64, 7, 112)
    bn("bn1", 64, 112)
    cin, hw = 64, 56
    for stage, (blocks, width, stride) in enumerate([(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)], 1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            out_hw = hw // s
            p = "layer%d.%d." % (stage, b)
            conv(p + "conv1", cin, width, 1, hw)
            bn(p + "bn1", width, hw)
            conv(p + "conv2", width, width, 3, out_hw)
            bn(p + "bn2", width, out_hw)
            conv(p + "conv3", width, 4 * width, 1, out_hw)
            bn(p + "bn3", 4 * width, out_hw)
            if b == 0:
                conv(p + "downsample", cin, 4 * width, 1, out_hw)
                bn(p + "downsample.bn", 4 * width, out_hw)
            cin, hw = 4 * width, out_hw
    layers.append(("fc", 2048 * 1000 + 1000, 2 * 2048 * 1000))
    total = sum(p for _, p, _ in layers)
    if total != RESNET50_PARAMETERS:
        sys.exit("the layers add up to %d parameters, not ResNet-50's %d" % (total, RESNET50_PARAMETERS))
    return layers


def buckets(layers, bucket_bytes, elem_bytes):
    """[(bytes, index of the layer whose backward fills it)] in backward order."""
    out, size = [], 0
    for i in range(len(layers) - 1, -1, -1):
        size += layers[i][1] * elem_bytes
        if size >= bucket_bytes or i == 0:
            out.append((size, i))
            size = 0
    return out


_simulated = {}


def simulate(a, gpus, size):
    """(the cost model's choice, its simulated seconds) for an allreduce of `size` bytes."""
    if (gpus, size) not in _simulated:
        _simulated[(gpus, size)] = simulate_once(a, gpus, size)
    return _simulated[(gpus, size)]


def simulate_once(a, gpus, size):
    base = [os.path.join(ROOT, "bazel-bin/simulator/simulate"), "--platform", a.platform, "--layout",
            "%dx%d" % (gpus // a.per_node, a.per_node), "-d", "half", "--half-wire", "half", "-b", str(size),
            "-e", str(size)]
    text = subprocess.run(base + ["--choice-only"], check=True, capture_output=True, text=True).stdout
    choice = text.split("the cost model chooses ")[1].split()[0]
    json_path = "/tmp/resnet_step.%d.json" % os.getpid()
    if os.path.exists(json_path):
        os.remove(json_path)
    print("# %d GPUs, %d B: %s" % (gpus, size, choice), file=sys.stderr, flush=True)
    subprocess.run(base + ["--algo", choice, "--json", json_path], check=True, capture_output=True, timeout=4 * 3600)
    with open(json_path) as f:
        seconds = json.loads(f.readline())["seconds"]
    os.remove(json_path)
    return choice, seconds


def timeline(layers, bucket_list, allreduce_s, compute_s):
    """The step: (step seconds, backward end, each bucket's (ready, start, end))."""
    flops = sum(f for _, _, f in layers)
    forward = compute_s / 3
    backward_of = [2 * compute_s / 3 * f / flops for _, _, f in layers]
    done = {}  # layer index -> when its backward ends
    t = forward
    for i in range(len(layers) - 1, -1, -1):
        t += backward_of[i]
        done[i] = t
    network_free, spans = 0.0, []
    for (size, layer), seconds in zip(bucket_list, allreduce_s):
        start = max(done[layer], network_free)
        network_free = start + seconds
        spans.append((done[layer], start, network_free))
    return max(t, network_free), t, spans


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default=os.path.join(ROOT, "simulator/platforms/abci.platform"))
    ap.add_argument("--per-node", type=int, default=4)
    ap.add_argument("--gpus", default="1088,2176")
    ap.add_argument("--batch", type=int, default=32, help="images per GPU (Mikami et al.: 32)")
    ap.add_argument("--images-per-s", type=float, default=1000.0,
                    help="one GPU's training throughput (V100, mixed precision: about 800-1,100)")
    ap.add_argument("--bucket-mb", default="25,4", help="bucket sizes to try, MiB (25: DDP's and the trainer's)")
    ap.add_argument("--out", help="JSON of every figure")
    a = ap.parse_args()
    layers = resnet50_layers()
    compute_s = a.batch / a.images_per_s
    results = []
    for gpus in [int(g) for g in a.gpus.split(",")]:
        whole_choice, whole_s = simulate(a, gpus, RESNET50_PARAMETERS * 2)
        for mb in [float(m) for m in a.bucket_mb.split(",")]:
            bucket_list = buckets(layers, mb * (1 << 20), 2)
            sims = [simulate(a, gpus, size) for size, _ in bucket_list]
            step, backward_end, spans = timeline(layers, bucket_list, [s for _, s in sims], compute_s)
            results.append({
                "gpus": gpus, "bucket_mb": mb, "compute_ms": compute_s * 1e3, "step_ms": step * 1e3,
                "efficiency": compute_s / step, "exposed_ms": (step - backward_end) * 1e3,
                "buckets": [{"bytes": size, "ready_ms": ready * 1e3, "algorithm": c, "allreduce_ms": s * 1e3,
                             "start_ms": st * 1e3, "end_ms": en * 1e3}
                            for (size, _), (c, s), (ready, st, en) in zip(bucket_list, sims, spans)],
                "whole_gradient": {"algorithm": whole_choice, "allreduce_ms": whole_s * 1e3,
                                   "efficiency_unoverlapped": compute_s / (compute_s + whole_s)},
            })
            r = results[-1]
            print("%5d GPUs, %4g MiB buckets (%d): step %.2f ms = compute %.2f + exposed %.2f; efficiency %.2f%%"
                  " (the whole gradient at once after backward, %s %.2f ms: %.2f%%)" %
                  (gpus, mb, len(bucket_list), r["step_ms"], r["compute_ms"], r["exposed_ms"], 100 * r["efficiency"],
                   whole_choice, whole_s * 1e3, 100 * r["whole_gradient"]["efficiency_unoverlapped"]), flush=True)
            for b in r["buckets"]:
                print("      %9d B  ready at %6.2f ms, %-22s %7.2f ms, from %6.2f to %6.2f ms" %
                      (b["bytes"], b["ready_ms"], b["algorithm"], b["allreduce_ms"], b["start_ms"], b["end_ms"]),
                      flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"platform": os.path.basename(a.platform), "batch": a.batch, "images_per_s": a.images_per_s,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
