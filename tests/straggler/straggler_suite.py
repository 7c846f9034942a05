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

Cases (on 2 x 2, host 2 holds ranks 2 and 3):
  sigstop   rank 3 stopped 200 ms of every second (SIGSTOP / SIGCONT), allreduces 10 ms apart
  link      on 4 hosts x 1 rank: host 3's link (both ways) shaped to 500 Mbit/s, the others'
            to 2 Gbit/s (tc tbf); allreduces of 4 MiB. (With two hosts no timing could tell
            which host's link is slow: every byte between them crosses both.)
  cpu       each host's ranks pinned to a core of their own (as cluster.sh run --pin-hosts),
            host 2's core shared with a busy loop; each step computes 6 ms of CPU time
  core      one rank's core shared: ranks 0-2 pinned to CPU 0, rank 3 to CPU 1 beside a
            busy loop at nice -10 (its autogroup's: a tenth of the core is left to rank 3);
            each step computes 1 ms of CPU time
  trainer   train_resnet (a small ResNet on a generated 4-class dataset, 3 epochs of 50 steps,
            one gradient allreduce a step) with rank 3's data loading CPU-throttled: its
            decoding thread ("train-decode") in a cgroup allowed 1% of a CPU
  balanced  10,000 allreduces of 8 bytes 1 ms apart, nobody slowed: nobody may be named

Prints a table (case, slowed ranks, ranks whose pages Prometheus scraped, the rank each
query names, whom each rank's tesseraCommGetHealth named first and at which call, how
many ranks name a slowed one at the end) and exits 1 when a case is wrong: the query
must name a slowed rank (for a host, one of its ranks) and no other, and every rank name
it; nobody in the balanced case. Needs root (network namespaces, tc, cgroup v1's cpu
controller). About five minutes.

  bazel build //tests/straggler:straggler_rank //trainer:train_resnet //tools:make_dataset
  python3 tests/straggler/straggler_suite.py --driver bazel-bin/tests/straggler/straggler_rank \
      --trainer bazel-bin/trainer/train_resnet --make-dataset bazel-bin/tools/make_dataset

The trainer exits when done, so its case asks Prometheus over the run's samples:
max by (straggler) (max_over_time(tessera_straggler[<the run's seconds>s])).
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
HOSTS = 4  # the cluster's: the link case runs on 4 hosts x 1 rank, the others on hosts 1 and 2 x 2
SLOW_HOST = 3  # the link case's

# name: slowed ranks (empty: none), straggler_rank's flags
CASES = {
    "sigstop": ([3], ["--calls", "2000", "--step-ms", "10"]),
    "link": ([SLOW_HOST - 1], ["--calls", "300", "--bytes", str(4 << 20)]),
    "cpu": ([2, 3], ["--calls", "1500", "--step-ms", "4", "--work-ms", "6"]),
    "core": ([3], ["--calls", "1500", "--step-ms", "4", "--work-ms", "1"]),
    "trainer": ([3], ["--blocks=1,1,1,1", "--width=8", "--crop_size=32", "--val_resize=37", "--batch=16", "--epochs=3",
                      "--lr=0.1", "--bucket_mb=64", "--decode_threads=1", "--prefetch=1", "--progress=lines"]),
    "balanced": ([], ["--calls", "10000", "--step-ms", "1"]),
}
TRAINER_STEPS_PER_EPOCH = 50  # 800 images, a global batch of 16
TRAINER_WINDOW = 200


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
  targets = ["10.98.0.%d:%d" % (h, METRICS_PORT + i) for h in range(1, HOSTS + 1) for i in (0, 1)]
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
      shape_links(self.cluster, {h: SLOW_RATE if h == SLOW_HOST else FAST_RATE for h in range(1, HOSTS + 1)})

  def once_looping(self):
    if self.name == "sigstop":
      self.threads.append(threading.Thread(target=slow_by_sigstop, args=(self.pid(3), self.stop)))
      self.threads[-1].start()
    elif self.name == "cpu":
      for rank in range(4):
        pin(self.pid(rank), CPU_OF_HOST[1 if rank < 2 else 2])
      self.procs.append(subprocess.Popen(["taskset", "-c", str(CPU_OF_HOST[2]), sys.executable, "-c", "while True: pass"],
                                         start_new_session=True))
    elif self.name == "core":
      for rank in range(4):
        pin(self.pid(rank), 1 if rank == 3 else 0)
      self.procs.append(subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"],
                                         start_new_session=True))
      # Its own session is its own autogroup, which the scheduler weighs against the
      # ranks' as a whole: the group's nice, not the process's, sets the share.
      if os.path.exists("/proc/%d/autogroup" % self.procs[-1].pid):
        with open("/proc/%d/autogroup" % self.procs[-1].pid, "w") as f:
          f.write("-10")
      else:
        os.setpriority(os.PRIO_PROCESS, self.procs[-1].pid, -10)

  def undo(self):
    self.stop.set()
    for t in self.threads:
      t.join()
    for p in self.procs:
      p.kill()
      p.wait()
    self.threads, self.procs = [], []
    if self.name == "link":
      shape_links(self.cluster, {h: None for h in range(1, HOSTS + 1)})


def rank_pid(rank, exe):
  """The pid of `exe` that mpirun started as `rank`, or None."""
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      if os.path.realpath("/proc/%s/exe" % entry) != exe:
        continue
      env = open("/proc/%s/environ" % entry, "rb").read().split(b"\0")
    except OSError:
      continue
    if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env:
      return int(entry)
  return None


LOADER_CGROUP = "/sys/fs/cgroup/cpu/tessera-straggler-%d" % os.getpid()  # cgroup v1's cpu controller
LOADER_QUOTA_US, LOADER_PERIOD_US = 1000, 100000  # 1% of one CPU


def throttle_loader(pid, stop):
  """Moves each decoding thread of `pid` (one per epoch's loader) into a cgroup whose CPU
  bandwidth is LOADER_QUOTA_US per LOADER_PERIOD_US (cgroup v1 takes single threads)."""
  os.makedirs(LOADER_CGROUP, exist_ok=True)
  with open(os.path.join(LOADER_CGROUP, "cpu.cfs_period_us"), "w") as f:
    f.write(str(LOADER_PERIOD_US))
  with open(os.path.join(LOADER_CGROUP, "cpu.cfs_quota_us"), "w") as f:
    f.write(str(LOADER_QUOTA_US))
  done = set()
  while not stop.is_set():
    try:
      tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
      return
    for tid in tids:
      try:
        if tid in done or open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip() != "train-decode":
          continue
        with open(os.path.join(LOADER_CGROUP, "tasks"), "w") as f:
          f.write(tid)
        done.add(tid)
      except OSError:
        pass
    stop.wait(0.02)


def remove_loader_cgroup():
  try:
    os.rmdir(LOADER_CGROUP)  # its threads have exited
  except OSError:
    pass


def run_trainer_case(cluster, trainer, make_dataset, workdir):
  slowed, flags = CASES["trainer"]
  rundir = os.path.join(workdir, "trainer")
  os.makedirs(rundir)
  subprocess.run([make_dataset, "--out=" + os.path.join(rundir, "data"), "--classes=4", "--train_per_class=200",
                  "--val_per_class=10", "--min_size=256", "--max_size=320"], check=True, stdout=subprocess.DEVNULL)
  # A step makes 4 collectives on the main communicator and the late rank is waited on in
  # the first: named by time, which needs a whole window, here 200 collectives (50 steps).
  env = dict(os.environ, TESSERA_METRICS_PORT=str(METRICS_PORT), TESSERA_STRAGGLER_PERIOD_MS="500",
             TESSERA_STRAGGLER_WINDOW=str(TRAINER_WINDOW))
  command = ["bash", CLUSTER, "run", "--name", cluster.name, "--hosts", "2", "--ranks-per-host", "2", "--timeout",
             "300", "--mca", "orte_tag_output", "1", "--", trainer, "--data=" + os.path.join(rundir, "data"),
             "--out=" + os.path.join(rundir, "run"), *flags]
  log_path = os.path.join(rundir, "mpirun.log")
  started = time.time()
  proc = subprocess.Popen(command, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env,
                          start_new_session=True)
  stop = threading.Event()
  starver = None
  try:
    until = time.time() + 60
    pid = None
    while pid is None and time.time() < until and proc.poll() is None:
      pid = rank_pid(slowed[0], os.path.realpath(trainer))
      time.sleep(0.05)
    if pid is None:
      raise RuntimeError("rank %d of the trainer never started" % slowed[0])
    starver = threading.Thread(target=throttle_loader, args=(pid, stop))
    starver.start()
    proc.wait(timeout=300)
  finally:
    stop.set()
    if starver:
      starver.join()
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    remove_loader_cgroup()
  time.sleep(2)
  # Over this run's samples only: the earlier cases' pages had the same addresses.
  span = "[%ds]" % (time.time() - started)
  over_run = "max by (straggler) (max_over_time(tessera_straggler%s))" % span
  answer, error = query(cluster, over_run)
  up, _ = query(cluster, "count(max_over_time(up{job=\"tessera\"}%s) == 1)" % span)
  # Only rank 0 prints the verdict; how many ranks' pages served it, from Prometheus.
  pages, _ = query(cluster, "count by (straggler) (max by (rank, straggler) (max_over_time(tessera_straggler%s)))" % span)
  pages_naming = {int(r["metric"]["straggler"]): int(r["value"][1]) for r in pages["data"]["result"]} if pages else {}
  # Rank 0 prints its health's verdict at each epoch's end (first named at: that epoch's
  # last step); mpirun tags each line with the rank ("[1,R]<stderr>:").
  ranks = [{"rank": r, "first_named": -1, "first_named_at": -1, "straggler": -1, "error": ""} for r in range(4)]
  for line in open(log_path, errors="replace"):
    if "train_resnet: epoch" not in line or not line.startswith("["):
      continue
    r = int(line[1:line.index("]")].split(",")[1])
    epoch = int(line.split("train_resnet: epoch ")[1].split(":")[0])
    named = int(line.split("straggler: rank ")[1].split()[0]) if "straggler: rank " in line else -1
    ranks[r]["straggler"] = named
    if named >= 0 and ranks[r]["first_named"] < 0:
      ranks[r]["first_named"], ranks[r]["first_named_at"] = named, epoch * TRAINER_STEPS_PER_EPOCH
  if proc.returncode != 0:
    for r in ranks:
      r["error"] = "mpirun exited %d" % proc.returncode
  return {"case": "trainer", "slowed": slowed, "query": over_run, "answer": answer, "query_error": error,
          "named_by_query": named_ranks(answer, "straggler"), "peer_query": "", "peer_answer": None,
          "waited_on_by_peer_query": None, "ranks": ranks,
          "naming": sum(n for r, n in pages_naming.items() if r in slowed),
          "scraped": int(up["data"]["result"][0]["value"][1]) if up and up["data"]["result"] else 0}


def named_ranks(answer, label):
  """The ranks the answer's series name, largest value first; None: no answer."""
  if not answer or answer.get("status") != "success":
    return None
  result = sorted(answer["data"]["result"], key=lambda r: -float(r["value"][1]))
  return [int(r["metric"][label]) for r in result]


def run_case(cluster, driver, name, workdir):
  slowed, flags = CASES[name]
  rundir = os.path.join(workdir, name)
  os.makedirs(rundir)
  env = dict(os.environ, TESSERA_METRICS_PORT=str(METRICS_PORT), TESSERA_STRAGGLER_PERIOD_MS="500")
  hosts, per_host = (HOSTS, 1) if name == "link" else (2, 2)
  command = ["bash", CLUSTER, "run", "--name", cluster.name, "--hosts", str(hosts), "--ranks-per-host", str(per_host),
             "--timeout", "300", "--", driver, "--dir", rundir, "--linger-s", "60", *flags]
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
  naming = sum(1 for r in ranks if r.get("straggler", -1) in slowed)
  return {"case": name, "slowed": slowed, "query": QUERY, "answer": answer, "query_error": error, "naming": naming,
          "named_by_query": named_ranks(answer, "straggler"), "peer_query": PEER_QUERY, "peer_answer": peer_answer,
          "waited_on_by_peer_query": named_ranks(peer_answer, "peer"), "ranks": ranks,
          "scraped": int(up["data"]["result"][0]["value"][1]) if up and up["data"]["result"] else 0}


def verdict_ok(run):
  """The query names a slowed rank and nobody else, and every rank names it at the end;
  the balanced case names nobody, ever."""
  ranks, named = run["ranks"], run["named_by_query"]
  if any(r.get("error") for r in ranks) or run["scraped"] != 4 or named is None:
    return False
  if not all(r in run["slowed"] for r in named):
    return False
  if not run["slowed"]:
    return all(r["first_named"] == -1 for r in ranks)
  return bool(named) and run["naming"] == 4


def table(runs):
  lines = ["| case | slowed ranks | pages scraped | straggler query names | peer query names | first named, at call "
           "(by ranks 0-3) | ranks naming a slowed rank at the end | ok |",
           "|---|---|---|---|---|---|---|---|"]
  for run in runs:
    firsts = ", ".join("-" if r.get("first_named", -1) < 0 else "%d at %d" % (r["first_named"], r["first_named_at"])
                       for r in run["ranks"])
    show = lambda n: "-" if n is None else ", ".join(map(str, n)) or "none"
    lines.append("| %s | %s | %d of 4 | %s | %s | %s | %d of 4 | %s |" %
                 (run["case"], ", ".join(map(str, run["slowed"])) or "none", run["scraped"],
                  show(run["named_by_query"]), show(run["waited_on_by_peer_query"]), firsts, run["naming"],
                  "yes" if verdict_ok(run) else "NO"))
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--driver", required=True, help="straggler_rank")
  parser.add_argument("--trainer", help="train_resnet (the trainer case)")
  parser.add_argument("--make-dataset", help="make_dataset (the trainer case)")
  parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
  parser.add_argument("--out", help="directory for results.json and each case's log")
  args = parser.parse_args()
  driver = os.path.abspath(args.driver)
  workdir = tempfile.mkdtemp(prefix="straggler_suite.")
  cluster = Cluster("st%d" % os.getpid())
  prometheus = None
  runs = []
  try:
    cluster.cmd("up", "--hosts", str(HOSTS), "--rate", "none", "--subnet", "10.98.0.0/24")
    prometheus = start_prometheus(cluster, workdir)
    for name in args.cases.split(","):
      log("case %s" % name)
      if name == "trainer":
        if not args.trainer or not args.make_dataset:
          raise SystemExit("the trainer case needs --trainer and --make-dataset")
        run = run_trainer_case(cluster, os.path.abspath(args.trainer), os.path.abspath(args.make_dataset), workdir)
      else:
        run = run_case(cluster, driver, name, workdir)
      runs.append(run)
      log("case %s: query %s -> %s %s" % (name, run["query"], json.dumps(run["answer"]), run["query_error"]))
      if run["peer_answer"]:
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
