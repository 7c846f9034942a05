"""PyTorch Lightning on the "tessera" backend (torch 2.x): lightning_train.py, an
ordinary Lightning script with DDPStrategy(process_group_backend=...), run as Lightning
runs it (it starts its second process itself), on Gloo and on tessera.

    bazel test //pytorch:torch2_lightning_test

Two ranks: every reduced element is one addition, the same in either order, so the two
backends must train to the same losses and the same parameters, bit for bit (ddp_test.py).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_train.py")
TIMEOUT = 300


class LightningTest(unittest.TestCase):
    def train(self, backend, workdir):
        out = os.path.join(workdir, backend + ".json")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, SCRIPT, "--backend", backend, "--out", out], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT,
                                  start_new_session=True)
        except subprocess.TimeoutExpired as e:
            self.fail("Lightning on %s hung: %s" % (backend, e.output))
        self.assertEqual(proc.returncode, 0, proc.stdout)
        digests = set(line.split()[-1] for line in proc.stdout.splitlines() if "params sha256" in line)
        self.assertEqual(len(digests), 1, "the two ranks ended with different parameters:\n" + proc.stdout)
        with open(out) as f:
            result = json.load(f)
        print("  %s: %.1f s, %d steps, final loss %.6f" % (backend, time.monotonic() - start, len(result["losses"]),
                                                           result["losses"][-1]), file=sys.stderr)
        return result

    def test_same_training_as_gloo(self):
        workdir = tempfile.mkdtemp(prefix="lightning_test_")
        gloo = self.train("gloo", workdir)
        tessera = self.train("tessera", workdir)
        self.assertEqual(tessera["backend"], "tessera")
        self.assertEqual(tessera["world"], 2)
        self.assertGreater(len(tessera["losses"]), 10)
        self.assertLess(tessera["losses"][-1], tessera["losses"][0], "the model did not learn")
        self.assertEqual(tessera["losses"], gloo["losses"])
        self.assertEqual(tessera["digest"], gloo["digest"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
