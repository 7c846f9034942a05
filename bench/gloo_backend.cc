// Gloo behind the benchmark's CollectiveBackend (see gloo_backend.h). Gloo reports
// errors by throwing; every call into it is wrapped here and turned into an Outcome.
#include "bench/gloo_backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "gloo/allreduce.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/types.h"

namespace tessera_bench {
namespace {

struct AlgorithmName {
  GlooAlgorithm algorithm;
  const char* name;
};
constexpr AlgorithmName kAlgorithmNames[] = {
    {GlooAlgorithm::kRing, "ring"},
    {GlooAlgorithm::kRingChunked, "ring_chunked"},
    {GlooAlgorithm::kHalvingDoubling, "halving_doubling"},
    {GlooAlgorithm::kBcube, "bcube"},
    {GlooAlgorithm::kFunctionRing, "function_ring"},
};

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// A decimal integer in [min, max], nothing else.
bool ParseInt(const std::string& text, long min, long max, long* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long parsed = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || parsed < min || parsed > max) return false;
  *value = parsed;
  return true;
}

// Rank and size from the first launcher whose variables are set; one rank if none.
bool LauncherRankAndSize(int* rank, int* size, std::string* error) {
  static const char* const kPairs[][2] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
      {"RANK", "WORLD_SIZE"},
  };
  for (const auto& pair : kPairs) {
    const char* rank_text = Env(pair[0]);
    const char* size_text = Env(pair[1]);
    if (rank_text == nullptr && size_text == nullptr) continue;
    long r = -1;
    long s = 0;
    if (rank_text == nullptr || size_text == nullptr || !ParseInt(size_text, 1, INT_MAX, &s) ||
        !ParseInt(rank_text, 0, s - 1, &r)) {
      *error = std::string("bad launcher environment: ") + pair[0] + "='" +
               (rank_text ? rank_text : "") + "' " + pair[1] + "='" +
               (size_text ? size_text : "") + "' (want 0 <= rank < size)";
      return false;
    }
    *rank = static_cast<int>(r);
    *size = static_cast<int>(s);
    return true;
  }
  *rank = 0;
  *size = 1;
  return true;
}

// The job's identity as the launcher names it, reduced to [A-Za-z0-9._-]; "" if unknown.
std::string LauncherJobId() {
  std::string id;
  if (const char* jobid = Env("OMPI_MCA_ess_base_jobid")) {
    id = jobid;
  } else if (const char* ns = Env("PMIX_NAMESPACE")) {
    id = ns;
  } else if (const char* slurm_job = Env("SLURM_JOB_ID")) {
    const char* step = Env("SLURM_STEP_ID");
    id = std::string(slurm_job) + "." + (step ? step : "0");
  } else if (const char* run = Env("TORCHELASTIC_RUN_ID")) {
    id = run;
  }
  for (char& c : id) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '-';
    if (!keep) c = '_';
  }
  return id;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown-host";
  return host;
}

// The smallest b >= 2 of which nranks is a power (nranks itself at worst).
int BcubeBase(int nranks) {
  for (int base = 2; base < nranks; ++base) {
    long power = base;
    while (power < nranks) power *= base;
    if (power == nranks) return base;
  }
  return nranks < 2 ? 2 : nranks;
}

std::string AddressText(const gloo::transport::tcp::attr& attr) {
  char text[INET6_ADDRSTRLEN] = {};
  const sockaddr_storage& address = attr.ai_addr;
  const void* raw = address.ss_family == AF_INET6
                        ? static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr)
                        : static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in*>(&address)->sin_addr);
  if (inet_ntop(address.ss_family, raw, text, sizeof text) == nullptr) return "?";
  return text;
}

// Calls f(TypeTag<T>{}) with T the C++ type Gloo reduces for `type`. False for bfloat16,
// which Gloo 0.5.0 lacks.
template <typename T>
struct TypeTag {
  using type = T;
};
template <typename F>
bool WithGlooType(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8: f(TypeTag<int8_t>{}); return true;
    case DataType::kUint8: f(TypeTag<uint8_t>{}); return true;
    case DataType::kInt32: f(TypeTag<int32_t>{}); return true;
    case DataType::kUint32: f(TypeTag<uint32_t>{}); return true;
    case DataType::kInt64: f(TypeTag<int64_t>{}); return true;
    case DataType::kUint64: f(TypeTag<uint64_t>{}); return true;
    case DataType::kFloat16: f(TypeTag<gloo::float16>{}); return true;
    case DataType::kFloat32: f(TypeTag<float>{}); return true;
    case DataType::kFloat64: f(TypeTag<double>{}); return true;
    case DataType::kBfloat16: return false;
  }
  return false;
}

// The class algorithms' reduction for `op` (not avg, rejected earlier).
template <typename T>
const gloo::ReductionFunction<T>* ClassReduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMax: return gloo::ReductionFunction<T>::max;
    case ReduceOp::kMin: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

// The function API's reduction for `op`: out = a op b over n elements.
using FunctionReduction = void (*)(void*, const void*, const void*, size_t);
template <typename T>
FunctionReduction FunctionReductionFor(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return static_cast<FunctionReduction>(&gloo::product<T>);
    case ReduceOp::kMax: return static_cast<FunctionReduction>(&gloo::max<T>);
    case ReduceOp::kMin: return static_cast<FunctionReduction>(&gloo::min<T>);
    default: return static_cast<FunctionReduction>(&gloo::sum<T>);
  }
}

template <typename T>
std::unique_ptr<gloo::Algorithm> MakeClassAlgorithm(
    GlooAlgorithm algorithm, const std::shared_ptr<gloo::rendezvous::Context>& context,
    void* buffer, int count, ReduceOp op) {
  std::shared_ptr<gloo::Context> base_context = context;
  std::vector<T*> pointers = {static_cast<T*>(buffer)};
  const gloo::ReductionFunction<T>* reduction = ClassReduction<T>(op);
  switch (algorithm) {
    case GlooAlgorithm::kRing:
      return std::make_unique<gloo::AllreduceRing<T>>(base_context, pointers, count, reduction);
    case GlooAlgorithm::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(base_context, pointers, count,
                                                             reduction);
    case GlooAlgorithm::kHalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(base_context, pointers, count,
                                                                 reduction);
    case GlooAlgorithm::kBcube:
      return std::make_unique<gloo::AllreduceBcube<T>>(base_context, pointers, count, reduction);
    case GlooAlgorithm::kFunctionRing:
      break;
  }
  return nullptr;
}

// gloo::allreduce over `count` elements of T: sendbuff -> recvbuff, or in place.
template <typename T>
void RunFunctionAllReduce(const std::shared_ptr<gloo::Context>& context, const void* sendbuff,
                          void* recvbuff, size_t count, FunctionReduction reduction, uint32_t tag,
                          std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions options(context);
  // Gloo only reads its inputs, but takes them as T*.
  if (sendbuff != recvbuff) options.setInput(static_cast<T*>(const_cast<void*>(sendbuff)), count);
  options.setOutput(static_cast<T*>(recvbuff), count);
  options.setReduceFunction(reduction);
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allreduce(options);
}

// Removes the files at `paths`; returns how many could not be removed.
int RemoveFiles(const std::vector<std::string>& paths) {
  int failed = 0;
  for (const std::string& path : paths) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) ++failed;
  }
  return failed;
}

// Value of a flag given as "-A x", "-Ax", "--name x" or "--name=x" at argv[*i].
// Returns 0 if argv[*i] is not this flag, 1 if it is (value in *value, *i advanced past
// it), -1 if it is but the value is missing.
int MatchFlag(int argc, char** argv, int* i, char short_name, const std::string& long_name,
              std::string* value) {
  const std::string arg = argv[*i];
  const std::string short_flag = short_name != 0 ? std::string("-") + short_name : "";
  const std::string long_flag = "--" + long_name;
  if (arg == long_flag || (!short_flag.empty() && arg == short_flag)) {
    if (*i + 1 >= argc) return -1;
    *value = argv[*i + 1];
    *i += 2;
    return 1;
  }
  if (arg.compare(0, long_flag.size() + 1, long_flag + "=") == 0) {
    *value = arg.substr(long_flag.size() + 1);
    *i += 1;
    return 1;
  }
  if (!short_flag.empty() && arg.size() > 2 && arg.compare(0, 2, short_flag) == 0) {
    *value = arg.substr(2);
    *i += 1;
    return 1;
  }
  return 0;
}

std::string AlgorithmList() {
  std::string list;
  for (const AlgorithmName& entry : kAlgorithmNames) {
    if (!list.empty()) list += "|";
    list += entry.name;
  }
  return list;
}

}  // namespace

const char* GlooAlgorithmName(GlooAlgorithm algorithm) {
  for (const AlgorithmName& entry : kAlgorithmNames) {
    if (entry.algorithm == algorithm) return entry.name;
  }
  return "unknown";
}

bool ParseGlooAlgorithm(const std::string& name, GlooAlgorithm* algorithm) {
  for (const AlgorithmName& entry : kAlgorithmNames) {
    if (name == entry.name) {
      *algorithm = entry.algorithm;
      return true;
    }
  }
  return false;
}

std::string ExtractGlooFlags(int argc, char** argv, GlooOptions* options,
                             std::vector<char*>* rest) {
  rest->clear();
  if (argc > 0) rest->push_back(argv[0]);
  for (int i = 1; i < argc;) {
    std::string value;
    int found = MatchFlag(argc, argv, &i, 'A', "algorithm", &value);
    if (found == 1) {
      if (!ParseGlooAlgorithm(value, &options->algorithm)) {
        return "-A: unknown algorithm '" + value + "' (" + AlgorithmList() + ")";
      }
      continue;
    }
    if (found == 0 && (found = MatchFlag(argc, argv, &i, 0, "store_dir", &value)) == 1) {
      if (value.empty()) return "--store_dir: empty directory name";
      options->store_dir = value;
      continue;
    }
    if (found == 0 && (found = MatchFlag(argc, argv, &i, 0, "timeout_s", &value)) == 1) {
      long seconds = 0;
      if (!ParseInt(value, 1, 24 * 3600, &seconds)) {
        return "--timeout_s: bad timeout '" + value + "' (want 1 .. 86400 seconds)";
      }
      options->timeout = std::chrono::seconds(seconds);
      continue;
    }
    if (found == -1) return std::string("flag '") + argv[i] + "' needs a value";
    rest->push_back(argv[i]);
    ++i;
  }
  rest->push_back(nullptr);
  return "";
}

std::string GlooUsage() {
  return "Gloo flags:\n"
         "  [-A,--algorithm <" +
         AlgorithmList() +
         ">]  default ring_chunked\n"
         "  [--store_dir <dir>]  FileStore rendezvous directory, shared by every rank;\n"
         "                       default $GLOO_PERF_STORE_DIR, else /tmp/gloo_perf_store.<job>\n"
         "  [--timeout_s <seconds>]  bound on every Gloo call, default 60\n"
         "  GLOO_SOCKET_IFNAME=<interface>  TCP interface (default: loopback, one host only)\n";
}

GlooBackend::GlooBackend(const GlooOptions& options, int rank, int size)
    : options_(options), rank_(rank), size_(size) {}

std::unique_ptr<GlooBackend> GlooBackend::Create(const GlooOptions& options,
                                                 std::string* error) {
  int rank = 0;
  int size = 1;
  if (!LauncherRankAndSize(&rank, &size, error)) return nullptr;
  std::unique_ptr<GlooBackend> backend(new GlooBackend(options, rank, size));
  Outcome outcome = backend->Connect();
  if (!outcome.ok()) {
    *error = "Gloo rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " +
             outcome.message();
    return nullptr;
  }
  return backend;
}

Outcome GlooBackend::Connect() {
  Outcome outcome = ChooseStoreDir();
  if (!outcome.ok()) return outcome;
  if (mkdir(store_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Outcome::Failed("cannot create the store directory " + store_dir_ + ": " +
                           std::strerror(errno));
  }
  std::unique_ptr<gloo::rendezvous::FileStore> store;
  outcome = Rendezvous(&store);
  // Each rank removes the keys it wrote. After a success every rank is past a barrier
  // that follows the last read of a key; after a failure the job is over anyway.
  if (outcome.ok()) {
    outcome = Barrier().Annotate("barrier before removing the store's keys");
  }
  int left = store ? RemoveFiles(store->getAllKeyFilePaths()) : 0;
  if (left != 0) {
    std::fprintf(stderr, "gloo backend: rank %d: could not remove %d key file(s) in %s\n",
                 rank_, left, store_dir_.c_str());
  }
  if (store_dir_is_default_) {
    // rmdir fails harmlessly while other ranks' keys are still there: after a success,
    // rank 0 waits for every rank's removal; after a failure, whoever is last succeeds.
    if (outcome.ok()) {
      outcome = Barrier().Annotate("barrier before removing " + store_dir_);
      if (outcome.ok() && rank_ == 0) rmdir(store_dir_.c_str());
    } else {
      rmdir(store_dir_.c_str());
    }
  }
  return outcome;
}

Outcome GlooBackend::ChooseStoreDir() {
  if (!options_.store_dir.empty()) {
    store_dir_ = options_.store_dir;
    return Outcome::Ok();
  }
  if (const char* dir = Env("GLOO_PERF_STORE_DIR")) {
    store_dir_ = dir;
    return Outcome::Ok();
  }
  std::string job = LauncherJobId();
  if (job.empty()) {
    if (size_ > 1) {
      return Outcome::Failed(
          "no job id in the environment (OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, "
          "SLURM_JOB_ID, TORCHELASTIC_RUN_ID) to name the store directory after: "
          "give --store_dir or GLOO_PERF_STORE_DIR");
    }
    job = "pid" + std::to_string(getpid());
  }
  store_dir_ = "/tmp/gloo_perf_store." + job;
  store_dir_is_default_ = true;
  return Outcome::Ok();
}

Outcome GlooBackend::Rendezvous(std::unique_ptr<gloo::rendezvous::FileStore>* store_out) {
  const char* interface = Env("GLOO_SOCKET_IFNAME");
  std::string step = "opening the file store in " + store_dir_;
  try {
    *store_out = std::make_unique<gloo::rendezvous::FileStore>(store_dir_);
    gloo::rendezvous::FileStore& store = **store_out;

    // Every rank's host name, so that loopback is refused across hosts.
    step = "exchanging host names through the file store in " + store_dir_;
    const std::string host = HostName();
    const std::string key_prefix = "tessera_bench_host_";
    store.set(key_prefix + std::to_string(rank_), std::vector<char>(host.begin(), host.end()));
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(key_prefix + std::to_string(r));
    store.wait(keys, options_.timeout);
    std::string other_host;
    for (const std::string& key : keys) {
      std::vector<char> name = store.get(key);
      std::string peer_host(name.begin(), name.end());
      if (peer_host != host) other_host = peer_host;
    }
    if (interface == nullptr && !other_host.empty()) {
      return Outcome::Failed("ranks run on several hosts (" + host + ", " + other_host +
                             ", ...) and GLOO_SOCKET_IFNAME is not set: loopback cannot "
                             "connect them; set it to the interface that links the hosts");
    }

    step = interface != nullptr
               ? std::string("creating the TCP device on GLOO_SOCKET_IFNAME=") + interface
               : "creating the TCP device on 127.0.0.1";
    gloo::transport::tcp::attr attr;
    if (interface != nullptr) {
      attr.iface = interface;
    } else {
      attr.hostname = "127.0.0.1";
    }
    gloo::transport::tcp::attr resolved = gloo::transport::tcp::CreateDeviceAttr(attr);
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);

    step = "connecting every pair (file store in " + store_dir_ + ")";
    const int base = options_.algorithm == GlooAlgorithm::kBcube ? BcubeBase(size_) : 2;
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_, base);
    context_->setTimeout(options_.timeout);
    context_->connectFullMesh(store, device);

    description_ = "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                   std::to_string(GLOO_VERSION_MINOR) + "." +
                   std::to_string(GLOO_VERSION_PATCH) + " " +
                   GlooAlgorithmName(options_.algorithm);
    if (options_.algorithm == GlooAlgorithm::kBcube) {
      description_ += " (base " + std::to_string(base) + ")";
    }
    description_ += ", tcp " + AddressText(resolved);
    if (interface != nullptr) description_ += std::string(" (") + interface + ")";
  } catch (const std::exception& e) {
    return Outcome::Failed(step + ": " + e.what());
  }
  return Outcome::Ok();
}

GlooBackend::~GlooBackend() {
  Outcome released = ReleaseAlgorithm();
  if (!released.ok()) {
    std::fprintf(stderr, "gloo backend: rank %d: %s\n", rank_, released.message().c_str());
  }
  try {
    context_.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo backend: rank %d: closing: %s\n", rank_, e.what());
  }
}

Outcome GlooBackend::ReleaseAlgorithm() {
  try {
    cached_.algorithm.reset();
  } catch (const std::exception& e) {
    return Outcome::Failed(std::string("releasing a Gloo algorithm instance: ") + e.what());
  }
  return Outcome::Ok();
}

void GlooBackend::RunClassAlgorithm(void* buffer, size_t count, DataType type, ReduceOp op) {
  const bool cached = cached_.algorithm != nullptr && cached_.buffer == buffer &&
                      cached_.count == count && cached_.type == type && cached_.op == op;
  if (!cached) {
    // The old instance goes first: ring_chunked's holds two inboxes of the buffer's size.
    cached_.algorithm.reset();
    WithGlooType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      cached_.algorithm = MakeClassAlgorithm<T>(options_.algorithm, context_, buffer,
                                                static_cast<int>(count), op);
    });
    cached_.buffer = buffer;
    cached_.count = count;
    cached_.type = type;
    cached_.op = op;
  }
  cached_.algorithm->run();
}

Outcome GlooBackend::AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                               ReduceOp op) {
  const std::string call = std::string("Gloo ") + GlooAlgorithmName(options_.algorithm) +
                           " allreduce";
  if (op == ReduceOp::kAvg) {
    return Outcome::Rejected(call + ": Gloo has no avg (sum, prod, max, min)");
  }
  if (type == DataType::kBfloat16) {
    return Outcome::Rejected(call + ": Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                             std::to_string(GLOO_VERSION_MINOR) + " has no bfloat16");
  }
  const bool function_api = options_.algorithm == GlooAlgorithm::kFunctionRing;
  if (!function_api && count > static_cast<size_t>(INT_MAX) / ElementSize(type)) {
    return Outcome::Rejected(call + ": " + std::to_string(count) + " elements of " +
                             DataTypeName(type) +
                             " exceed INT_MAX bytes (Gloo's class algorithms count in int)");
  }
  try {
    if (function_api) {
      FunctionReduction reduction = nullptr;
      WithGlooType(type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        reduction = FunctionReductionFor<T>(op);
        RunFunctionAllReduce<T>(context_, sendbuff, recvbuff, count, reduction, NextTag(),
                                options_.timeout);
      });
    } else {
      if (sendbuff != recvbuff) std::memcpy(recvbuff, sendbuff, count * ElementSize(type));
      RunClassAlgorithm(recvbuff, count, type, op);
    }
  } catch (const std::exception& e) {
    return Outcome::Failed(call + ": " + e.what());
  }
  return Outcome::Ok();
}

Outcome GlooBackend::Barrier() {
  try {
    gloo::BarrierOptions options(context_);
    options.setTag(NextTag());
    options.setTimeout(options_.timeout);
    gloo::barrier(options);
  } catch (const std::exception& e) {
    return Outcome::Failed(std::string("gloo::barrier: ") + e.what());
  }
  return Outcome::Ok();
}

Outcome GlooBackend::MaxAcrossRanks(double* values, size_t count) {
  try {
    RunFunctionAllReduce<double>(context_, values, values, count,
                                 FunctionReductionFor<double>(ReduceOp::kMax), NextTag(),
                                 options_.timeout);
  } catch (const std::exception& e) {
    return Outcome::Failed(std::string("gloo::allreduce (max of doubles): ") + e.what());
  }
  return Outcome::Ok();
}

Outcome GlooBackend::SumAcrossRanks(int64_t* values, size_t count) {
  try {
    RunFunctionAllReduce<int64_t>(context_, values, values, count,
                                  FunctionReductionFor<int64_t>(ReduceOp::kSum), NextTag(),
                                  options_.timeout);
  } catch (const std::exception& e) {
    return Outcome::Failed(std::string("gloo::allreduce (sum of int64): ") + e.what());
  }
  return Outcome::Ok();
}

void GlooBackend::AbortJob() {
  try {
    if (context_) context_->closeConnections();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo backend: rank %d: closing connections: %s\n", rank_, e.what());
  }
}

}  // namespace tessera_bench
