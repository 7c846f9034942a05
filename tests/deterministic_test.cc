// Deterministic mode (TESSERA_DETERMINISTIC=1, docs/semantics.md#deterministic-mode): the
// same inputs, reduced under many configurations, give memcmp-identical results, within
// the stated bound of a binary128 reference.
//
// The inputs are 8 contributions of kCount elements per float type, in five regions:
// uniform values, a wide dynamic range, heavy cancellation (+B and -B plus small
// noise), subnormals, and specials (NaN with payloads, infinities of one or both signs,
// signed zeros). Every configuration runs, on each rank:
//  - allreduce sum and avg with tesseraAllReduceParts, rank r holding contributions
//    c = r, r + p, r + 2p... (so every rank count sums the same 8), out of place and in
//    place, and a small count;
//  - tesseraAllReduce (which may run as an allgather or an exchange), reduce (root p - 1) and
//    reduce-scatter, sum and avg, out of place and in place, ranks 0 and 1 holding
//    contributions 0 and 1 and the others -0.0 (which changes nothing, so every rank
//    count from 2 up sums the same two);
//  - int32 sum and float32 max/min allreduces and an int64 reduce-scatter: exact in any
//    order (max/min also over NaN payloads and signed zeros, made canonical in this mode).
// Each rank writes its results to a file as named sections; the test compares them with
// the reference configuration (1 host x 4 ranks, TESSERA_ALGO=auto): sums across every
// configuration, averages across configurations of the same rank count, and the exact
// sections also against the default mode. Configurations: rank counts 1, 2, 3, 4, 5, 8;
// every forced allreduce algorithm (and the reduce-scatter rows they force) on 1 x 4 and
// on 2 x 2 and 4 x 2 hosts emulated with TESSERA_TOPO_FILE; every deterministic allreduce
// plan; shm, tcp and ucx; small segment, slot and chunk sizes; the mode set by the
// communicator's config.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

constexpr int kContributions = 8;
constexpr size_t kCount = 4200;  // divides by 1..8 (reduce-scatter) and spans five grid blocks
constexpr size_t kSmall = 7;
constexpr size_t kBlock = 1024;  // the grid's block (collectives/fixed_point.h)
constexpr int kHeadroom = 12;
const tesseraDataType_t kFloatTypes[] = {tesseraFloat16, tesseraBfloat16, tesseraFloat32, tesseraFloat64};

// ---- Inputs --------------------------------------------------------------------------

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Hash(int c, size_t i, int salt) { return Mix(Mix(Mix(static_cast<uint64_t>(c)) ^ i) ^ salt); }

double Uniform(int c, size_t i, int salt) {  // [-1, 1)
  return static_cast<double>(Hash(c, i, salt) >> 11) * 0x1p-52 - 1.0;
}

// The largest binary exponent the wide region uses, and the subnormal quantum, per type.
int WideRange(tesseraDataType_t type) {
  return type == tesseraFloat16 ? 10 : type == tesseraFloat64 ? 600 : 100;
}
int MinExponent(tesseraDataType_t type) {  // the smallest subnormal is 2^MinExponent
  switch (type) {
    case tesseraFloat16: return -24;
    case tesseraBfloat16: return -133;
    case tesseraFloat32: return -149;
    default: return -1074;
  }
}

void StoreBits(tesseraDataType_t type, uint64_t bits, void* dst) {
  std::memcpy(dst, &bits, TypeSize(type));  // little-endian: the low bytes
}

// Raw NaNs with payloads, and the sign bit, of each type.
uint64_t NanBits(tesseraDataType_t type, int which) {
  switch (type) {
    case tesseraFloat16: return which ? 0xfd01 : 0x7e55;
    case tesseraBfloat16: return which ? 0xff81 : 0x7fa5;
    case tesseraFloat32: return which ? 0xffc12345u : 0x7fa00001u;
    default: return which ? 0xfff8000000012345ull : 0x7ff4000000000001ull;
  }
}

// Contribution c's element i, written at dst.
void Contribution(tesseraDataType_t type, int c, size_t i, void* dst) {
  const size_t region = i * 5 / kCount;
  double v = Uniform(c, i, 1);
  if (region == 1) {
    const int e = static_cast<int>(Hash(c, i, 2) % (2 * WideRange(type) + 1)) - WideRange(type);
    v = std::ldexp(1.0 + std::fabs(Uniform(c, i, 3)), e) * (v < 0 ? -1 : 1);
  } else if (region == 2) {
    const double big = std::ldexp(1.0 + (i % 7) / 8.0, type == tesseraFloat16 ? 8 : 20);
    v = (c % 2 == 0 ? big : -big) + v * (type == tesseraFloat16 ? 0.5 : 1e-3);
  } else if (region == 3) {
    v = std::ldexp(std::floor(Uniform(c, i, 4) * 1024), MinExponent(type) + static_cast<int>(i % 5));
    if (i % 17 == 0) v = c % 2 ? -0.0 : 0.0;
  } else if (region == 4) {
    switch (i % 13) {
      case 0:  // one NaN, from contribution 0 or 1
        if (c == static_cast<int>(i / 13) % 2) return StoreBits(type, NanBits(type, c), dst);
        break;
      case 1: v = c == 1 ? INFINITY : v; break;
      case 2: v = c < 2 ? (c == 0 ? -INFINITY : INFINITY) : v; break;  // both infinities: NaN
      case 3: v = -0.0; break;
      case 4: v = c < 2 ? -INFINITY : v; break;
      case 5:  // two NaN payloads
        if (c < 2) return StoreBits(type, NanBits(type, c), dst);
        break;
      case 6: v = c == 0 ? 0.0 : -0.0; break;
      default: break;
    }
  }
  EncodeValue(type, v, dst);
}

std::vector<unsigned char> ContributionVector(tesseraDataType_t type, int c, size_t count) {
  std::vector<unsigned char> v(count * TypeSize(type));
  for (size_t i = 0; i < count; ++i) Contribution(type, c, i, &v[i * TypeSize(type)]);
  return v;
}

// What a rank of a reduce or reduce-scatter contributes: 0 and 1 theirs, others -0.0.
std::vector<unsigned char> RootedInput(tesseraDataType_t type, int rank, size_t count) {
  if (rank < 2) return ContributionVector(type, rank, count);
  std::vector<unsigned char> v(count * TypeSize(type));
  for (size_t i = 0; i < count; ++i) EncodeValue(type, -0.0, &v[i * TypeSize(type)]);
  return v;
}

int32_t IntContribution(int c, size_t i) { return static_cast<int32_t>(Hash(c, i, 9) % 2000001) - 1000000; }

// ---- Sections: what a rank writes, and what the test compares -------------------------

enum class Scope {
  kEveryRankCount,   // sums over the same contributions: the same bits for every p
  kFromTwoRanks,     // reduce / reduce-scatter sums: every p >= 2
  kSameRankCount,    // averages: within a rank count
  kEveryMode,        // exact in any order: also against the default mode
  kDeterministic,    // float max and min over NaNs and signed zeros: this mode only
};
enum class Join { kSame, kRoot, kConcat };  // allreduce / reduce's root / reduce-scatter blocks

struct Section {
  Scope scope;
  Join join;
  std::vector<unsigned char> bytes;
};
using Sections = std::map<std::string, Section>;

// A rank's sections, written as "name\nscope join size\n<bytes>".
class SectionWriter {
 public:
  void Add(const std::string& name, Scope scope, Join join, const void* data, size_t bytes) {
    out_ << name << "\n" << static_cast<int>(scope) << " " << static_cast<int>(join) << " " << bytes << "\n";
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  }
  bool Save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    f << out_.str();
    return static_cast<bool>(f);
  }

 private:
  std::ostringstream out_;
};

bool LoadSections(const std::string& path, std::vector<std::pair<std::string, Section>>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string name;
  while (std::getline(f, name)) {
    int scope = 0, join = 0;
    size_t bytes = 0;
    f >> scope >> join >> bytes;
    f.get();
    Section s{static_cast<Scope>(scope), static_cast<Join>(join), std::vector<unsigned char>(bytes)};
    f.read(reinterpret_cast<char*>(s.bytes.data()), static_cast<std::streamsize>(bytes));
    if (!f) return false;
    out->push_back({name, std::move(s)});
  }
  return true;
}

// ---- The calls of one rank -------------------------------------------------------------

struct RankRun {
  int rank, p;
  tesseraComm_t comm;
  RankChecks* checks;
  SectionWriter* out;

  bool Ok(tesseraResult_t r, const std::string& what) {
    return checks->ExpectCode(r, tesseraSuccess, what + " on rank " + std::to_string(rank));
  }
};

// allreduce of every contribution as parts: out of place, in place (recvbuff = part 0).
void AllReduceParts(RankRun& run, tesseraDataType_t type, tesseraRedOp_t op, size_t count, const std::string& name,
                    Scope scope) {
  std::vector<std::vector<unsigned char>> parts;
  for (int c = run.rank; c < kContributions; c += run.p) parts.push_back(ContributionVector(type, c, count));
  std::vector<const void*> pointers;
  for (auto& part : parts) pointers.push_back(part.data());
  std::vector<unsigned char> recv(count * TypeSize(type), 0xEE);
  if (!run.Ok(tesseraAllReduceParts(pointers.data(), static_cast<int>(pointers.size()), recv.data(), count, type, op,
                                    run.comm, nullptr), name)) {
    return;
  }
  run.out->Add(name, scope, Join::kSame, recv.data(), recv.size());
  pointers[0] = parts[0].data();
  if (!run.Ok(tesseraAllReduceParts(pointers.data(), static_cast<int>(pointers.size()), parts[0].data(), count, type,
                                    op, run.comm, nullptr), name + " in place")) {
    return;
  }
  run.out->Add(name + " in place", scope, Join::kSame, parts[0].data(), parts[0].size());
}

// tesseraAllReduce (which may run as an allgather, unlike a call of parts) of the rooted
// inputs, out of place and in place.
void AllReduce(RankRun& run, tesseraDataType_t type, tesseraRedOp_t op, size_t count, const std::string& name,
               Scope scope) {
  std::vector<unsigned char> send = RootedInput(type, run.rank, count), recv(send.size(), 0xEE);
  if (!run.Ok(tesseraAllReduce(send.data(), recv.data(), count, type, op, run.comm, nullptr), name)) return;
  if (!run.Ok(tesseraAllReduce(send.data(), send.data(), count, type, op, run.comm, nullptr), name + " in place")) {
    return;
  }
  run.out->Add(name, scope, Join::kSame, recv.data(), recv.size());
  run.out->Add(name + " in place", scope, Join::kSame, send.data(), send.size());
}

// reduce to the last rank, out of place and in place.
void Reduce(RankRun& run, tesseraDataType_t type, tesseraRedOp_t op, const std::string& name, Scope scope) {
  const int root = run.p - 1;
  std::vector<unsigned char> send = RootedInput(type, run.rank, kCount), recv(send.size(), 0xEE);
  if (!run.Ok(tesseraReduce(send.data(), recv.data(), kCount, type, op, root, run.comm, nullptr), name)) return;
  if (!run.Ok(tesseraReduce(send.data(), send.data(), kCount, type, op, root, run.comm, nullptr), name + " in place")) {
    return;
  }
  if (run.rank != root) return;
  run.out->Add(name, scope, Join::kRoot, recv.data(), recv.size());
  run.out->Add(name + " in place", scope, Join::kRoot, send.data(), send.size());
}

// reduce-scatter of the whole vector: kCount / p each, out of place and in place.
void ReduceScatter(RankRun& run, tesseraDataType_t type, tesseraRedOp_t op, const std::string& name, Scope scope) {
  const size_t block = kCount / run.p, es = TypeSize(type);
  std::vector<unsigned char> send = RootedInput(type, run.rank, kCount), recv(block * es, 0xEE);
  if (!run.Ok(tesseraReduceScatter(send.data(), recv.data(), block, type, op, run.comm, nullptr), name)) return;
  unsigned char* mine = send.data() + run.rank * block * es;
  if (!run.Ok(tesseraReduceScatter(send.data(), mine, block, type, op, run.comm, nullptr), name + " in place")) return;
  run.out->Add(name, scope, Join::kConcat, recv.data(), recv.size());
  run.out->Add(name + " in place", scope, Join::kConcat, mine, block * es);
}

void ExactSections(RankRun& run, bool deterministic) {
  std::vector<std::vector<int32_t>> parts;
  for (int c = run.rank; c < kContributions; c += run.p) {
    parts.emplace_back(kCount);
    for (size_t i = 0; i < kCount; ++i) parts.back()[i] = IntContribution(c, i);
  }
  std::vector<const void*> pointers;
  for (auto& part : parts) pointers.push_back(part.data());
  std::vector<int32_t> sum(kCount);
  if (run.Ok(tesseraAllReduceParts(pointers.data(), static_cast<int>(pointers.size()), sum.data(), kCount,
                                   tesseraInt32, tesseraSum, run.comm, nullptr), "int32 sum")) {
    run.out->Add("allreduce sum int32", Scope::kEveryMode, Join::kSame, sum.data(), sum.size() * 4);
  }
  std::vector<int64_t> send(kCount), recv(kCount / run.p);
  for (size_t i = 0; i < kCount; ++i) send[i] = run.rank < 2 ? IntContribution(run.rank, i) * int64_t{4097} : 0;
  if (run.Ok(tesseraReduceScatter(send.data(), recv.data(), recv.size(), tesseraInt64, tesseraSum, run.comm, nullptr),
             "int64 reduce-scatter")) {
    run.out->Add("reduce-scatter sum int64", Scope::kFromTwoRanks, Join::kConcat, recv.data(), recv.size() * 8);
  }
  for (tesseraRedOp_t op : {tesseraMax, tesseraMin}) {
    const std::string name = std::string("allreduce ") + (op == tesseraMax ? "max" : "min") + " float32";
    // The default mode's max/min may differ in a zero's sign or a NaN's payload, even
    // between ranks (recursive doubling computes a op b on one side, b op a on the other).
    if (deterministic) AllReduceParts(run, tesseraFloat32, op, kCount, name + " (signed zeros, NaNs)", Scope::kDeterministic);
    AllReduceParts(run, tesseraFloat32, op, kCount / 5, name + " (uniform)", Scope::kEveryMode);
  }
}

std::string RunCalls(int rank, int p, tesseraComm_t comm, bool deterministic, const std::string& path) {
  RankChecks checks;
  SectionWriter out;
  RankRun run{rank, p, comm, &checks, &out};
  if (deterministic) {
    for (tesseraDataType_t type : kFloatTypes) {
      const std::string t = " " + TypeName(type);
      AllReduceParts(run, type, tesseraSum, kCount, "allreduce sum" + t, Scope::kEveryRankCount);
      AllReduceParts(run, type, tesseraSum, kSmall, "allreduce sum small" + t, Scope::kEveryRankCount);
      AllReduceParts(run, type, tesseraAvg, kCount, "allreduce avg" + t, Scope::kSameRankCount);
      if (p < 2) continue;
      AllReduce(run, type, tesseraSum, kCount, "allreduce (not parts) sum" + t, Scope::kFromTwoRanks);
      AllReduce(run, type, tesseraSum, kSmall, "allreduce (not parts) sum small" + t, Scope::kFromTwoRanks);
      AllReduce(run, type, tesseraAvg, kCount, "allreduce (not parts) avg" + t, Scope::kSameRankCount);
      Reduce(run, type, tesseraSum, "reduce sum" + t, Scope::kFromTwoRanks);
      Reduce(run, type, tesseraAvg, "reduce avg" + t, Scope::kSameRankCount);
      ReduceScatter(run, type, tesseraSum, "reduce-scatter sum" + t, Scope::kFromTwoRanks);
      ReduceScatter(run, type, tesseraAvg, "reduce-scatter avg" + t, Scope::kSameRankCount);
    }
  }
  if (p >= 2) ExactSections(run, deterministic);
  checks.Expect(out.Save(path + ".rank" + std::to_string(rank)), "writing " + path);
  return checks.str();
}

// ---- Configurations ----------------------------------------------------------------------

struct Config {
  std::string name;
  int p = 4;
  std::string layout;  // TESSERA_TOPO_FILE lines after the header; "" for one host
  EnvVars env;         // TESSERA_ALGO, TESSERA_TRANSPORT, sizes...
  bool deterministic = true;
  bool by_config = false;  // the mode from tesseraConfig_t.deterministic, not the environment
};

struct Results {
  int p = 0;
  bool deterministic = true;
  Sections sections;
};

std::string Layout(int hosts, int per_host) {  // host h holds ranks h, h + hosts, ... (interleaved)
  std::string text;
  for (int h = 0; h < hosts; ++h) {
    text += "node" + std::to_string(h);
    for (int k = 0; k < per_host; ++k) text += " " + std::to_string(h + k * hosts);
    text += "\n";
  }
  return text;
}

std::string ScratchDir() {
  static const std::string dir = [] {
    std::string d = testing::TempDir() + "/deterministic-" + std::to_string(getpid());
    if (std::system(("mkdir -p " + d).c_str()) != 0) ADD_FAILURE() << "mkdir " << d;
    return d;
  }();
  return dir;
}

// Joins every rank's sections: allreduce copies must agree; reduce keeps the root's;
// reduce-scatter concatenates the blocks by rank.
std::string JoinRanks(const std::string& name, int p, Results* results) {
  for (int r = 0; r < p; ++r) {
    std::vector<std::pair<std::string, Section>> loaded;
    const std::string path = ScratchDir() + "/" + name + ".rank" + std::to_string(r);
    if (!LoadSections(path, &loaded)) return "cannot read " + path;
    std::remove(path.c_str());
    for (auto& [section, s] : loaded) {
      auto it = results->sections.find(section);
      if (it == results->sections.end()) {
        results->sections.emplace(section, std::move(s));
      } else if (s.join == Join::kConcat) {
        it->second.bytes.insert(it->second.bytes.end(), s.bytes.begin(), s.bytes.end());
      } else if (s.bytes != it->second.bytes) {
        return section + ": rank " + std::to_string(r) + "'s result differs from rank 0's";
      }
    }
  }
  return "";
}

std::string RankBody(const Config& c, const RankContext& ctx) {
  tesseraComm_t comm = nullptr;
  tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
  config.deterministic = 1;
  const tesseraResult_t r =
      tesseraCommInitRankConfig(&comm, ctx.nranks, ctx.ids[0], ctx.rank, c.by_config ? &config : nullptr);
  if (r != tesseraSuccess) return "init: " + CodeName(r) + ": " + LastError(nullptr);
  std::string failures = RunCalls(ctx.rank, ctx.nranks, comm, c.deterministic, ScratchDir() + "/" + c.name);
  if (tesseraCommDestroy(comm) != tesseraSuccess) failures += "destroy failed";
  return failures;
}

const Results& RunConfig(const Config& c) {
  static std::map<std::string, Results> cache;
  auto it = cache.find(c.name);
  if (it != cache.end()) return it->second;
  RankOptions opts;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(5000);
  opts.env = c.env;
  opts.env["TESSERA_TIMEOUT_MS"] = "60000";
  (void)ScratchDir();  // named by this process's pid before the ranks fork
  if (c.deterministic && !c.by_config) opts.env["TESSERA_DETERMINISTIC"] = "1";
  if (!c.layout.empty()) {
    const std::string path = ScratchDir() + "/" + c.name + ".layout";
    std::ofstream(path) << "tessera-layout 1\n" << c.layout;
    opts.env["TESSERA_TOPO_FILE"] = path;
  }
  Results results{c.p, c.deterministic, {}};
  const auto ranks = RunRanksRaw(c.p, [&c](const RankContext& ctx) { return RankBody(c, ctx); }, opts);
  const std::string failed = Failures(ranks);
  EXPECT_EQ("", failed) << c.name;
  if (failed.empty()) {
    EXPECT_EQ("", JoinRanks(c.name, c.p, &results)) << c.name;
  }
  return cache.emplace(c.name, std::move(results)).first->second;
}

Config Reference() { return {"1x4_auto", 4, "", {{"TESSERA_ALGO", "auto"}}}; }

// Whether section `name` of scope `scope` compares between runs on p and q ranks.
bool Comparable(const Section& s, const Results& a, const Results& b) {
  switch (s.scope) {
    case Scope::kEveryRankCount: return a.deterministic && b.deterministic;
    case Scope::kFromTwoRanks: return a.deterministic && b.deterministic && a.p >= 2 && b.p >= 2;
    case Scope::kSameRankCount: return a.deterministic && b.deterministic && a.p == b.p;
    case Scope::kEveryMode: return true;
    case Scope::kDeterministic: return a.deterministic && b.deterministic;
  }
  return false;
}

// Every section `got` shares with `want` where they compare, and each in-place result
// against its out-of-place one; returns how many sections were compared.
int ExpectSameBits(const Results& got, const std::string& got_name, const Results& want, const std::string& want_name) {
  int compared = 0;
  for (const auto& [name, s] : got.sections) {
    const size_t in_place = name.find(" in place");
    if (in_place != std::string::npos) {
      EXPECT_TRUE(s.bytes == got.sections.at(name.substr(0, in_place)).bytes) << got_name << ": " << name;
    }
    auto it = want.sections.find(name);
    if (it == want.sections.end() || !Comparable(s, got, want)) continue;
    ++compared;
    EXPECT_TRUE(s.bytes == it->second.bytes) << got_name << " against " << want_name << ": " << name << " differs";
  }
  return compared;
}

void ExpectLikeReference(const Config& c) {
  const Results& got = RunConfig(c);
  const int compared = ExpectSameBits(got, c.name, RunConfig(Reference()), Reference().name);
  EXPECT_GT(compared, 0) << c.name;
}

const char* const kAlgorithms[] = {"ring",         "recursive_doubling",  "rabenseifner", "torus",
                                   "hierarchical", "hierarchical_leader", "hierarchical_doubling"};

// ---- Tests -----------------------------------------------------------------------------

TEST(Deterministic, RankCountsOneToEight) {
  for (int p : {1, 2, 3, 5, 8}) ExpectLikeReference({"1x" + std::to_string(p) + "_auto", p, "", {}});
}

TEST(Deterministic, EveryAllReduceAlgorithmOnOneHost) {
  for (const char* algo : kAlgorithms) ExpectLikeReference({std::string("1x4_") + algo, 4, "", {{"TESSERA_ALGO", algo}}});
}

// Each way a tesseraAllReduce can run (TESSERA_DETERMINISTIC_PLAN) on 2, 3 and 4 ranks:
// the exchange in whole runs of p grid blocks with the rest gathered (kCount is not a
// multiple of them), in several segments, and across emulated hosts.
TEST(Deterministic, EveryAllReducePlan) {
  for (const char* plan : {"keyed", "gather", "exchange"}) {
    for (int p : {2, 3, 4}) {
      ExpectLikeReference({"1x" + std::to_string(p) + "_" + plan, p, "", {{"TESSERA_DETERMINISTIC_PLAN", plan}}});
    }
  }
  ExpectLikeReference({"1x2_exchange_segments", 2, "",
                       {{"TESSERA_DETERMINISTIC_PLAN", "exchange"}, {"TESSERA_DETERMINISTIC_SEGMENT_BYTES", "4096"}}});
  ExpectLikeReference({"2x2_exchange", 4, Layout(2, 2), {{"TESSERA_DETERMINISTIC_PLAN", "exchange"}}});
  // Two ranks sum pairs of grid blocks as they arrive where a slot or chunk holds whole
  // blocks (2 KiB slots: the half types' blocks, not float32's or float64's; 4 KiB TCP
  // chunks: all but float64's), piece by piece over each transport.
  ExpectLikeReference({"1x2_exchange_small_slots", 2, "",
                       {{"TESSERA_DETERMINISTIC_PLAN", "exchange"}, {"TESSERA_SHM_SLOT_BYTES", "2048"}}});
  for (const char* transport : {"tcp", "ucx"}) {
    ExpectLikeReference({std::string("1x2_exchange_") + transport, 2, "",
                         {{"TESSERA_DETERMINISTIC_PLAN", "exchange"}, {"TESSERA_TRANSPORT", transport},
                          {"TESSERA_TCP_CHUNK_BYTES", "4096"}, {"TESSERA_UCX_CHUNK_BYTES", "4096"}}});
  }
}

TEST(Deterministic, EmulatedTwoByTwoHosts) {
  ExpectLikeReference({"2x2_auto", 4, Layout(2, 2), {}});
  for (const char* algo : kAlgorithms) {
    ExpectLikeReference({std::string("2x2_") + algo, 4, Layout(2, 2), {{"TESSERA_ALGO", algo}}});
  }
}

TEST(Deterministic, EmulatedFourByTwoHosts) {
  const Config one_host{"1x8_auto", 8, "", {}};
  for (const char* algo : {"auto", "torus", "hierarchical", "hierarchical_leader", "rabenseifner"}) {
    const Config c{std::string("4x2_") + algo, 8, Layout(4, 2), {{"TESSERA_ALGO", algo}}};
    ExpectLikeReference(c);
    EXPECT_GT(ExpectSameBits(RunConfig(c), c.name, RunConfig(one_host), one_host.name), 0);
  }
}

TEST(Deterministic, SharedMemoryTcpAndUcx) {
  for (const char* transport : {"tcp", "ucx"}) {
    ExpectLikeReference({std::string("1x4_") + transport, 4, "", {{"TESSERA_TRANSPORT", transport}}});
  }
}

TEST(Deterministic, SegmentSlotAndChunkSizes) {
  ExpectLikeReference({"2x2_small_pieces", 4, Layout(2, 2),
                       {{"TESSERA_DETERMINISTIC_SEGMENT_BYTES", "4096"}, {"TESSERA_SHM_SLOT_BYTES", "4096"},
                        {"TESSERA_TCP_CHUNK_BYTES", "4096"}}});
  const Config three{"1x3_auto", 3, "", {}};
  const Config small{"1x3_segments", 3, "", {{"TESSERA_DETERMINISTIC_SEGMENT_BYTES", "2048"},
                                              {"TESSERA_ALGO", "ring"}}};
  EXPECT_GT(ExpectSameBits(RunConfig(small), small.name, RunConfig(three), three.name), 0);
}

TEST(Deterministic, SetByTheCommunicatorConfig) {
  Config c{"1x4_by_config", 4, "", {}};
  c.by_config = true;
  ExpectLikeReference(c);
}

// Integer sums and max/min (away from signed zeros and NaNs) are exact in any order: the
// default mode's algorithms give the reference's bits too.
TEST(Deterministic, IntegersAndMaxMinAreOrderFreeInTheDefaultMode) {
  for (const char* algo : {"ring", "recursive_doubling"}) {
    Config c{std::string("default_1x4_") + algo, 4, "", {{"TESSERA_ALGO", algo}}};
    c.deterministic = false;
    ExpectLikeReference(c);
  }
  Config hosts{"default_2x2_hierarchical", 4, Layout(2, 2), {{"TESSERA_ALGO", "hierarchical"}}};
  hosts.deterministic = false;
  ExpectLikeReference(hosts);
}

// ---- The bound ------------------------------------------------------------------------

// Digits and bias of each float type.
struct Format {
  int digits, bias, wire_precision;
};
Format FormatOf(tesseraDataType_t type) {
  switch (type) {
    case tesseraFloat16: return {11, 15, 24};
    case tesseraBfloat16: return {8, 127, 24};
    case tesseraFloat32: return {24, 127, 53};
    default: return {53, 1023, 53};
  }
}

// The grid step of a block whose largest magnitude is `largest` (docs/semantics.md):
// 2^E bounds the block, q = E + 12 - P, never below the smallest subnormal; float64's
// second word is P - 11 bits finer.
double GridStep(tesseraDataType_t type, double largest) {
  const Format f = FormatOf(type);
  const int e = largest >= std::ldexp(1.0, 1 - f.bias) ? std::ilogb(largest) + 1 : 2 - f.bias;
  int q = std::max(e + kHeadroom - f.wire_precision, MinExponent(type));
  if (type == tesseraFloat64) q = std::max(q - (53 - kHeadroom + 1), -1074);
  return std::ldexp(1.0, q);
}

uint64_t CanonicalNan(tesseraDataType_t type) {
  switch (type) {
    case tesseraFloat16: return 0x7e00;
    case tesseraBfloat16: return 0x7fc0;
    case tesseraFloat32: return 0x7fc00000u;
    default: return 0x7ff8000000000000ull;
  }
}

// Checks element i of a sum (avg: divided by p) of `inputs` (n contributions).
std::string CheckElement(tesseraDataType_t type, const std::vector<std::vector<unsigned char>>& inputs, size_t i,
                         const unsigned char* got, int divisor, double largest) {
  const size_t es = TypeSize(type);
  bool nan = false, pos_inf = false, neg_inf = false;
  __float128 exact = 0;
  for (const auto& in : inputs) {
    const double x = DecodeValue(type, &in[i * es]);
    nan |= std::isnan(x);
    pos_inf |= x == INFINITY;
    neg_inf |= x == -INFINITY;
    if (std::isfinite(x)) exact += x;
  }
  const double g = DecodeValue(type, got);
  if (nan || (pos_inf && neg_inf)) {
    uint64_t bits = 0;
    std::memcpy(&bits, got, es);
    return bits == CanonicalNan(type) ? "" : "not the canonical NaN";
  }
  if (pos_inf || neg_inf) return g == (pos_inf ? INFINITY : -INFINITY) ? "" : "not the infinity";
  const double want = static_cast<double>(exact / divisor);
  const double step = GridStep(type, largest);
  const double ulp = UlpOf(type, g);  // covers the division's rounding too
  const double bound = inputs.size() * step / 2 / divisor + (divisor > 1 ? ulp : ulp / 2);
  if (!(std::fabs(g - want) <= bound)) {
    char text[160];
    std::snprintf(text, sizeof(text), "%.17g, exact %.17g: error %.3g beyond the bound %.3g", g, want,
                  std::fabs(g - want), bound);
    return text;
  }
  return "";
}

// The largest finite magnitude of block b over the inputs.
double Largest(tesseraDataType_t type, const std::vector<std::vector<unsigned char>>& inputs, size_t b) {
  double m = 0;
  for (const auto& in : inputs) {
    for (size_t i = b * kBlock; i < std::min(kCount, (b + 1) * kBlock); ++i) {
      const double x = std::fabs(DecodeValue(type, &in[i * TypeSize(type)]));
      if (std::isfinite(x)) m = std::max(m, x);
    }
  }
  return m;
}

void ExpectWithinBound(tesseraDataType_t type, const std::vector<std::vector<unsigned char>>& inputs,
                       const std::vector<unsigned char>& got, int divisor, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < kCount && bad < 5; ++i) {
    const std::string err = CheckElement(type, inputs, i, &got[i * TypeSize(type)], divisor,
                                         Largest(type, inputs, i / kBlock));
    if (!err.empty()) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: " << err;
    }
  }
}

TEST(Deterministic, WithinTheStatedBoundOfAnExactReference) {
  const Results& r = RunConfig(Reference());
  for (tesseraDataType_t type : kFloatTypes) {
    const std::string t = " " + TypeName(type);
    std::vector<std::vector<unsigned char>> all, rooted;
    for (int c = 0; c < kContributions; ++c) all.push_back(ContributionVector(type, c, kCount));
    for (int rank = 0; rank < r.p; ++rank) rooted.push_back(RootedInput(type, rank, kCount));
    ExpectWithinBound(type, all, r.sections.at("allreduce sum" + t).bytes, 1, "allreduce sum" + t);
    ExpectWithinBound(type, all, r.sections.at("allreduce avg" + t).bytes, r.p, "allreduce avg" + t);
    ExpectWithinBound(type, rooted, r.sections.at("reduce sum" + t).bytes, 1, "reduce sum" + t);
    ExpectWithinBound(type, rooted, r.sections.at("reduce-scatter avg" + t).bytes, r.p, "reduce-scatter avg" + t);
  }
}

// ---- Refusals --------------------------------------------------------------------------

TEST(Deterministic, RanksThatDisagreeFailAtCreation) {
  RankOptions opts;
  opts.timeout = Milliseconds(60000);
  opts.env_for_rank = [](int rank) { return EnvVars{{"TESSERA_DETERMINISTIC", rank == 1 ? "1" : "0"}}; };
  const auto results = RunRanksRaw(3, [](const RankContext& ctx) {
    tesseraComm_t comm = nullptr;
    const tesseraResult_t r = tesseraCommInitRank(&comm, ctx.nranks, ctx.ids[0], ctx.rank);
    if (r == tesseraSuccess) {
      tesseraCommDestroy(comm);
      return std::string("created although rank 1 has TESSERA_DETERMINISTIC=1");
    }
    const std::string error = LastError(nullptr);
    return error.find("TESSERA_DETERMINISTIC") != std::string::npos ? std::string() : "error lacks the setting: " + error;
  }, opts);
  EXPECT_EQ("", Failures(results));
}

TEST(Deterministic, TooManyContributionsAndBadPartsAreRefused) {
  RankOptions opts;
  opts.timeout = Milliseconds(60000);
  opts.env["TESSERA_DETERMINISTIC"] = "1";
  const auto results = RunRanks(2, [](int rank, tesseraComm_t comm) {
    RankChecks checks;
    std::vector<float> x(4, 1.0f), y(4);
    std::vector<const void*> parts(2049, x.data());  // 2 x 2049 > 4096 contributions
    checks.ExpectCode(tesseraAllReduceParts(parts.data(), 2049, y.data(), 4, tesseraFloat32, tesseraSum, comm, nullptr),
                      tesseraInvalidArgument, "2049 parts on each of 2 ranks");
    checks.ExpectContains(LastError(comm), "4096", "the error");
    // Still usable, and integers are not limited.
    checks.ExpectCode(tesseraAllReduceParts(parts.data(), 2, y.data(), 4, tesseraFloat32, tesseraSum, comm, nullptr),
                      tesseraSuccess, "2 parts");
    checks.Expect(y[0] == 4.0f, "2 parts x 2 ranks of 1.0 sum to 4");
    checks.ExpectCode(tesseraAllReduceParts(nullptr, 1, y.data(), 4, tesseraFloat32, tesseraSum, comm, nullptr),
                      tesseraInvalidArgument, "NULL sendbuffs");
    checks.ExpectCode(tesseraAllReduceParts(parts.data(), 0, y.data(), 4, tesseraFloat32, tesseraSum, comm, nullptr),
                      tesseraInvalidArgument, "0 parts");
    const void* overlapping[2] = {x.data(), y.data() + 1};
    checks.ExpectCode(tesseraAllReduceParts(overlapping, 2, y.data(), 4, tesseraFloat32, tesseraSum, comm, nullptr),
                      tesseraInvalidArgument, "a part overlapping recvbuff");
    (void)rank;
    return checks.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
