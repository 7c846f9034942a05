#!/usr/bin/env python3
"""The straggler suite: a slowed rank on an emulated 2 x 2 job, named by Prometheus.

Brings up a cluster of two emulated hosts (tools/cluster/cluster.sh, prefix st<pid>) and
Debian's Prometheus in the cluster's launcher namespace, scraping every rank's
/metrics (TESSERA_METRICS_PORT) each second. Each case runs straggler_rank on 2 hosts x
2 ranks, slows one rank or host (or none), and reads, once the calls are done and while
the ranks still serve their pages, the PromQL queries

  max by (straggler) (tessera_straggler)       the straggler as rank 0 judged it
  topk(1, sum by (peer) (rate(tessera_peer_stalled_seconds_total[1m])))
                                               the peer every rank's own stalls wait on most

Cases (host 2 holds ranks 2 and 3):
  sigstop   rank 3 stopped 200 ms of every second (SIGSTOP / SIGCONT), allreduces 10 ms apart
  link      host 2's link (both ways) shaped to 500 Mbit/s, host 1's to 2 Gbit/s (tc tbf);
            allreduces of 4 MiB
  cpu       each host's ranks pinned to a core of their own (as cluster.sh run --pin-hosts),
            host 2's core shared with a busy loop; each step computes 6 ms of CPU time
  balanced  10,000 allreduces of 8 bytes, nobody slowed: nobody may be named

Prints a table (case, slowed ranks, ranks whose pages Prometheus scraped, the rank each
query names, whom each rank's tesseraCommGetHealth named first and at which call, how
many ranks name a slowed one at the end) and exits 1 when a case is wrong: the query
and every rank must name a slowed rank (for a host, one of its ranks), or nobody in the
balanced case. Needs root (network namespaces). About three minutes.

  bazel build //tests/straggler:straggler_rank
  python3 tests/straggler/straggler_suite.py --driver bazel-bin/tests/straggler/straggler_rank
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "tools", "cluster", "cluster.sh")
METRICS_PORT = 9470
PROM_PORT = 9469
QUERY = "max by (straggler) (tessera_straggler)"
PEER_QUERY = "topk(1, sum by (peer) (rate(tessera_peer_stalled_seconds_total[1m])))"
UP = "count(up{job=\"tessera\"} == 1)"  # the ranks whose pages were scraped
FAST_RATE, SLOW_RATE = "2gbit", "500mbit"
CPU_OF_HOST = {1: 0, 2: 1}  # as cluster.sh run --pin-hosts splits 2 CPUs

# name: slowed ranks (empty: none), straggler_rank's flags
CASES = {
    "sigstop": ([3], ["--calls", "2000", "--step-ms", "10"]),
    "link": ([2, 3], ["--calls", "300", "--bytes", str(4 << 20)]),
    "cpu": ([2, 3], ["--calls", "1500", "--step-ms", "4", "--work-ms", "6"]),
    "balanced": ([], ["--calls", "10000"]),
}


def log(msg):
  print("straggler_suite: " + msg, file=sys.stderr, flush=True)


class Cluster:

  def __init__(self, name):
    self.name = name

  def cmd(self, *args, timeout=120):
    r = subprocess.run(["bash", CLUSTER, args[0], "--name", self.name, *args[1:]], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if r.returncode != 0:
      raise RuntimeError("cluster.sh %s failed (%d): %s" % (" ".join(args), r.returncode, r.stdout))
    return r.stdout

  def in_launcher(self, *command, **kwargs):
    return ["ip", "netns", "exec", self.name + "-launcher", *command]


def start_prometheus(cluster, workdir):
  targets = ["10.98.0.%d:%d" % (h, METRICS_PORT + i) for h in (1, 2) for i in (0, 1)]
  config = os.path.join(workdir, "prometheus.yml")
  with open(config, "w") as f:
    f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: tessera\n    static_configs:\n      - targets: %s\n" %
            json.dumps(targets))
  out = open(os.path.join(workdir, "prometheus.log"), "w")
  proc = subprocess.Popen(
      cluster.in_launcher("prometheus", "--config.file=" + config, "--storage.tsdb.path=" +
                          os.path.join(workdir, "tsdb"), "--web.listen-address=127.0.0.1:%d" % PROM_PORT),
      stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
  return proc


def query(cluster, expr):
  url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (PROM_PORT, urllib.parse.quote(expr))
  code = ("import json, sys, urllib.request\n"
          "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
  r = subprocess.run(cluster.in_launcher(sys.executable, "-c", code, url), stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, timeout=30)
  if r.returncode != 0:
    return None, r.stderr.strip()
  return json.loads(r.stdout), ""


def wait_for(paths, limit_s):
  until = time.time() + limit_s
  while time.time() < until:
    if all(os.path.exists(p) for p in paths):
      return True
    time.sleep(0.05)
  return False


def slow_by_sigstop(pid, stop):
  while not stop.is_set():
    try:
      os.kill(pid, signal.SIGSTOP)
      time.sleep(0.2)
      os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
      return
    stop.wait(0.8)


def shape_links(cluster, rates):
  """tc tbf on both ends of each host's link (what it sends and what it receives);
  rates[i] None removes host i's."""
  for host, rate in rates.items():
    for ns, dev in ((cluster.name + "-h%d" % host, "eth0"), (cluster.name + "-switch", "h%d" % host)):
      if rate is None:
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], stderr=subprocess.DEVNULL)
      else:
        subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst",
                        "131072", "latency", "5ms"], check=True)


def pin(pid, cpu):
  subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], check=True, stdout=subprocess.DEVNULL)


class Slowdown:
  """What a case does to its slowed rank or host while the calls run, and undoes."""

  def __init__(self, name, cluster, rundir):
    self.name, self.cluster, self.rundir = name, cluster, rundir
    self.stop = threading.Event()
    self.threads, self.procs = [], []

  def pid(self, rank):
    return int(open(os.path.join(self.rundir, "pid.%d" % rank)).read())

  def before_start(self):
    if self.name == "link":
      shape_links(self.cluster, {1: FAST_RATE, 2: SLOW_RATE})

  def once_looping(self):
    if self.name == "sigstop":
      self.threads.append(threading.Thread(target=slow_by_sigstop, args=(self.pid(3), self.stop)))
      self.threads[-1].start()
    elif self.name == "cpu":
      for rank in range(4):
        pin(self.pid(rank), CPU_OF_HOST[1 if rank < 2 else 2])
      self.procs.append(subprocess.Popen(["taskset", "-c", str(CPU_OF_HOST[2]), sys.executable, "-c", "while True: pass"],
                                         start_new_session=True))

  def undo(self):
    self.stop.set()
    for t in self.threads:
      t.join()
    for p in self.procs:
      p.kill()
      p.wait()
    self.threads, self.procs = [], []
    if self.name == "link":
      shape_links(self.cluster, {1: None, 2: None})


def named_rank(answer, label):
  if not answer or answer.get("status") != "success":
    return None
  result = answer["data"]["result"]
  return int(result[0]["metric"][label]) if result else -1


def run_case(cluster, driver, name, workdir):
  slowed, flags = CASES[name]
  rundir = os.path.join(workdir, name)
  os.makedirs(rundir)
  env = dict(os.environ, TESSERA_METRICS_PORT=str(METRICS_PORT), TESSERA_STRAGGLER_PERIOD_MS="500")
  command = ["bash", CLUSTER, "run", "--name", cluster.name, "--hosts", "2", "--ranks-per-host", "2", "--timeout",
             "300", "--", driver, "--dir", rundir, "--linger-s", "60", *flags]
  slowdown = Slowdown(name, cluster, rundir)
  slowdown.before_start()
  out = open(os.path.join(rundir, "mpirun.log"), "w")
  proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
  answer, peer_answer, error, up = None, None, "", None
  try:
    if not wait_for([os.path.join(rundir, "looping.%d" % r) for r in range(4)], 60):
      raise RuntimeError("the ranks never started their allreduces")
    slowdown.once_looping()
    # The calls are done once every rank's health has been read a last time: the ranks
    # linger, serving their pages, until `release`.
    done = [os.path.join(rundir, "done.%d" % r) for r in range(4)]
    wait_for(done, 280)
    slowdown.undo()
    time.sleep(3)  # three scrapes of the final pages
    answer, error = query(cluster, QUERY)
    peer_answer, _ = query(cluster, PEER_QUERY)
    up, _ = query(cluster, UP)
  finally:
    slowdown.undo()
    open(os.path.join(rundir, "release"), "w").close()
    try:
      proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  ranks = []
  for r in range(4):
    path = os.path.join(rundir, "rank%d.json" % r)
    ranks.append(json.load(open(path)) if os.path.exists(path) else {"rank": r, "error": "no result"})
  return {"case": name, "slowed": slowed, "query": QUERY, "answer": answer, "query_error": error,
          "named_by_query": named_rank(answer, "straggler"), "peer_query": PEER_QUERY, "peer_answer": peer_answer,
          "waited_on_by_peer_query": named_rank(peer_answer, "peer"), "ranks": ranks,
          "scraped": int(up["data"]["result"][0]["value"][1]) if up and up["data"]["result"] else 0}


def verdict_ok(run):
  ranks = run["ranks"]
  if any(r.get("error") for r in ranks) or run["scraped"] != 4:
    return False
  if not run["slowed"]:
    return run["named_by_query"] == -1 and all(r["first_named"] == -1 for r in ranks)
  return run["named_by_query"] in run["slowed"] and all(r["straggler"] == run["named_by_query"] for r in ranks)


def table(runs):
  lines = ["| case | slowed ranks | pages scraped | straggler query names | peer query names | first named, at call "
           "(by ranks 0-3) | ranks naming a slowed rank at the end | ok |",
           "|---|---|---|---|---|---|---|---|"]
  for run in runs:
    firsts = ", ".join("-" if r.get("first_named", -1) < 0 else "%d at %d" % (r["first_named"], r["first_named_at"])
                       for r in run["ranks"])
    naming = sum(1 for r in run["ranks"] if r.get("straggler", -1) in run["slowed"])
    show = lambda n: "none" if n == -1 else str(n)
    lines.append("| %s | %s | %d of 4 | %s | %s | %s | %d of 4 | %s |" %
                 (run["case"], ", ".join(map(str, run["slowed"])) or "none", run["scraped"],
                  show(run["named_by_query"]), show(run["waited_on_by_peer_query"]), firsts, naming,
                  "yes" if verdict_ok(run) else "NO"))
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--driver", required=True, help="straggler_rank")
  parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
  parser.add_argument("--out", help="directory for results.json and each case's log")
  args = parser.parse_args()
  driver = os.path.abspath(args.driver)
  workdir = tempfile.mkdtemp(prefix="straggler_suite.")
  cluster = Cluster("st%d" % os.getpid())
  prometheus = None
  runs = []
  try:
    cluster.cmd("up", "--hosts", "2", "--rate", "none", "--subnet", "10.98.0.0/24")
    prometheus = start_prometheus(cluster, workdir)
    for name in args.cases.split(","):
      log("case %s" % name)
      run = run_case(cluster, driver, name, workdir)
      runs.append(run)
      log("case %s: query %s -> %s %s" % (name, QUERY, json.dumps(run["answer"]), run["query_error"]))
      log("case %s: query %s -> %s" % (name, PEER_QUERY, json.dumps(run["peer_answer"])))
  finally:
    if prometheus:
      os.killpg(prometheus.pid, signal.SIGTERM)
      prometheus.wait(timeout=30)
    cluster.cmd("down")
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
      json.dump(runs, f, indent=1)
    for run in runs:  # the ranks' logs: rank 0 logs each verdict at WARN
      shutil.copy(os.path.join(workdir, run["case"], "mpirun.log"), os.path.join(args.out, run["case"] + ".log"))
  shutil.rmtree(workdir, ignore_errors=True)
  print(table(runs))
  return 0 if all(verdict_ok(r) for r in runs) else 1


if __name__ == "__main__":
  sys.exit(main())
