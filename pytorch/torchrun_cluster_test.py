"""torchrun across two emulated hosts (tools/cluster: network namespaces joined by a
bridge, 2 Gbit/s links), 2 processes each, meeting through torchrun's c10d rendezvous:

    bazel test //pytorch:torch2_torchrun_cluster_test     (root: it makes namespaces)

Each host runs, as a user on a 2-node job would,

    torchrun --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint HOST1:PORT \\
        ddp_train.py --backend tessera ...

once with --backend tessera and once with --backend gloo (GLOO_SOCKET_IFNAME and
TESSERA_SOCKET_IFNAME name the host's interface). The 4 ranks must end with the same
parameters, and tessera's must match Gloo's within ddp_test.py's 4-rank tolerance (the
two add the ranks' float32 gradients in different orders).
"""

import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLUSTER = os.path.join(ROOT, "tools", "cluster", "cluster.sh")
TRAIN = os.path.join(HERE, "ddp_train.py")
NAME = "torchrun"
SUBNET = "10.97.%d.0/24" % random.randint(1, 250)
HOST1 = SUBNET.rsplit(".", 1)[0] + ".1"
STEPS = 20
TIMEOUT = 240
ATOL = 1e-6  # ddp_test.py's TOLERANCE["none"] for 4 ranks


def cluster(*args, check=True, **kwargs):
    return subprocess.run(["bash", CLUSTER] + list(args) + ["--name", NAME], check=check, **kwargs)


class TorchrunClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cluster("down", check=False, capture_output=True)
        cluster("up", "--hosts", "2", "--rate", "2gbit", "--subnet", SUBNET)

    @classmethod
    def tearDownClass(cls):
        cluster("down", check=False)

    def job(self, backend, workdir):
        """Both hosts' torchrun of one job; returns (outputs, parameter files)."""
        port = str(random.randint(20000, 40000))
        dump = os.path.join(workdir, backend + "_params_{rank}.pt")
        procs = []
        for host in (1, 2):
            env = ["env", "PYTHONPATH=" + os.environ.get("PYTHONPATH", ""), "PYTHONSAFEPATH=1", "OMP_NUM_THREADS=1",
                   "GLOO_SOCKET_IFNAME=eth0", "TESSERA_SOCKET_IFNAME=eth0"]
            # Both torches: naming the output streams avoids torch 1.13's broken default under
            # Python 3.11 (docs/pytorch.md).
            cmd = env + [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "2",
                         "--rdzv_backend", "c10d", "--rdzv_endpoint", "%s:%s" % (HOST1, port), "--rdzv_id",
                         backend, "--redirects", "0:1,1:1", "--tee", "0:1,1:1", TRAIN, "--backend", backend,
                         "--steps", str(STEPS), "--bucket-cap-mb", "0.005", "--param-dump", dump]
            procs.append(subprocess.Popen(["bash", CLUSTER, "exec", "--name", NAME, "--host", str(host), "--"] + cmd,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True))
        outputs = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                out, _ = p.communicate()
                self.fail("torchrun on %s hung:\n%s" % (backend, out))
            self.assertEqual(p.returncode, 0, out)
            outputs.append(out)
        return outputs, [dump.replace("{rank}", str(r)) for r in range(4)]

    def test_ddp_across_two_hosts(self):
        workdir = tempfile.mkdtemp(prefix="torchrun_cluster_", dir="/tmp")
        results = {}
        for backend in ("gloo", "tessera"):
            start = time.monotonic()
            outputs, dumps = self.job(backend, workdir)
            digests = set()
            for out in outputs:
                digests.update(line.split()[-1] for line in out.splitlines() if "params sha256" in line)
            self.assertEqual(len(digests), 1, "%s: ranks ended with different parameters:\n%s" % (backend, outputs))
            results[backend] = torch.load(dumps[0])
            for dump in dumps[1:]:
                self.assertTrue(os.path.exists(dump), "%s: a rank wrote no parameters" % backend)
            print("  %s across 2 hosts x 2: %.1f s" % (backend, time.monotonic() - start), file=sys.stderr)
        worst = max((results["gloo"][k] - results["tessera"][k]).abs().max().item() for k in results["gloo"])
        print("  max |tessera - gloo| %.3g (tolerance %g)" % (worst, ATOL), file=sys.stderr)
        self.assertLessEqual(worst, ATOL)


if __name__ == "__main__":
    unittest.main(verbosity=2)
