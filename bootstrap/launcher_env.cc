// Launcher detection (see launcher_env.h for the rules). Every value read from the
// environment goes through one of the checked parsers below, so a malformed value always
// becomes an InvalidArgument that quotes the variable and the value.
#include "bootstrap/launcher_env.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tessera {
namespace {

// The environment, with "" read as unset.
class Env {
 public:
  explicit Env(const EnvLookup& lookup) : lookup_(lookup) {}
  const char* Get(const char* name) const {
    const char* value = lookup_ ? lookup_(name) : std::getenv(name);
    return (value != nullptr && *value != '\0') ? value : nullptr;
  }
  bool Has(const char* name) const { return Get(name) != nullptr; }

 private:
  const EnvLookup& lookup_;
};

std::string Quote(const std::string& var, const std::string& value) {
  return var + "='" + value + "'";
}

// Parses a decimal integer in [min, max]: digits only (no sign, spaces or suffix).
Status ParseNumber(const std::string& var, const std::string& text, uint64_t min, uint64_t max,
                   uint64_t* out) {
  bool digits_only = !text.empty() && text.size() <= 20;
  for (char c : text) digits_only = digits_only && std::isdigit(static_cast<unsigned char>(c));
  errno = 0;
  unsigned long long value = digits_only ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits_only || errno != 0 || value < min || value > max) {
    return InvalidArgument(Quote(var, text) + " is not an integer in [" + std::to_string(min) +
                           ", " + std::to_string(max) + "]");
  }
  *out = value;
  return Status::Ok();
}

Status ParseInt(const std::string& var, const std::string& text, int min, int* out) {
  uint64_t value = 0;
  TESSERA_RETURN_IF_ERROR(ParseNumber(var, text, static_cast<uint64_t>(min), INT_MAX, &value));
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status ParsePort(const std::string& var, const std::string& text, int* port) {
  uint64_t value = 0;
  if (!ParseNumber(var, text, 1, 65535, &value).ok()) {
    return InvalidArgument(Quote(var, text) + " is not a port in [1, 65535]");
  }
  *port = static_cast<int>(value);
  return Status::Ok();
}

bool IsHostNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

// A host name, an IPv4 address or an IPv6 address (':' and a '%zone' allowed).
bool IsValidHost(const std::string& host) {
  if (host.empty() || host.size() > 255) return false;
  for (char c : host) {
    if (!IsHostNameChar(c) && c != ':' && c != '%') return false;
  }
  return true;
}

// Reads a required non-negative integer variable; `needed_by` names why it is required.
Status ReadRequiredInt(const Env& env, const char* var, int min, const char* needed_by, int* out) {
  const char* text = env.Get(var);
  if (text == nullptr) {
    return InvalidArgument(std::string(var) + " is not set but " + needed_by + " is");
  }
  return ParseInt(var, text, min, out);
}

// Where the local size came from, for error messages.
struct LocalSize {
  bool present = false;
  int value = 1;
  std::string origin;
};

// Sets rank and size from `rank_var` / `size_var`, then the local pair.
Status SetRanks(const Env& env, const char* rank_var, const char* size_var,
                const char* local_rank_var, const LocalSize& local_size, LaunchInfo* info) {
  TESSERA_RETURN_IF_ERROR(ReadRequiredInt(env, rank_var, 0, rank_var, &info->rank));
  TESSERA_RETURN_IF_ERROR(ReadRequiredInt(env, size_var, 1, rank_var, &info->size));
  if (info->rank >= info->size) {
    return InvalidArgument(Quote(rank_var, std::to_string(info->rank)) + " is not below " +
                           Quote(size_var, std::to_string(info->size)));
  }
  const char* local_rank_text = env.Get(local_rank_var);
  if (local_rank_text == nullptr && !local_size.present) return Status::Ok();
  if (local_rank_text == nullptr) {
    return InvalidArgument(std::string(local_rank_var) + " is not set but " + local_size.origin +
                           " is");
  }
  if (!local_size.present) {
    return InvalidArgument(std::string(local_rank_var) + " is set but the local size is not");
  }
  TESSERA_RETURN_IF_ERROR(ParseInt(local_rank_var, local_rank_text, 0, &info->local_rank));
  info->local_size = local_size.value;
  if (info->local_rank >= info->local_size) {
    return InvalidArgument(Quote(local_rank_var, local_rank_text) +
                           " is not below the local size " + std::to_string(info->local_size) +
                           " (" + local_size.origin + ")");
  }
  if (info->local_size > info->size) {
    return InvalidArgument("local size " + std::to_string(info->local_size) + " (" +
                           local_size.origin + ") exceeds " +
                           Quote(size_var, std::to_string(info->size)));
  }
  return Status::Ok();
}

// A local size read directly from one variable.
Status ReadLocalSizeVar(const Env& env, const char* var, LocalSize* out) {
  const char* text = env.Get(var);
  if (text == nullptr) return Status::Ok();
  out->present = true;
  out->origin = Quote(var, text);
  return ParseInt(var, text, 1, &out->value);
}

// Entry `index` of a Slurm tasks-per-node list such as "2(x3),1" (= 2,2,2,1).
Status SlurmTasksOnNode(const std::string& var, const std::string& list,
                        const std::string& node_text, uint64_t index, int* tasks) {
  const Status malformed = InvalidArgument(Quote(var, list) + " is not a tasks-per-node list");
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    std::string count_text = item, repeat_text = "1";
    size_t open = item.find("(x");
    if (open != std::string::npos) {
      if (item.back() != ')') return malformed;
      count_text = item.substr(0, open);
      repeat_text = item.substr(open + 2, item.size() - open - 3);
    }
    uint64_t count = 0, repeat = 0;
    if (!ParseNumber(var, count_text, 1, INT_MAX, &count).ok() ||
        !ParseNumber(var, repeat_text, 1, UINT32_MAX, &repeat).ok()) {
      return malformed;
    }
    if (index < repeat) {
      *tasks = static_cast<int>(count);
      return Status::Ok();
    }
    index -= repeat;
    pos = end + 1;
  }
  return InvalidArgument(Quote("SLURM_NODEID", node_text) + " is beyond the nodes of " +
                         Quote(var, list));
}

// Slurm's local size: this node's entry of the tasks-per-node list, else
// SLURM_NTASKS_PER_NODE.
Status SlurmLocalSize(const Env& env, LocalSize* out) {
  const char* list_var =
      env.Has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* list = env.Get(list_var);
  const char* node_text = env.Get("SLURM_NODEID");
  if (list == nullptr || node_text == nullptr) {
    return ReadLocalSizeVar(env, "SLURM_NTASKS_PER_NODE", out);
  }
  uint64_t node = 0;
  TESSERA_RETURN_IF_ERROR(ParseNumber("SLURM_NODEID", node_text, 0, INT_MAX, &node));
  TESSERA_RETURN_IF_ERROR(SlurmTasksOnNode(list_var, list, node_text, node, &out->value));
  out->present = true;
  out->origin = Quote(list_var, list) + " at " + Quote("SLURM_NODEID", node_text);
  return Status::Ok();
}

// PMIx is usable when the launcher's PMIx server announced itself; its rank must be ours.
Status ReadPmix(const Env& env, const char* rank_var, LaunchInfo* info, bool* available) {
  const char* pmix_rank = env.Get("PMIX_RANK");
  *available = pmix_rank != nullptr && env.Has("PMIX_NAMESPACE");
  if (!*available) return Status::Ok();
  int rank = 0;
  TESSERA_RETURN_IF_ERROR(ParseInt("PMIX_RANK", pmix_rank, 0, &rank));
  if (rank != info->rank) {
    return InvalidArgument(Quote("PMIX_RANK", pmix_rank) + " differs from " +
                           Quote(rank_var, std::to_string(info->rank)));
  }
  return Status::Ok();
}

Status DetectOpenMpi(const Env& env, LaunchInfo* info, bool* pmix) {
  info->launcher = Launcher::kOpenMpi;
  LocalSize local_size;
  TESSERA_RETURN_IF_ERROR(ReadLocalSizeVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE", &local_size));
  TESSERA_RETURN_IF_ERROR(SetRanks(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", local_size, info));
  TESSERA_RETURN_IF_ERROR(ReadPmix(env, "OMPI_COMM_WORLD_RANK", info, pmix));
  const char* job = env.Get("PMIX_NAMESPACE");
  if (job == nullptr) job = env.Get("OMPI_MCA_ess_base_jobid");
  if (job != nullptr) info->job_key = std::string("openmpi:") + job;
  return Status::Ok();
}

Status DetectTorchrun(const Env& env, LaunchInfo* info) {
  info->launcher = Launcher::kTorchrun;
  LocalSize local_size;
  TESSERA_RETURN_IF_ERROR(ReadLocalSizeVar(env, "LOCAL_WORLD_SIZE", &local_size));
  TESSERA_RETURN_IF_ERROR(SetRanks(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", local_size, info));
  const char* run_id = env.Get("TORCHELASTIC_RUN_ID");
  if (run_id != nullptr && std::string(run_id) != "none") {
    info->job_key = std::string("torchrun:") + run_id;
  }
  return Status::Ok();
}

// Slurm's rank and size, then (when nothing else names it) the rendezvous derived from
// the step's first node and the job and step ids.
Status DetectSlurm(const Env& env, LaunchInfo* info, bool* pmix, std::string* derived_host,
                   int* derived_port) {
  info->launcher = Launcher::kSlurm;
  LocalSize local_size;
  TESSERA_RETURN_IF_ERROR(SlurmLocalSize(env, &local_size));
  const char* size_var = env.Has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  TESSERA_RETURN_IF_ERROR(
      SetRanks(env, "SLURM_PROCID", size_var, "SLURM_LOCALID", local_size, info));
  TESSERA_RETURN_IF_ERROR(ReadPmix(env, "SLURM_PROCID", info, pmix));

  uint64_t step = 0, job = 0;
  TESSERA_RETURN_IF_ERROR(
      ParseNumber("SLURM_STEP_ID", env.Get("SLURM_STEP_ID"), 0, UINT32_MAX, &step));
  const char* job_var =
      env.Has("SLURM_JOBID") && !env.Has("SLURM_JOB_ID") ? "SLURM_JOBID" : "SLURM_JOB_ID";
  const char* job_text = env.Get(job_var);
  if (job_text != nullptr) {
    TESSERA_RETURN_IF_ERROR(ParseNumber(job_var, job_text, 0, UINT32_MAX, &job));
    info->job_key = "slurm:" + std::to_string(job) + "." + std::to_string(step);
  }

  const char* list_var =
      env.Has("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const char* nodelist = env.Get(list_var);
  if (nodelist == nullptr) return Status::Ok();
  Status first = FirstSlurmHost(nodelist, derived_host);
  if (!first.ok()) return first.Annotate(list_var);
  if (job_text == nullptr) {
    return InvalidArgument(std::string(job_var) + " is not set but " + list_var +
                           " is (the rendezvous port derives from the job id)");
  }
  *derived_port =
      kSlurmPortBase + static_cast<int>(((job % kSlurmPortSpan) * 97 + step) % kSlurmPortSpan);
  return Status::Ok();
}

// MASTER_ADDR / MASTER_PORT, both or neither.
Status ReadMaster(const Env& env, std::string* host, int* port) {
  const char* addr = env.Get("MASTER_ADDR");
  const char* port_text = env.Get("MASTER_PORT");
  if (addr == nullptr && port_text == nullptr) return Status::Ok();
  if (addr == nullptr) return InvalidArgument("MASTER_PORT is set but MASTER_ADDR is not");
  if (port_text == nullptr) return InvalidArgument("MASTER_ADDR is set but MASTER_PORT is not");
  std::string text = addr;
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  if (!IsValidHost(text)) return InvalidArgument(Quote("MASTER_ADDR", addr) + " is not a host");
  TESSERA_RETURN_IF_ERROR(ParsePort("MASTER_PORT", port_text, port));
  *host = text;
  return Status::Ok();
}

}  // namespace

const char* LauncherName(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone: return "none";
    case Launcher::kOpenMpi: return "openmpi";
    case Launcher::kSlurm: return "slurm";
    case Launcher::kTorchrun: return "torchrun";
  }
  return "unknown";
}

Status ParseHostPort(const std::string& what, const std::string& text, std::string* host,
                     int* port) {
  const Status bad = InvalidArgument(Quote(what, text) + " is not host:port or [ipv6]:port");
  std::string h;
  size_t colon;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad;
    h = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos) return bad;
    h = text.substr(0, colon);
    if (h.find(':') != std::string::npos) return bad;  // bare IPv6 needs brackets
  }
  if (!IsValidHost(h)) return bad;
  int p = 0;
  if (!ParsePort(what, text.substr(colon + 1), &p).ok()) return bad;
  *host = h;
  *port = p;
  return Status::Ok();
}

Status FirstSlurmHost(const std::string& nodelist, std::string* first) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("malformed Slurm hostlist '" + nodelist + "': " + why);
  };
  // Validate the whole list, remembering the first entry's expansion.
  std::string result, range;
  bool in_bracket = false, first_entry = true, entry_empty = true, first_range_seen = false;
  for (size_t i = 0; i <= nodelist.size(); ++i) {
    char c = i < nodelist.size() ? nodelist[i] : '\0';
    if (in_bracket) {
      if (c == '[') return bad("nested '['");
      if (c == '\0') return bad("'[' without ']'");
      if (c != ',' && c != ']') {
        range += c;
        continue;
      }
      // One range "lo" or "lo-hi" ends here.
      size_t dash = range.find('-');
      std::string lo = range.substr(0, dash);
      std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      uint64_t lo_value = 0, hi_value = 0;
      if (!ParseNumber("range", lo, 0, UINT32_MAX, &lo_value).ok() ||
          !ParseNumber("range", hi, 0, UINT32_MAX, &hi_value).ok()) {
        return bad("range '" + range + "' is not n or n-m");
      }
      if (lo_value > hi_value) return bad("range '" + range + "' runs backwards");
      if (first_entry && !first_range_seen) result += lo;
      first_range_seen = true;
      range.clear();
      if (c == ']') in_bracket = false;
      continue;
    }
    if (c == '[') {
      if (entry_empty) return bad("'[' without a host prefix");
      in_bracket = true;
      first_range_seen = false;
    } else if (c == ']') {
      return bad("']' without '['");
    } else if (c == ',' || c == '\0') {
      if (entry_empty) return bad("empty host entry");
      first_entry = false;
      entry_empty = true;
    } else if (IsHostNameChar(c)) {
      if (first_entry) result += c;
      entry_empty = false;
    } else {
      return bad(std::string("character '") + c + "' cannot be in a host name");
    }
  }
  *first = result;
  return Status::Ok();
}

Status DetectLaunch(const EnvLookup& lookup, const std::string& bootstrap_addr, LaunchInfo* out) {
  Env env(lookup);
  LaunchInfo info;
  bool pmix = false;
  std::string slurm_host;
  int slurm_port = 0;
  if (env.Has("OMPI_COMM_WORLD_RANK")) {
    TESSERA_RETURN_IF_ERROR(DetectOpenMpi(env, &info, &pmix));
  } else if (env.Has("RANK") && env.Has("TORCHELASTIC_RUN_ID")) {
    TESSERA_RETURN_IF_ERROR(DetectTorchrun(env, &info));
  } else if (env.Has("SLURM_PROCID") && env.Has("SLURM_STEP_ID")) {
    TESSERA_RETURN_IF_ERROR(DetectSlurm(env, &info, &pmix, &slurm_host, &slurm_port));
  } else if (env.Has("RANK")) {
    TESSERA_RETURN_IF_ERROR(DetectTorchrun(env, &info));
  }

  std::string master_host;
  int master_port = 0;
  TESSERA_RETURN_IF_ERROR(ReadMaster(env, &master_host, &master_port));
  if (info.launcher == Launcher::kTorchrun && info.job_key.empty() && !master_host.empty()) {
    info.job_key = "torchrun:" + master_host + ":" + std::to_string(master_port);
  }

  if (!bootstrap_addr.empty()) {
    TESSERA_RETURN_IF_ERROR(
        ParseHostPort("TESSERA_BOOTSTRAP_ADDR", bootstrap_addr, &info.root_host, &info.root_port));
  } else if (!master_host.empty()) {
    info.root_host = master_host;
    info.root_port = master_port;
  } else if (pmix) {
    info.use_pmix = true;
  } else if (!slurm_host.empty()) {
    info.root_host = slurm_host;
    info.root_port = slurm_port;
  }
  *out = info;
  return Status::Ok();
}

}  // namespace tessera
