// Device-resident collectives and the cuda_ipc link protocol, in real processes (one per
// rank, rank_harness), with the host DeviceEngine (cuda/host_device_engine.h) standing
// in for the GPU: "device memory" is memory the engine allocated (it refuses any other
// pointer, as a GPU would fault on a host buffer), slots are shared-memory objects
// mapped by the peer as CUDA IPC would map them, and work completes only when its
// event is queried (some cases answer "not done" a few times first).
//
// Every rank creates the internal Communicator from the harness's unique id, enables its
// device links (Communicator::EnableDeviceLinks, as comm/device_path.cc does on a GPU)
// and runs RunGroupOnDevice, the device-resident path, checking every result exactly
// (averages of floats within one unit in the last place) against typed_values' serial
// reference:
//  - allreduce, reduce, reduce-scatter: 7 datatypes x sum, prod, max, min, avg and a
//    PreMulSum operator, out of place and in place, on 2, 3 and 4 ranks;
//  - allgather, broadcast, gather, scatter and a send/recv ring;
//  - counts 1, 7, 1031 (odd, several slots) and 65537, and float32 counts at the slot
//    boundaries (4 KiB slots: one slot, all four slots, one element more);
//  - a rank killed during a call: the others fail promptly naming it, and nothing of
//    theirs is left in /dev/shm;
//  - the link protocol alone: a sender never holds more than 4 slots, gets them all back,
//    and a size mismatch and a host buffer are refused with messages that say so.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "bootstrap/rendezvous.h"
#include "comm/communicator.h"
#include "comm/device_path.h"
#include "cuda/host_device_engine.h"
#include "gtest/gtest.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"
#include "transport/cuda_ipc/cuda_ipc_link.h"
#include "transport/cuda_ipc/cuda_ipc_transport.h"
#include "transport/exchange.h"

namespace tessera_test {
namespace {

using tessera::Communicator;
using tessera::DataType;
using tessera::HostDeviceEngine;
using tessera::Operation;
using tessera::OpKind;
using TOp = tessera_test::OpKind;

constexpr int kSlotBytes = 4096;

RankOptions Options(int64_t timeout_ms = 30000) {
  RankOptions o;
  o.timeout = Milliseconds(120000);
  o.failure_grace = Milliseconds(5000);
  o.env = {{"TESSERA_CUDA_IPC_SLOT_BYTES", std::to_string(kSlotBytes)},
           {"TESSERA_TIMEOUT_MS", std::to_string(timeout_ms)}};
  return o;
}

// One rank's communicator with device links over the host engine.
struct DeviceRank {
  std::unique_ptr<Communicator> comm;
  HostDeviceEngine* engine = nullptr;

  std::string Init(const RankContext& ctx, int polls_before_done) {
    tessera::Settings settings;
    tessera::Status s = tessera::Settings::FromEnvironment(&settings);
    tessera::UniqueIdData id;
    if (s.ok()) s = tessera::DecodeUniqueId(ctx.ids[0].internal, &id);
    if (s.ok()) s = Communicator::Create(settings, id, ctx.nranks, ctx.rank, &comm);
    if (!s.ok()) return "creating the communicator: " + s.ToString();
    if (!comm->device_resident_possible()) return "device_resident_possible() is false on one host";
    HostDeviceEngine::Options options;
    options.polls_before_done = polls_before_done;
    auto e = std::make_unique<HostDeviceEngine>(options);
    engine = e.get();
    s = comm->EnableDeviceLinks(std::move(e));
    return s.ok() ? "" : "EnableDeviceLinks: " + s.ToString();
  }

  std::shared_ptr<void> Buffer(size_t bytes) {
    std::shared_ptr<void> p;
    tessera::Status s = engine->Allocate(bytes, &p);
    return s.ok() ? p : nullptr;
  }
};

const tesseraDataType_t kTypes[] = {tesseraInt8,  tesseraInt32,   tesseraUint64, tesseraFloat16,
                                    tesseraFloat32, tesseraFloat64, tesseraBfloat16};

// Checks element k of got against the reference over ranks of InputValue(op, type, j(k), r).
std::string CheckReduced(TOp op, tesseraDataType_t type, const char* got, size_t count, size_t first, int nranks,
                         const std::string& what) {
  const size_t es = TypeSize(type);
  for (size_t k = 0; k < count; ++k) {
    std::vector<double> inputs;
    for (int r = 0; r < nranks; ++r) inputs.push_back(InputValue(op, type, static_cast<int>((first + k) % kPeriod), r));
    const double want = RoundToType(type, ReduceReference(op, type, inputs, PreMulScalar(type)));
    const double have = DecodeValue(type, got + k * es);
    const bool inexact = op == TOp::kAvg && IsFloatType(type);
    if (inexact ? std::fabs(have - want) <= UlpOf(type, want) : have == want) continue;
    return what + ": element " + std::to_string(k) + " is " + std::to_string(have) + ", want " + std::to_string(want);
  }
  return "";
}

void Fill(TOp op, tesseraDataType_t type, int rank, char* dst, size_t count, size_t first = 0) {
  for (size_t k = 0; k < count; ++k) {
    EncodeValue(type, InputValue(op, type, static_cast<int>((first + k) % kPeriod), rank), dst + k * TypeSize(type));
  }
}

// One reduction through RunGroupOnDevice; "" or what went wrong.
std::string Reduction(DeviceRank& d, OpKind kind, TOp top, tesseraDataType_t ttype, size_t count, int root,
                      bool in_place, int rank, int nranks) {
  const DataType type = static_cast<DataType>(ttype);
  const size_t es = TypeSize(ttype);
  const size_t in_count = count * (kind == OpKind::kReduceScatter ? nranks : 1);
  std::string what = std::string(kind == OpKind::kAllReduce ? "allreduce" : kind == OpKind::kReduce ? "reduce" : "reduce-scatter") +
                     " " + TypeName(ttype) + " " + OpKindName(top) + " count " + std::to_string(count) +
                     (in_place ? " in place" : "") + " on rank " + std::to_string(rank);
  auto send = d.Buffer(in_count * es);
  auto recv = in_place ? send : d.Buffer(in_count * es);
  if (!send || !recv) return what + ": no device memory";
  Fill(top, ttype, rank, static_cast<char*>(send.get()), in_count);
  Operation op;
  op.kind = kind;
  op.send = send.get();
  op.recv = kind == OpKind::kReduceScatter && in_place ? static_cast<char*>(send.get()) + rank * count * es : recv.get();
  op.count = count;
  op.type = type;
  op.root = root;
  op.op = static_cast<int>(BuiltinOp(top));
  if (top == TOp::kPreMulSum) {
    unsigned char scalar[8] = {};
    EncodeValue(ttype, PreMulScalar(ttype), scalar);
    tessera::Status s = d.comm->CreatePreMulSum(scalar, type, true, &op.op);
    if (!s.ok()) return what + ": CreatePreMulSum: " + s.ToString();
  }
  tessera::Status s = d.comm->RunGroupOnDevice({op});
  if (top == TOp::kPreMulSum) (void)d.comm->DestroyRedOp(op.op);
  if (!s.ok()) return what + ": " + s.ToString();
  if (kind == OpKind::kReduce && rank != root) return "";
  const size_t first = kind == OpKind::kReduceScatter ? static_cast<size_t>(rank) * count : 0;
  return CheckReduced(top, ttype, static_cast<const char*>(op.recv), count, first, nranks, what);
}

std::string ReductionMatrix(DeviceRank& d, int rank, int nranks) {
  FailureLog log;
  int call = 0;
  for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduce, OpKind::kReduceScatter}) {
    for (tesseraDataType_t type : kTypes) {
      for (TOp top : AllReductionKinds()) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1031}}) {
          for (bool in_place : {false, true}) {
            log.Add(Reduction(d, kind, top, type, count, call++ % nranks, in_place, rank, nranks));
            if (!d.comm->sticky_error().ok()) return log.str();
          }
        }
      }
    }
  }
  // Large, and at the slot boundaries of float32 (1024 elements fill one 4 KiB slot).
  for (size_t count : {size_t{1024}, size_t{4096}, size_t{4097}, size_t{65537}}) {
    for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduce, OpKind::kReduceScatter}) {
      log.Add(Reduction(d, kind, TOp::kSum, tesseraFloat32, count, call++ % nranks, false, rank, nranks));
    }
  }
  log.Add(Reduction(d, OpKind::kAllReduce, TOp::kAvg, tesseraBfloat16, 65537, 0, true, rank, nranks));
  return log.str();
}

// Allgather, broadcast, gather, scatter, alltoall and a send/recv ring of `count` float64 /
// int8.
std::string MovementCase(DeviceRank& d, tesseraDataType_t ttype, size_t count, int root, int rank, int nranks) {
  const DataType type = static_cast<DataType>(ttype);
  const size_t es = TypeSize(ttype), block = count * es, all = block * nranks;
  const std::string tag = " " + TypeName(ttype) + " count " + std::to_string(count) + " root " + std::to_string(root) +
                          " on rank " + std::to_string(rank);
  FailureLog log;
  auto own = d.Buffer(all), out = d.Buffer(all);
  char* own_p = static_cast<char*>(own.get());
  char* out_p = static_cast<char*>(out.get());
  // Element k of rank r's block: InputValue(kCopy, type, k, r); a whole buffer of rank r
  // for scatter holds every destination's block.
  auto expect_block = [&](const char* got, int from, const std::string& what) {
    for (size_t k = 0; k < count; ++k) {
      const double want = InputValue(TOp::kCopy, ttype, static_cast<int>(k % kPeriod), from);
      if (DecodeValue(ttype, got + k * es) != want) {
        return log.Add(what + tag + ": element " + std::to_string(k) + " of rank " + std::to_string(from) + "'s block");
      }
    }
    return true;
  };
  auto run = [&](Operation op, const char* what) {
    op.type = type;
    op.count = count;
    op.root = root;
    tessera::Status s = d.comm->RunGroupOnDevice({op});
    if (!s.ok()) log.Add(std::string(what) + tag + ": " + s.ToString());
    return s.ok();
  };
  Operation op;
  // Allgather.
  Fill(TOp::kCopy, ttype, rank, own_p, count);
  op.kind = OpKind::kAllGather;
  op.send = own_p;
  op.recv = out_p;
  if (run(op, "allgather")) {
    for (int r = 0; r < nranks; ++r) expect_block(out_p + r * block, r, "allgather");
  }
  // Broadcast from root, in place.
  Fill(TOp::kCopy, ttype, rank, own_p, count);
  op.kind = OpKind::kBroadcast;
  op.send = own_p;
  op.recv = own_p;
  if (run(op, "broadcast")) expect_block(own_p, root, "broadcast");
  // Gather to root.
  Fill(TOp::kCopy, ttype, rank, own_p, count);
  op.kind = OpKind::kGather;
  op.send = own_p;
  op.recv = out_p;
  if (run(op, "gather") && rank == root) {
    for (int r = 0; r < nranks; ++r) expect_block(out_p + r * block, r, "gather");
  }
  // Scatter from root: block r of the root's buffer is rank r's values.
  for (int r = 0; r < nranks; ++r) Fill(TOp::kCopy, ttype, r, own_p + r * block, count);
  op.kind = OpKind::kScatter;
  op.send = own_p;
  op.recv = out_p;
  if (run(op, "scatter")) expect_block(out_p, rank, "scatter");
  // Alltoall: block j of rank r's input carries seed r * nranks + j, so a block that
  // lands in the wrong place or comes from the wrong rank is caught.
  for (int j = 0; j < nranks; ++j) Fill(TOp::kCopy, ttype, rank * nranks + j, own_p + j * block, count);
  op.kind = OpKind::kAlltoAll;
  op.send = own_p;
  op.recv = out_p;
  if (run(op, "alltoall")) {
    for (int r = 0; r < nranks; ++r) expect_block(out_p + r * block, r * nranks + rank, "alltoall");
  }
  // Send/recv ring: to the right, from the left, plus a send to self.
  Fill(TOp::kCopy, ttype, rank, own_p, count);
  Operation to_right, from_left, to_self, from_self;
  to_right.kind = OpKind::kSend;
  to_right.send = own_p;
  to_right.peer = (rank + 1) % nranks;
  from_left.kind = OpKind::kRecv;
  from_left.recv = out_p;
  from_left.peer = (rank + nranks - 1) % nranks;
  to_self.kind = OpKind::kSend;
  to_self.send = own_p;
  to_self.peer = rank;
  from_self.kind = OpKind::kRecv;
  from_self.recv = out_p + block;
  from_self.peer = rank;
  std::vector<Operation> group = {to_right, from_left, to_self, from_self};
  for (Operation& o : group) {
    o.type = type;
    o.count = count;
  }
  tessera::Status s = d.comm->RunGroupOnDevice(group);
  if (!s.ok()) {
    log.Add("send/recv ring" + tag + ": " + s.ToString());
  } else {
    expect_block(out_p, (rank + nranks - 1) % nranks, "send/recv from the left");
    expect_block(out_p + block, rank, "send to self");
  }
  return log.str();
}

std::string MovementMatrix(DeviceRank& d, int rank, int nranks) {
  std::string failures;
  int root = 0;
  for (tesseraDataType_t type : {tesseraInt8, tesseraFloat64}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1031}, size_t{65537}}) {
      failures += MovementCase(d, type, count, root++ % nranks, rank, nranks);
    }
  }
  return failures;
}

class DeviceResident : public ::testing::TestWithParam<int> {};

TEST_P(DeviceResident, ReductionsAreExact) {
  const int nranks = GetParam();
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    DeviceRank d;
    std::string failure = d.Init(ctx, ctx.rank % 2 == 0 ? 0 : 3);  // some ranks' work completes late
    return failure.empty() ? ReductionMatrix(d, ctx.rank, ctx.nranks) : failure;
  }, Options());
  EXPECT_EQ(Failures(results), "");
}

TEST_P(DeviceResident, DataMovementIsExact) {
  const int nranks = GetParam();
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    DeviceRank d;
    std::string failure = d.Init(ctx, ctx.rank == 1 ? 2 : 0);
    return failure.empty() ? MovementMatrix(d, ctx.rank, ctx.nranks) : failure;
  }, Options());
  EXPECT_EQ(Failures(results), "");
}

// Every algorithm that can run on one host, forced: their copies and temporary buffers
// (recursive doubling's second buffer, the fold of 3 ranks, the ring reduce-scatter's
// scratch, the grid's) must all live in the engine's memory, which refuses host pointers.
TEST(DeviceResidentAlgorithms, EveryForcedAlgorithmIsExact) {
  for (const char* algo : {"ring", "recursive_doubling", "rabenseifner", "torus"}) {
    for (int nranks : {3, 4}) {
      RankOptions options = Options();
      options.env["TESSERA_ALGO"] = algo;
      if (std::string(algo) == "torus") options.env["TESSERA_TORUS"] = nranks == 4 ? "2x2" : "3x1";
      auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
        DeviceRank d;
        std::string failure = d.Init(ctx, 1);
        if (!failure.empty()) return failure;
        FailureLog log;
        int call = 0;
        for (OpKind kind : {OpKind::kAllReduce, OpKind::kReduceScatter}) {
          for (size_t count : {size_t{1}, size_t{1031}, size_t{65537}}) {
            log.Add(Reduction(d, kind, TOp::kSum, tesseraFloat32, count, 0, call++ % 2 == 1, ctx.rank, ctx.nranks));
            log.Add(Reduction(d, kind, TOp::kMax, tesseraBfloat16, count, 0, false, ctx.rank, ctx.nranks));
          }
        }
        return log.str();
      }, options);
      EXPECT_EQ(Failures(results), "") << algo << " on " << nranks << " ranks";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceResident, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

// Not a benchmark (the host engine's copies are memcpy), but the protocol's cost beside
// the shm transport, which moves the same bytes the same way: 2 ranks, float32 sum,
// default slots (1 MiB). Prints busbw of both and checks the device-resident result.
TEST(DeviceResidentThroughput, PrintsBusBandwidthBesideTheHostPath) {
  RankOptions options = Options();
  options.env.erase("TESSERA_CUDA_IPC_SLOT_BYTES");
  auto results = RunRanksRaw(2, [](const RankContext& ctx) -> std::string {
    DeviceRank d;
    std::string failure = d.Init(ctx, 0);
    if (!failure.empty()) return failure;
    std::string line;
    for (size_t bytes : {size_t{1} << 20, size_t{32} << 20}) {
      const size_t count = bytes / 4;
      auto dev = d.Buffer(bytes);
      std::vector<float> host(count, 1.0f);
      double best[2] = {1e30, 1e30};
      for (int path = 0; path < 2; ++path) {
        Operation op;
        op.kind = OpKind::kAllReduce;
        float* buf = path == 0 ? static_cast<float*>(dev.get()) : host.data();
        op.send = buf;
        op.recv = buf;
        op.count = count;
        op.type = DataType::kFloat32;
        for (int rep = 0; rep < 5; ++rep) {
          std::fill_n(buf, count, 1.0f);
          const auto start = std::chrono::steady_clock::now();
          tessera::Status s = path == 0 ? d.comm->RunGroupOnDevice({op}) : d.comm->RunGroup({op});
          best[path] = std::min(best[path], SecondsSince(start));
          if (!s.ok()) return std::string(path == 0 ? "device" : "host") + " allreduce: " + s.ToString();
        }
        if (buf[0] != 2.0f || buf[count - 1] != 2.0f) return "wrong allreduce result";
      }
      line += " " + std::to_string(bytes >> 20) + " MiB: cuda_ipc (host engine) " +
              std::to_string(bytes / best[0] / 1e9) + " GB/s, shm " + std::to_string(bytes / best[1] / 1e9) + " GB/s;";
    }
    if (ctx.rank == 0) std::printf("allreduce busbw, 2 ranks:%s\n", line.c_str());
    return "";
  }, options);
  EXPECT_EQ(Failures(results), "");
}

// Names in /dev/shm that a process with this pid could have left.
std::vector<std::string> ShmNamesOf(int pid) {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  const std::string a = "tessera-devslots-" + std::to_string(pid) + "-", b = "tessera-" + std::to_string(pid) + "-";
  while (dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    if (n.rfind(a, 0) == 0 || n.rfind(b, 0) == 0) names.push_back(n);
  }
  closedir(dir);
  return names;
}

TEST(DeviceResidentFailure, KilledPeerFailsTheOthersPromptlyWithItsName) {
  const int64_t timeout_ms = 30000;
  auto results = RunRanksRaw(3, [](const RankContext& ctx) -> std::string {
    DeviceRank d;
    std::string failure = d.Init(ctx, 0);
    if (!failure.empty()) return failure;
    const size_t count = 1 << 16;
    auto buf = d.Buffer(count * 4);
    Operation op;
    op.kind = OpKind::kAllReduce;
    op.send = buf.get();
    op.recv = buf.get();
    op.count = count;
    op.type = DataType::kFloat32;
    op.op = 0;
    tessera::Status s = d.comm->RunGroupOnDevice({op});
    if (!s.ok()) return "first allreduce: " + s.ToString();
    if (ctx.rank == 2) {
      ArriveAndWait(0, 3, Milliseconds(20000));
      usleep(50000);  // the others are inside the allreduce by now
      kill(getpid(), SIGKILL);
    }
    ArriveAndWait(0, 3, Milliseconds(20000));
    const auto start = std::chrono::steady_clock::now();
    s = d.comm->RunGroupOnDevice({op});
    const double seconds = SecondsSince(start);
    if (ctx.rank == 0) std::printf("rank 0 after %.3f s: %s\n", seconds, s.ToString().c_str());
    RankChecks checks;
    checks.Expect(!s.ok(), "the allreduce succeeded without rank 2");
    checks.ExpectContains(s.message(), "rank 2", "the error names the dead rank");
    checks.Expect(s.code() == tessera::Code::kRemoteError, "a remote error, got " + s.ToString());
    checks.Expect(seconds < 10, "failing took " + std::to_string(seconds) + " s (timeout 30 s)");
    checks.Expect(!d.comm->sticky_error().ok(), "the communicator is broken after");
    return checks.str();
  }, Options(timeout_ms));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_EQ(results[2].signal, SIGKILL) << results[2].Describe();
  for (const RankResult& r : results) {
    EXPECT_EQ(ShmNamesOf(r.pid), std::vector<std::string>()) << "rank " << r.rank << " left shared memory";
  }
}

// The rule comm/device_path.cc applies before running a batch device-resident.
TEST(DevicePathRule, RunsOnDeviceOnlyWithTheEnginesMemory) {
  HostDeviceEngine engine(HostDeviceEngine::Options{});
  std::shared_ptr<void> a, b;
  ASSERT_TRUE(engine.Allocate(4096, &a).ok());
  ASSERT_TRUE(engine.Allocate(4096, &b).ok());
  std::vector<char> host(4096);
  Operation op;
  op.kind = OpKind::kAllReduce;
  op.send = a.get();
  op.recv = b.get();
  op.count = 1024;
  op.type = DataType::kFloat32;
  EXPECT_TRUE(tessera::RunsOnDevice({op}, 0, 2, engine));
  Operation on_host = op;
  on_host.recv = host.data();
  EXPECT_FALSE(tessera::RunsOnDevice({op, on_host}, 0, 2, engine));
  Operation too_long = op;
  too_long.count = 1025;  // past the end of the allocation
  EXPECT_FALSE(tessera::RunsOnDevice({too_long}, 0, 2, engine));
  Operation bcast = op;
  bcast.kind = OpKind::kBroadcast;
  bcast.send = host.data();  // not read off the root
  bcast.root = 1;
  EXPECT_TRUE(tessera::RunsOnDevice({bcast}, 0, 2, engine));
  Operation alltoall = op;
  alltoall.kind = OpKind::kAlltoAll;
  alltoall.count = 512;  // 2 blocks of 512 floats: the whole allocation
  EXPECT_TRUE(tessera::RunsOnDevice({alltoall}, 0, 2, engine));
  alltoall.count = 513;
  EXPECT_FALSE(tessera::RunsOnDevice({alltoall}, 0, 2, engine));
}

// Across hosts, device-resident calls need GPUDirect RDMA on every rank. This machine
// has no RDMA device (so no rank publishes the GPUDirect bit): on 2 emulated hosts x 2
// ranks every rank must say "not possible", refuse device links cleanly, and keep a
// healthy communicator for the host path, which is where such calls are staged.
TEST(DevicePathRule, SeveralHostsWithoutGpuDirectStayOnTheHostPath) {
  RankOptions options = Options();
  options.ranks_per_host = 2;
  auto results = RunRanksRaw(4, [](const RankContext& ctx) -> std::string {
    tessera::Settings settings;
    tessera::Status s = tessera::Settings::FromEnvironment(&settings);
    tessera::UniqueIdData id;
    if (s.ok()) s = tessera::DecodeUniqueId(ctx.ids[0].internal, &id);
    std::unique_ptr<Communicator> comm;
    if (s.ok()) s = Communicator::Create(settings, id, ctx.nranks, ctx.rank, &comm);
    if (!s.ok()) return "creating the communicator: " + s.ToString();
    RankChecks checks;
    checks.Expect(!comm->device_resident_possible(), "device_resident_possible() on 2 hosts without GPUDirect");
    s = comm->EnableDeviceLinks(std::make_unique<HostDeviceEngine>(HostDeviceEngine::Options{}));
    checks.Expect(s.code() == tessera::Code::kInvalidUsage, "EnableDeviceLinks answered " + s.ToString());
    checks.ExpectContains(s.message(), "GPUDirect RDMA", "the refusal names what is missing");
    checks.Expect(comm->device_engine() == nullptr, "an engine was kept after the refusal");
    std::vector<float> data(1031, static_cast<float>(ctx.rank + 1));
    Operation op;
    op.kind = OpKind::kAllReduce;
    op.send = data.data();
    op.recv = data.data();
    op.count = data.size();
    op.type = DataType::kFloat32;
    op.op = 0;
    s = comm->Run(op);
    checks.Expect(s.ok(), "host allreduce after the refusal: " + s.ToString());
    checks.Expect(data[0] == 10.0f && data.back() == 10.0f, "host allreduce sum " + std::to_string(data[0]));
    return checks.str();
  }, options);
  ASSERT_EQ(results.size(), 4u);
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

// --- The link protocol alone -------------------------------------------------------------

struct Pids {
  std::atomic<int> pid[2];
};

TEST(CudaIpcLink, SlotAccountingMismatchAndHostBuffers) {
  Pids* pids = static_cast<Pids*>(mmap(nullptr, sizeof(Pids), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(pids, MAP_FAILED);
  pids->pid[0] = pids->pid[1] = 0;
  const std::string prefix = "/tessera-" + std::to_string(getpid()) + "-linktest-";
  auto results = RunRanksRaw(2, [pids, prefix](const RankContext& ctx) -> std::string {
    using namespace tessera;
    const int me = ctx.rank, peer = 1 - ctx.rank;
    pids->pid[me] = getpid();
    const Deadline deadline = Deadline::AfterMs(20000);
    while (pids->pid[peer].load() == 0) {
      if (deadline.Expired()) return "the peer's pid never came";
      usleep(1000);
    }
    std::vector<ShmTransport::Member> local;
    for (int r = 0; r < 2; ++r) local.push_back({r, pids->pid[r].load(), prefix + std::to_string(r)});
    HostDeviceEngine engine(HostDeviceEngine::Options{3});
    CudaIpcTransport::Options options;
    options.slot_bytes = 4096;
    options.slots = 4;
    std::unique_ptr<CudaIpcTransport> transport;
    Status s = CudaIpcTransport::Create(options, &engine, me, local, deadline, &transport);
    if (!s.ok()) return "Create: " + s.ToString();
    std::unique_ptr<Link> base;
    s = transport->Connect(peer, deadline, &base);
    if (!s.ok()) return "Connect: " + s.ToString();
    auto* link = dynamic_cast<CudaIpcLink*>(base.get());
    RankChecks checks;
    ExchangeOptions xo;
    xo.deadline = deadline;
    xo.timeout_ms = 20000;
    const size_t len = 10 * 4096 + 100;
    std::shared_ptr<void> buf;
    if (!engine.Allocate(len, &buf).ok()) return "no memory";
    char* data = static_cast<char*>(buf.get());
    if (me == 0) {
      for (size_t i = 0; i < len; ++i) data[i] = static_cast<char>(i * 7);
      // The receiver has posted nothing: the sender fills the 4 slots and stops.
      link->BeginSend(data, len);
      bool progressed = false, done = false;
      for (int i = 0; i < 200 && s.ok(); ++i) s = link->ProgressSend(len, &progressed, &done);
      checks.Expect(s.ok(), "progress: " + s.ToString());
      checks.Expect(!done, "a 10-slot send finished with nobody receiving");
      checks.Expect(link->slots_in_use_by_sends() == 4, "slots in use " + std::to_string(link->slots_in_use_by_sends()));
      checks.Expect(link->sent_bytes() == 4 * 4096, "published " + std::to_string(link->sent_bytes()) + " bytes");
      ArriveAndWait(0, 2, Milliseconds(20000));
      // Finish the same message by hand (an Exchange would begin it again).
      for (int i = 0; !done && s.ok() && !deadline.Expired(); ++i) {
        s = link->ProgressSend(len, &progressed, &done);
        if (!progressed) usleep(100);
      }
      checks.Expect(s.ok() && done, "finishing the send: " + s.ToString());
      // Every slot comes back once the receiver has consumed them.
      for (int i = 0; link->slots_in_use_by_sends() != 0 && s.ok() && !deadline.Expired(); ++i) {
        s = link->ProgressSend(len, &progressed, &done);
        usleep(100);
      }
      checks.Expect(link->slots_in_use_by_sends() == 0, "slots still in use: " + std::to_string(link->slots_in_use_by_sends()));
      // A host buffer is refused before anything moves.
      std::vector<char> host(100);
      link->BeginSend(host.data(), host.size());
      s = link->ProgressSend(host.size(), &progressed, &done);
      checks.ExpectContains(s.ToString(), "is not device memory", "a host buffer refused");
      checks.ExpectContains(s.ToString(), "rank 1", "the refusal names the link's peer");
      // A 100-byte message where the peer expects 200.
      Transfer small = Transfer::Send(link, data, 100);
      s = Exchange(&small, 1, xo);
      checks.Expect(s.ok(), "sending 100 bytes: " + s.ToString());
      ArriveAndWait(1, 2, Milliseconds(20000));
    } else {
      ArriveAndWait(0, 2, Milliseconds(20000));
      Transfer t = Transfer::Recv(link, data, len);
      s = Exchange(&t, 1, xo);
      checks.Expect(s.ok(), "receiving: " + s.ToString());
      for (size_t i = 0; i < len && s.ok(); ++i) {
        if (data[i] != static_cast<char>(i * 7)) {
          checks.Expect(false, "byte " + std::to_string(i) + " differs");
          break;
        }
      }
      Transfer wrong = Transfer::Recv(link, data, 200);
      s = Exchange(&wrong, 1, xo);
      checks.ExpectContains(s.ToString(), "message size mismatch", "a size mismatch reported");
      ArriveAndWait(1, 2, Milliseconds(20000));
    }
    return checks.str();
  }, Options());
  EXPECT_EQ(Failures(results), "");
  munmap(pids, sizeof(Pids));
}

}  // namespace
}  // namespace tessera_test
