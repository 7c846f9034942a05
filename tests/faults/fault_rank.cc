// fault_rank: one rank of the fault suite (tests/faults/fault_suite.py, docs/diagnosis.md).
//
// mpirun starts it on every rank of an emulated cluster (tools/cluster/cluster.sh run);
// rank and size come from OMPI_COMM_WORLD_RANK/SIZE, and the ranks meet through files
// in --dir, a directory every emulated host sees (they share the filesystem, not the
// network). Each rank runs as two processes:
//
//  - the supervisor (what mpirun started) execs this program again as the worker, with
//    LD_PRELOAD set to the SIGSEGV shim when this rank is the victim of segv_setup. It
//    waits for the worker, kills it at --hard-limit-s, and when the worker wrote no
//    result (killed, crashed, hung) writes one for it. It always exits 0, so mpirun
//    never tears the job down because a victim died: the survivors finish their checks.
//  - the worker creates the communicator, runs allreduces, meets its fault, and writes
//    one JSON line, <dir>/rank<R>.json, with its outcome.
//
// What a case does to its victims (--victims; the others are survivors):
//   kill_collective, stop_collective  the suite SIGKILLs / SIGSTOPs the victim's worker
//                                     while every rank loops over allreduces;
//   link_down, partition              the suite takes the victims' host off the network
//                                     in the loop (the victims are that host's ranks);
//   stuck                             the victim stops calling (sleeps) once the suite
//                                     writes <dir>/inject;
//   never_calls                       the victim creates the communicator and never
//                                     calls a collective;
//   kill_init, root_init              the victim SIGKILLs itself 300 ms into
//                                     tesseraCommInitRank, while the last survivor is
//                                     still 1 s away from calling it (root_init: the
//                                     victim is rank 0, which created the id and hosts
//                                     the rendezvous);
//   segv_setup                        the shim (segv_shim.cc) crashes the victim inside
//                                     its shared-memory set-up, where --segv-at says
//                                     (default ftruncate:1: its segment just created);
//   loss                              no victim: 1% of packets dropped, and every
//                                     allreduce must still be right.
//
// A survivor, once its call has failed, waits until every survivor has failed (so that
// no survivor disappears while another still waits, which would change what the other
// names), then destroys the communicator (abort for the cases where the victim is still
// alive) and compares its fd and thread counts with those before creation. Then the
// survivors alone, re-ranked, create a new communicator from a fresh id (<dir>/id2)
// and run a checked allreduce. Victims that are alive (stuck, never_calls) and the
// ranks of a cut host wait until the survivors are done, then destroy and exit.
//
// Files in --dir: id1, id2 (unique ids), pid.R ("pid host", written first),
// looping.R (the first allreduce succeeded), inject (from the suite), fault.R (the wall
// time a victim met its fault, written by the victim), failed.R (a survivor's call
// failed), rank<R>.json (the outcome).
//
// Usage: fault_rank --case NAME --victims R[,R...] --dir DIR [--shim LIB] [--segv-at FN:N]
//                   [--count N] [--iterations N] [--hard-limit-s S]
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

using Clock = std::chrono::steady_clock;

// --- Arguments and roles --------------------------------------------------------------

struct Args {
  std::string case_name;
  std::vector<int> victims;
  std::string dir;
  std::string shim;             // LD_PRELOAD library for segv_setup's victim
  std::string segv_at = "ftruncate:1";
  size_t count = size_t{1} << 20;  // floats per allreduce in the loop (4 MiB)
  int iterations = 20;          // allreduces of the loss case
  double hard_limit_s = 60;     // the supervisor kills the worker after this
  bool worker = false;
};

bool ParseInts(const std::string& text, std::vector<int>* out) {
  out->clear();
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    char* stop = nullptr;
    const long v = std::strtol(text.c_str() + at, &stop, 10);
    if (stop != text.c_str() + end) return false;
    out->push_back(static_cast<int>(v));
    at = end + 1;
  }
  return true;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--worker") {
      a->worker = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (flag == "--case") {
      a->case_name = value;
    } else if (flag == "--victims") {
      if (value != "none" && !ParseInts(value, &a->victims)) return false;
    } else if (flag == "--dir") {
      a->dir = value;
    } else if (flag == "--shim") {
      a->shim = value;
    } else if (flag == "--segv-at") {
      a->segv_at = value;
    } else if (flag == "--count") {
      a->count = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--iterations") {
      a->iterations = std::atoi(value.c_str());
    } else if (flag == "--hard-limit-s") {
      a->hard_limit_s = std::atof(value.c_str());
    } else {
      return false;
    }
  }
  static const char* const kCases[] = {"kill_collective", "stop_collective", "link_down", "partition",
                                       "stuck",           "never_calls",     "kill_init", "root_init",
                                       "segv_setup",      "loss"};
  const bool known = std::find(std::begin(kCases), std::end(kCases), a->case_name) != std::end(kCases);
  return known && !a->dir.empty() && a->count > 0;
}

// Victims of the link cases are the ranks of the cut host: they fail too, but they are
// not the ones the survivors must name; "cut" keeps them apart in the results.
enum class Role { kSurvivor, kVictim, kCut };

const char* RoleName(Role r) {
  switch (r) {
    case Role::kSurvivor: return "survivor";
    case Role::kVictim: return "victim";
    case Role::kCut: return "cut";
  }
  return "?";
}

bool IsLinkCase(const std::string& c) { return c == "link_down" || c == "partition"; }

// Cases where the victim is still alive when the survivors give up: they abort (the
// call meant for a communicator whose peers may never answer) instead of destroying.
bool VictimStaysAlive(const std::string& c) {
  return c == "stop_collective" || c == "stuck" || c == "never_calls" || IsLinkCase(c);
}

// --- Small helpers ----------------------------------------------------------------------

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Path(const Args& a, const std::string& name) { return a.dir + "/" + name; }

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Writes `text` to `path` whole: to a temporary name, then renamed, so a reader never
// sees half of it.
bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool ReadFile(const std::string& path, std::string* text) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  text->clear();
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text->append(buf, n);
  std::fclose(f);
  return true;
}

// Waits until every path exists; false at the limit.
bool WaitForFiles(const std::vector<std::string>& paths, double limit_s) {
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(limit_s));
  for (;;) {
    bool all = true;
    for (const std::string& p : paths) all = all && Exists(p);
    if (all) return true;
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int CountEntries(const char* dir_path) {
  DIR* dir = opendir(dir_path);
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
  }
  closedir(dir);
  return n;
}

struct Counts {
  int fds = -1;
  int threads = -1;
  bool operator==(const Counts& o) const { return fds == o.fds && threads == o.threads; }
};

Counts CountNow() { return {CountEntries("/proc/self/fd"), CountEntries("/proc/self/task")}; }

std::string CodeName(tesseraResult_t code) {
  static const char* const kNames[] = {"tesseraSuccess",      "tesseraUnhandledCudaError", "tesseraSystemError",
                                       "tesseraInternalError", "tesseraInvalidArgument",    "tesseraInvalidUsage",
                                       "tesseraRemoteError",   "tesseraInProgress",         "tesseraTimeout"};
  const int c = static_cast<int>(code);
  if (c >= 0 && c < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) return kNames[c];
  return "code " + std::to_string(c);
}

std::string LastError(tesseraComm_t comm) {
  const char* m = tesseraGetLastError(comm);
  return m == nullptr ? "(null)" : m;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

// A JSON object built field by field, in order.
class JsonLine {
 public:
  JsonLine& Str(const std::string& key, const std::string& v) { return Raw(key, JsonString(v)); }
  JsonLine& Int(const std::string& key, long long v) { return Raw(key, std::to_string(v)); }
  JsonLine& Bool(const std::string& key, bool v) { return Raw(key, v ? "true" : "false"); }
  JsonLine& Num(const std::string& key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6f", v);
    return Raw(key, buf);
  }
  JsonLine& Raw(const std::string& key, const std::string& json) {
    text_ += (text_.empty() ? "{" : ", ") + JsonString(key) + ": " + json;
    return *this;
  }
  std::string str() const { return (text_.empty() ? "{" : text_) + "}\n"; }

 private:
  std::string text_;
};

std::string Hostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// --- The unique id through a file -------------------------------------------------------

// The id's creator writes it; everyone else waits for the file. "" or what failed.
std::string ShareId(const Args& a, const std::string& name, bool create, tesseraUniqueId* id) {
  const std::string path = Path(a, name);
  if (create) {
    const tesseraResult_t r = tesseraGetUniqueId(id);
    if (r != tesseraSuccess) return "tesseraGetUniqueId: " + CodeName(r) + ": " + LastError(nullptr);
    if (!WriteFileAtomically(path, std::string(id->internal, sizeof(id->internal)))) return "cannot write " + path;
    return "";
  }
  if (!WaitForFiles({path}, 30)) return "no unique id in " + path + " after 30 s";
  std::string bytes;
  if (!ReadFile(path, &bytes) || bytes.size() != sizeof(id->internal)) return "malformed unique id in " + path;
  std::memcpy(id->internal, bytes.data(), sizeof(id->internal));
  return "";
}

// --- Allreduce with known values ------------------------------------------------------

// Rank r of n contributes r + 1 + (i % 13) at element i; the sum is exact in float32.
float Contribution(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 13)); }
float ExpectedSum(int nranks, size_t i) {
  return static_cast<float>(nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 13));
}

struct Collective {
  std::vector<float> send, recv;
  Collective(int rank, size_t count) : send(count), recv(count) {
    for (size_t i = 0; i < count; ++i) send[i] = Contribution(rank, i);
  }
  tesseraResult_t Run(tesseraComm_t comm) {
    std::fill(recv.begin(), recv.end(), -1.0f);
    return tesseraAllReduce(send.data(), recv.data(), send.size(), tesseraFloat32, tesseraSum, comm, nullptr);
  }
  // The first wrong element, or "" when every one is right.
  std::string Check(int nranks) const {
    for (size_t i = 0; i < recv.size(); ++i) {
      if (recv[i] != ExpectedSum(nranks, i)) {
        return "element " + std::to_string(i) + " is " + std::to_string(recv[i]) + ", expected " +
               std::to_string(ExpectedSum(nranks, i));
      }
    }
    return "";
  }
};

// --- The worker ---------------------------------------------------------------------------

// What happened to the call that met the fault.
struct Outcome {
  std::string phase = "none";  // "init", "collective" or "none" (nothing failed)
  int iterations = 0;          // allreduces that succeeded before
  tesseraResult_t code = tesseraSuccess;
  tesseraResult_t async_code = tesseraSuccess;
  std::string error;           // tesseraGetLastError of the failed call
  std::string wrong;           // a wrong value, if an allreduce returned one
  double slowest_s = 0;        // the longest allreduce that succeeded
  double t_call = 0, t_error = 0;
};

class Worker {
 public:
  Worker(const Args& args, int rank, int nranks) : a_(args), rank_(rank), nranks_(nranks) {
    const bool victim = std::find(a_.victims.begin(), a_.victims.end(), rank) != a_.victims.end();
    role_ = !victim ? Role::kSurvivor : IsLinkCase(a_.case_name) ? Role::kCut : Role::kVictim;
    for (int r = 0; r < nranks_; ++r) {
      if (std::find(a_.victims.begin(), a_.victims.end(), r) == a_.victims.end()) survivors_.push_back(r);
    }
    timeout_s_ = EnvInt("TESSERA_TIMEOUT_MS", 120000) / 1000.0;
  }

  int Run();

 private:
  void InitComm();
  void CollectiveLoop();
  void FaultInInit();
  void MarkFault() { WriteFileAtomically(Path(a_, "fault." + std::to_string(rank_)), std::to_string(WallNow())); }
  void WaitForSurvivorsDone();
  void Teardown();
  void Recreate();
  void Finish();

  std::vector<std::string> SurvivorFiles(const std::string& prefix, const std::string& suffix) const {
    std::vector<std::string> paths;
    for (int r : survivors_) paths.push_back(Path(a_, prefix + std::to_string(r) + suffix));
    return paths;
  }

  const Args& a_;
  const int rank_, nranks_;
  Role role_;
  std::vector<int> survivors_;
  double timeout_s_;
  tesseraComm_t comm_ = nullptr;
  Counts before_, live_;
  Outcome out_;
  JsonLine extra_;  // teardown and re-creation fields
  std::string notes_;
};

void Worker::FaultInInit() {
  if (a_.case_name != "kill_init" && a_.case_name != "root_init") return;
  if (role_ == Role::kVictim) {
    std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      MarkFault();
      raise(SIGKILL);
    }).detach();
  } else if (rank_ == survivors_.back()) {
    // Keeps the rendezvous open (one rank missing) when the victim dies.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  }
}

void Worker::InitComm() {
  out_.t_call = WallNow();
  tesseraUniqueId id;
  const std::string err = ShareId(a_, "id1", rank_ == 0, &id);
  if (!err.empty()) {
    out_.phase = "init";
    out_.code = tesseraInternalError;
    out_.error = "(driver) " + err;
    out_.t_error = WallNow();
    return;
  }
  FaultInInit();
  out_.t_call = WallNow();
  const tesseraResult_t r = tesseraCommInitRank(&comm_, nranks_, id, rank_);
  if (r != tesseraSuccess) {
    out_.t_error = WallNow();
    out_.phase = "init";
    out_.code = out_.async_code = r;
    out_.error = LastError(nullptr);
    comm_ = nullptr;
  }
  if (role_ == Role::kVictim && (a_.case_name == "kill_init" || a_.case_name == "root_init")) {
    pause();  // init ended before the kill: wait for it
  }
}

// Allreduces until one fails; the first one connects every link, and then the suite may
// inject. The loss case runs a fixed number, each of which must succeed and be right.
void Worker::CollectiveLoop() {
  Collective c(rank_, a_.count);
  const bool loss = a_.case_name == "loss";
  const double limit_s = 2 * timeout_s_ + 15;
  const Clock::time_point start = Clock::now();
  for (;;) {
    if (role_ == Role::kVictim && a_.case_name == "stuck" && out_.iterations > 0 && Exists(Path(a_, "inject"))) {
      MarkFault();
      WaitForSurvivorsDone();  // asleep, outside the library
      return;
    }
    out_.t_call = WallNow();
    const tesseraResult_t r = c.Run(comm_);
    if (r != tesseraSuccess) {
      out_.t_error = WallNow();
      out_.phase = "collective";
      out_.code = r;
      out_.error = LastError(comm_);
      tesseraCommGetAsyncError(comm_, &out_.async_code);
      return;
    }
    out_.slowest_s = std::max(out_.slowest_s, WallNow() - out_.t_call);
    out_.wrong = c.Check(nranks_);
    if (!out_.wrong.empty()) {
      out_.t_error = WallNow();
      out_.phase = "collective";
      out_.wrong = "allreduce " + std::to_string(out_.iterations + 1) + ": " + out_.wrong;
      return;
    }
    if (++out_.iterations == 1) {
      live_ = CountNow();  // what the communicator holds, every link connected
      WriteFileAtomically(Path(a_, "looping." + std::to_string(rank_)), "");
    }
    if (loss && out_.iterations >= a_.iterations) return;
    if (std::chrono::duration<double>(Clock::now() - start).count() > limit_s) {
      notes_ += "no allreduce failed in " + std::to_string(static_cast<int>(limit_s)) + " s; ";
      return;
    }
  }
}

void Worker::WaitForSurvivorsDone() {
  if (!WaitForFiles(SurvivorFiles("rank", ".json"), 3 * timeout_s_ + 30)) {
    notes_ += "the survivors did not finish; ";
  }
}

// Destroys (or aborts) the failed communicator and measures what it left.
void Worker::Teardown() {
  std::string call = "none";
  if (comm_ != nullptr) {
    const bool abort = VictimStaysAlive(a_.case_name);
    call = abort ? "tesseraCommAbort" : "tesseraCommDestroy";
    const tesseraResult_t r = abort ? tesseraCommAbort(comm_) : tesseraCommDestroy(comm_);
    comm_ = nullptr;
    if (r != tesseraSuccess) notes_ += call + " returned " + CodeName(r) + "; ";
  }
  const Counts at_destroy = CountNow();
  // Where something lingers, how long until it is gone (at most 2 s).
  const Clock::time_point start = Clock::now();
  Counts settled = at_destroy;
  while (!(settled == before_) && Clock::now() - start < std::chrono::seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    settled = CountNow();
  }
  extra_.Str("teardown", call)
      .Int("fds_before", before_.fds)
      .Int("threads_before", before_.threads)
      .Int("fds_after", at_destroy.fds)
      .Int("threads_after", at_destroy.threads)
      .Int("fds_settled", settled.fds)
      .Int("threads_settled", settled.threads)
      .Num("settle_s", std::chrono::duration<double>(Clock::now() - start).count());
}

// The survivors alone, re-ranked, with a fresh id: a new communicator and one checked
// allreduce.
void Worker::Recreate() {
  const int new_rank = static_cast<int>(std::find(survivors_.begin(), survivors_.end(), rank_) - survivors_.begin());
  const int n = static_cast<int>(survivors_.size());
  std::string error;
  tesseraUniqueId id;
  error = ShareId(a_, "id2", new_rank == 0, &id);
  tesseraComm_t comm = nullptr;
  if (error.empty()) {
    const tesseraResult_t r = tesseraCommInitRank(&comm, n, id, new_rank);
    if (r != tesseraSuccess) error = "tesseraCommInitRank: " + CodeName(r) + ": " + LastError(nullptr);
  }
  if (error.empty()) {
    Collective c(new_rank, 65537);
    const tesseraResult_t r = c.Run(comm);
    if (r != tesseraSuccess) {
      error = "tesseraAllReduce: " + CodeName(r) + ": " + LastError(comm);
    } else {
      const std::string wrong = c.Check(n);
      if (!wrong.empty()) error = "tesseraAllReduce: wrong result: " + wrong;
    }
  }
  if (comm != nullptr) {
    const tesseraResult_t r = tesseraCommDestroy(comm);
    if (r != tesseraSuccess && error.empty()) error = "tesseraCommDestroy: " + CodeName(r);
  }
  const Counts after = CountNow();
  extra_.Bool("recreate_ok", error.empty())
      .Str("recreate_error", error)
      .Int("recreate_nranks", n)
      .Int("fds_after_recreate", after.fds)
      .Int("threads_after_recreate", after.threads);
}

void Worker::Finish() {
  JsonLine j;
  j.Str("case", a_.case_name)
      .Int("rank", rank_)
      .Int("nranks", nranks_)
      .Str("host", Hostname())
      .Int("pid", getpid())
      .Str("role", RoleName(role_))
      .Str("transport", std::getenv("TESSERA_TRANSPORT") != nullptr ? std::getenv("TESSERA_TRANSPORT") : "")
      .Str("phase", out_.phase)
      .Int("iterations", out_.iterations)
      .Str("code", CodeName(out_.code))
      .Str("async_code", CodeName(out_.async_code))
      .Str("error", out_.error)
      .Str("wrong", out_.wrong)
      .Num("t_call", out_.t_call)
      .Num("t_error", out_.t_error)
      .Num("seconds", out_.phase == "none" ? 0 : out_.t_error - out_.t_call)
      .Num("slowest_s", out_.slowest_s)
      .Int("fds_live", live_.fds)
      .Int("threads_live", live_.threads)
      .Str("notes", notes_);
  std::string line = j.str();
  const std::string more = extra_.str();
  if (more != "{}\n") line = line.substr(0, line.size() - 2) + ", " + more.substr(1);  // merge the objects
  WriteFileAtomically(Path(a_, "rank" + std::to_string(rank_) + ".json"), line);
}

int Worker::Run() {
  WriteFileAtomically(Path(a_, "pid." + std::to_string(rank_)), std::to_string(getpid()) + " " + Hostname());
  before_ = CountNow();
  InitComm();
  if (comm_ != nullptr) {
    if (role_ == Role::kVictim && a_.case_name == "never_calls") {
      WaitForSurvivorsDone();
    } else {
      CollectiveLoop();
    }
  }
  if (role_ == Role::kSurvivor) {
    WriteFileAtomically(Path(a_, "failed." + std::to_string(rank_)), std::to_string(WallNow()));
    // Nobody leaves (and so changes what the others see) before every survivor failed.
    if (!WaitForFiles(SurvivorFiles("failed.", ""), 2 * timeout_s_ + 15)) {
      notes_ += "not every survivor failed; ";
    }
    Teardown();
    Recreate();
  } else {
    // Victims that live on and the cut host's ranks leave after the survivors.
    WaitForSurvivorsDone();
    if (comm_ != nullptr) tesseraCommAbort(comm_);
    comm_ = nullptr;
  }
  Finish();
  return 0;
}

// --- The supervisor ---------------------------------------------------------------------

// Runs the worker; writes its result when it could not. Always 0 for mpirun.
int Supervise(const Args& a, int rank, char** argv) {
  const bool segv_victim = a.case_name == "segv_setup" &&
                           std::find(a.victims.begin(), a.victims.end(), rank) != a.victims.end();
  const double start = WallNow();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fault_rank: fork");
    return 0;
  }
  if (child == 0) {
    if (segv_victim) {
      setenv("LD_PRELOAD", a.shim.c_str(), 1);
      setenv("FAULT_SEGV_AT", a.segv_at.c_str(), 1);
      setenv("FAULT_MARK", Path(a, "fault." + std::to_string(rank)).c_str(), 1);
      // UCX (linked into libtessera.so) patches mmap at start-up, ahead of any preloaded
      // mmap; its hook mode "none" leaves the shim's in place (UCX is not used here).
      if (a.segv_at.rfind("mmap:", 0) == 0) setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 1);
    }
    std::vector<char*> args;
    for (char** p = argv; *p != nullptr; ++p) args.push_back(*p);
    std::string worker_flag = "--worker";
    args.push_back(worker_flag.data());
    args.push_back(nullptr);
    execv("/proc/self/exe", args.data());
    std::perror("fault_rank: execv");
    _exit(127);
  }
  int status = 0;
  bool hung = false;
  for (;;) {
    const pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) break;
    if (w < 0) {
      std::perror("fault_rank: waitpid");
      return 0;
    }
    if (WallNow() - start > a.hard_limit_s) {
      hung = true;
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string result = Path(a, "rank" + std::to_string(rank) + ".json");
  if (Exists(result) && !hung) return 0;
  // The worker wrote nothing: say how it ended.
  std::string how;
  if (hung) {
    how = "hung: killed by the supervisor after " + std::to_string(static_cast<int>(a.hard_limit_s)) + " s";
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    how = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  } else {
    how = "exited with code " + std::to_string(WEXITSTATUS(status)) + " without a result";
  }
  JsonLine j;
  j.Str("case", a.case_name)
      .Int("rank", rank)
      .Str("host", Hostname())
      .Int("pid", child)
      .Str("role", std::find(a.victims.begin(), a.victims.end(), rank) != a.victims.end()
                       ? (IsLinkCase(a.case_name) ? "cut" : "victim")
                       : "survivor")
      .Bool("hung", hung)
      .Int("signal", !hung && WIFSIGNALED(status) ? WTERMSIG(status) : 0)
      .Str("ended", how)
      .Num("t_end", WallNow());
  WriteFileAtomically(result, j.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: fault_rank --case NAME --victims R[,R...]|none --dir DIR [--shim LIB] [--segv-at FN:N] "
                 "[--count N] [--iterations N] [--hard-limit-s S]\n");
    return 2;
  }
  const int rank = EnvInt("OMPI_COMM_WORLD_RANK", -1);
  const int nranks = EnvInt("OMPI_COMM_WORLD_SIZE", -1);
  if (rank < 0 || nranks < 2 || rank >= nranks) {
    std::fprintf(stderr, "fault_rank: run me under mpirun (OMPI_COMM_WORLD_RANK/SIZE)\n");
    return 2;
  }
  if (!a.worker) return Supervise(a, rank, argv);
  return Worker(a, rank, nranks).Run();
}
