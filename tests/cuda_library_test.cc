// libtessera_cuda.so (//:tessera_cuda, the C API with the CUDA paths of docs/cuda.md),
// with each rank a real process (rank_harness built against it):
//  - everywhere: every collective, send/recv, groups and a non-blocking communicator on
//    host buffers give the CPU build's results through the hooks; without usable CUDA a
//    non-NULL stream is refused cleanly (naming why), alone and inside a group, and the
//    communicator stays healthy;
//  - with a GPU (skipped here, "skipped: no GPU"): device buffers on streams, a group of
//    several operations on one stream, a device PreMulSum scalar, a host call after a
//    staged one, and a non-blocking communicator.
// CUDA is never initialised in the test process itself: a forked child asks whether a
// GPU is usable, because ranks forked after CUDA initialisation could not use it.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda/availability.h"
#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/collective_calls.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

constexpr int kLibraryTimeoutMs = 30000;

RankOptions Options() {
  RankOptions opts;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = std::to_string(kLibraryTimeoutMs);
  return opts;
}

std::string Code(tesseraResult_t r) { return CodeName(r) + ": " + LastError(nullptr); }

// "" when a GPU is usable, else why not; asked in a forked child (see the top).
std::string NoGpuReasonFromAChild() {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string why = tessera::cuda::NoGpuReason();
    ssize_t unused = write(fds[1], why.data(), why.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  std::string why;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) > 0) why.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the probing child failed";
  return why;
}

const std::string& NoGpuReason() {
  static const std::string* why = new std::string(NoGpuReasonFromAChild());
  return *why;
}

#define SKIP_WITHOUT_GPU() \
  if (!NoGpuReason().empty()) GTEST_SKIP() << "skipped: no GPU (" << NoGpuReason() << ")"

// Polls tesseraCommGetAsyncError until it stops answering tesseraInProgress.
tesseraResult_t WaitAsync(tesseraComm_t comm) {
  const auto deadline = std::chrono::steady_clock::now() + Milliseconds(kLibraryTimeoutMs + 5000);
  for (;;) {
    tesseraResult_t async = tesseraInternalError;
    tesseraResult_t r = tesseraCommGetAsyncError(comm, &async);
    if (r != tesseraSuccess) return r;
    if (async != tesseraInProgress) return async;
    if (std::chrono::steady_clock::now() > deadline) return tesseraTimeout;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// One call from the collective matrix: create its operator, issue, check.
std::string RunCall(const CallSpec& spec, int rank, int nranks, tesseraComm_t comm) {
  PreparedCall call(spec, rank, nranks);
  tesseraResult_t r = call.CreateOp(comm);
  if (r != tesseraSuccess) return call.what() + ": tesseraRedOpCreatePreMulSum: " + Code(r);
  std::string step;
  r = call.Issue(comm, &step);
  const std::string issued = r == tesseraSuccess ? "" : call.what() + ": " + step + ": " + Code(r);
  const tesseraResult_t d = call.DestroyOp(comm);
  if (!issued.empty()) return issued;
  if (d != tesseraSuccess) return call.what() + ": tesseraRedOpDestroy: " + Code(d);
  return call.Check();
}

// ---- Host buffers: the CPU build's results through the CUDA build's hooks -------------

// Every collective and send/recv, in place and not, every operator (PreMulSum with its
// scalar "on the device" and host-immediate, alternately), four datatypes, 3 ranks.
TEST(CudaLibrary, EveryCollectiveOnHostBuffers) {
  const int nranks = 3;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    int index = 0, calls = 0;
    for (Collective kind : AllCollectives()) {
      for (tesseraDataType_t type : {tesseraFloat32, tesseraBfloat16, tesseraInt64, tesseraUint8}) {
        for (OpKind op : OpsOf(kind)) {
          for (bool in_place : Placements(kind)) {
            const CallSpec spec{kind, type, op, in_place, index % nranks, 1031, index};
            ++index;
            ++calls;
            log.Add(RunCall(spec, rank, nranks, comm));
          }
        }
      }
    }
    if (rank == 0) std::printf("[ info ] %d calls on host buffers through libtessera_cuda.so\n", calls);
    return log.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

// A group of collectives and a send/recv ring stays one group (NULL stream, host).
TEST(CudaLibrary, GroupOfCollectivesAndSendRecv) {
  const int nranks = 4;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    PreparedCall reduce({Collective::kAllReduce, tesseraFloat16, OpKind::kSum, true, 0, 4099, 0}, rank, nranks);
    PreparedCall gather({Collective::kAllGather, tesseraInt32, OpKind::kCopy, false, 0, 77, 1}, rank, nranks);
    PreparedCall scatter({Collective::kReduceScatter, tesseraFloat64, OpKind::kMax, false, 0, 129, 2}, rank, nranks);
    PreparedCall ring({Collective::kSendRecv, tesseraInt8, OpKind::kCopy, false, 0, 1000, 3}, rank, nranks);
    std::string step;
    log.Expect(tesseraGroupStart() == tesseraSuccess, "GroupStart");
    for (PreparedCall* c : {&reduce, &gather, &scatter, &ring}) {
      log.Expect(c->Issue(comm, &step) == tesseraSuccess, "record " + c->what() + ": " + step);
    }
    log.Expect(reduce.Untouched() && gather.Untouched(), "a recorded call ran before GroupEnd");
    const tesseraResult_t r = tesseraGroupEnd();
    log.Expect(r == tesseraSuccess, "GroupEnd: " + Code(r));
    for (PreparedCall* c : {&reduce, &gather, &scatter, &ring}) log.Add(c->Check());
    return log.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

// A non-blocking communicator: calls answer tesseraInProgress and complete in order.
TEST(CudaLibrary, NonBlockingCommunicator) {
  const int nranks = 3;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    FailureLog log;
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 0;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &config);
    if (!log.Expect(r == tesseraInProgress, "InitRankConfig: " + Code(r))) return log.str();
    log.Expect(WaitAsync(comm) == tesseraSuccess, "init did not complete: " + LastError(comm));
    std::vector<double> buf(5000);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<double>(ctx.rank + i % 7);
    r = tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat64, tesseraSum, comm, nullptr);
    log.Expect(r == tesseraInProgress, "allreduce: " + Code(r));
    r = tesseraAllReduce(buf.data(), buf.data(), buf.size(), tesseraFloat64, tesseraMax, comm, nullptr);
    log.Expect(r == tesseraInProgress, "allreduce max: " + Code(r));
    if (log.Expect(WaitAsync(comm) == tesseraSuccess, "queued calls failed: " + LastError(comm))) {
      size_t wrong = 0;
      for (size_t i = 0; i < buf.size(); ++i) wrong += buf[i] != static_cast<double>(3 + 3 * (i % 7));
      log.Expect(wrong == 0, std::to_string(wrong) + " elements wrong after sum then max");
    }
    log.Expect(tesseraCommDestroy(comm) == tesseraSuccess, "destroy: " + LastError(nullptr));
    return log.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

// Without usable CUDA a stream cannot exist: every entry refuses a non-NULL one with
// tesseraInvalidArgument, saying why (the CUDA build's own answer, so this also shows the
// library under test is the CUDA one); inside a group too; the communicator stays usable.
TEST(CudaLibrary, StreamsAreRefusedWithoutUsableCuda) {
  if (NoGpuReason().empty()) GTEST_SKIP() << "skipped: a GPU is present (streams are accepted)";
  const int nranks = 2;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    float s[8] = {1, 2, 3, 4, 5, 6, 7, 8}, r[16] = {0};
    int fake = 0;
    void* stream = &fake;
    const tesseraDataType_t f = tesseraFloat32;
    const int peer = 1 - rank;
    const std::vector<std::pair<std::string, tesseraResult_t>> calls = {
        {"allreduce", tesseraAllReduce(s, r, 4, f, tesseraSum, comm, stream)},
        {"broadcast", tesseraBroadcast(s, r, 4, f, 0, comm, stream)},
        {"bcast", tesseraBcast(r, 4, f, 0, comm, stream)},
        {"reduce", tesseraReduce(s, r, 4, f, tesseraSum, 0, comm, stream)},
        {"allgather", tesseraAllGather(s, r, 4, f, comm, stream)},
        {"reducescatter", tesseraReduceScatter(s, r, 4, f, tesseraSum, comm, stream)},
        {"alltoall", tesseraAlltoAll(s, r, 4, f, comm, stream)},
        {"gather", tesseraGather(s, r, 4, f, 0, comm, stream)},
        {"scatter", tesseraScatter(s, r, 4, f, 0, comm, stream)},
        {"send", tesseraSend(s, 4, f, peer, comm, stream)},
        {"recv", tesseraRecv(r, 4, f, peer, comm, stream)},
    };
    for (const auto& [name, result] : calls) {
      c.ExpectCode(result, tesseraInvalidArgument, name + " with a stream");
    }
    c.ExpectContains(LastError(comm), "stream must be NULL: this process cannot use CUDA (no usable CUDA", "message");
    if (rank == 0) std::printf("[ info ] a stream here: %s\n", LastError(comm).c_str());
    // Inside a group: refused when recorded; the host call beside it still runs.
    std::vector<float> mine(8, static_cast<float>(rank + 1)), sum(8, 0.0f);
    c.ExpectCode(tesseraGroupStart(), tesseraSuccess, "GroupStart");
    c.ExpectCode(tesseraAllReduce(s, r, 4, f, tesseraSum, comm, stream), tesseraInvalidArgument, "grouped, stream");
    c.ExpectCode(tesseraAllReduce(mine.data(), sum.data(), 8, f, tesseraSum, comm, nullptr), tesseraSuccess,
                 "grouped, NULL stream");
    c.ExpectCode(tesseraGroupEnd(), tesseraSuccess, "GroupEnd");
    c.Expect(sum == std::vector<float>(8, 3.0f), "the grouped host allreduce gave wrong sums");
    tesseraResult_t async = tesseraInternalError;
    c.ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "GetAsyncError");
    c.ExpectCode(async, tesseraSuccess, "async error after refused streams");
    sum.assign(8, 0.0f);
    c.ExpectCode(tesseraAllReduce(mine.data(), sum.data(), 8, f, tesseraSum, comm, nullptr), tesseraSuccess,
                 "allreduce after refused streams");
    c.Expect(sum == std::vector<float>(8, 3.0f), "allreduce after refused streams gave wrong sums");
    return c.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

// ---- With a GPU (never run on the build machines) ---------------------------------------

// A device array of floats, freed at scope exit.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) : count(n) { ok = cudaMalloc(&p, n * sizeof(float)) == cudaSuccess; }
  ~DeviceFloats() { cudaFree(p); }
  bool Put(const std::vector<float>& v) { return cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice) == 0; }
  std::vector<float> Get() const {
    std::vector<float> v(count);
    if (cudaMemcpy(v.data(), p, count * 4, cudaMemcpyDeviceToHost) != cudaSuccess) v.clear();
    return v;
  }
  void* p = nullptr;
  size_t count;
  bool ok = false;
};

size_t Mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return want.size() + 1;
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

void ExpectNoAsyncError(RankChecks* c, tesseraComm_t comm, const std::string& what) {
  tesseraResult_t async = tesseraInternalError;
  c->ExpectCode(tesseraCommGetAsyncError(comm, &async), tesseraSuccess, "GetAsyncError");
  c->ExpectCode(async, tesseraSuccess, what);
}

// Device buffers on a stream: an in-place allreduce, then a group of an allreduce and an
// allgather on the same stream (they must not wait for each other), a synchronous copy on
// the legacy stream while the stream may still wait for the calls (a proxy that makes CUDA
// calls then hangs in the driver: seen on an H100), a PreMulSum with its scalar in device
// memory, and a host call after the device ones (issue order kept). `env`: the ranks'
// settings, which decide between device-resident and staged calls.
void DeviceBuffersOnAStream(const EnvVars& env) {
  const int nranks = 2;
  RankOptions options = Options();
  for (const auto& [name, value] : env) options.env[name] = value;
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    RankChecks c;
    int devices = 0;
    if (!c.Expect(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0, "cudaGetDeviceCount")) return c.str();
    cudaSetDevice(rank % devices);
    cudaStream_t stream;
    if (!c.Expect(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate")) return c.str();
    const size_t n = (1 << 20) + 3;
    std::vector<float> mine(n), sums(n);
    for (size_t i = 0; i < n; ++i) {
      mine[i] = static_cast<float>(rank + i % 5);
      sums[i] = static_cast<float>(1 + 2 * (i % 5));
    }
    std::vector<float> piece(1000);
    for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<float>(rank * 1000 + i);
    DeviceFloats a(n), b(n), src(1000), gathered(2 * 1000), scalar(1);
    c.Expect(a.ok && b.ok && src.ok && gathered.ok && scalar.ok && a.Put(mine) && b.Put(mine) && src.Put(piece),
             "device buffers");

    auto start = std::chrono::steady_clock::now();
    c.ExpectCode(tesseraAllReduce(a.p, a.p, n, tesseraFloat32, tesseraSum, comm, stream), tesseraSuccess,
                 "in-place allreduce on a stream");
    c.ExpectCode(tesseraGroupStart(), tesseraSuccess, "GroupStart");
    c.ExpectCode(tesseraAllReduce(b.p, b.p, n, tesseraFloat32, tesseraSum, comm, stream), tesseraSuccess, "grouped");
    c.ExpectCode(tesseraAllGather(src.p, gathered.p, 1000, tesseraFloat32, comm, stream), tesseraSuccess,
                 "grouped allgather");
    c.ExpectCode(tesseraGroupEnd(), tesseraSuccess, "GroupEnd of a staged group");
    std::printf("[ info ] rank %d: three staged calls returned after %.1f ms\n", rank, SecondsSince(start) * 1e3);

    const float half = 0.5f;
    c.Expect(cudaMemcpy(scalar.p, &half, 4, cudaMemcpyHostToDevice) == cudaSuccess, "scalar");
    tesseraRedOp_t premul;
    c.ExpectCode(tesseraRedOpCreatePreMulSum(&premul, scalar.p, tesseraFloat32, tesseraScalarDevice, comm),
                 tesseraSuccess, "PreMulSum with a device scalar");
    tesseraRedOp_t refused;
    c.ExpectCode(tesseraRedOpCreatePreMulSum(&refused, scalar.p, tesseraFloat32, tesseraScalarHostImmediate, comm),
                 tesseraInvalidArgument, "a device scalar said to be host-immediate");
    DeviceFloats scaled(n);
    c.Expect(scaled.ok && scaled.Put(mine), "scaled buffer");
    c.ExpectCode(tesseraAllReduce(scaled.p, scaled.p, n, tesseraFloat32, premul, comm, stream), tesseraSuccess,
                 "PreMulSum allreduce");
    c.ExpectCode(tesseraRedOpDestroy(premul, comm), tesseraSuccess, "destroy while still queued");

    // A host call on the NULL stream runs after the staged ones, and completes on return.
    std::vector<float> host(64, static_cast<float>(rank + 1)), host_sum(64, 0.0f);
    c.ExpectCode(tesseraAllReduce(host.data(), host_sum.data(), 64, tesseraFloat32, tesseraSum, comm, nullptr),
                 tesseraSuccess, "host allreduce after staged ones");
    c.Expect(host_sum == std::vector<float>(64, 3.0f), "host allreduce after staged ones gave wrong sums");

    c.Expect(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
    c.Expect(Mismatches(a.Get(), sums) == 0, "in-place allreduce on a stream: wrong sums");
    c.Expect(Mismatches(b.Get(), sums) == 0, "grouped allreduce: wrong sums");
    std::vector<float> want_gathered;
    for (int r = 0; r < nranks * 1000; ++r) want_gathered.push_back(static_cast<float>(r));
    c.Expect(Mismatches(gathered.Get(), want_gathered) == 0, "grouped allgather: wrong values");
    std::vector<float> want_scaled(n);
    for (size_t i = 0; i < n; ++i) want_scaled[i] = 0.5f * sums[i];
    c.Expect(Mismatches(scaled.Get(), want_scaled) == 0, "PreMulSum with a device scalar: wrong values");
    ExpectNoAsyncError(&c, comm, "async error after staged calls");
    cudaStreamDestroy(stream);
    return c.str();
  }, options);
  EXPECT_EQ("", Failures(results));
}

// Both ranks on one host with cuda_ipc allowed (the default): device-resident calls.
TEST(Gpu, DeviceBuffersOnAStream) {
  SKIP_WITHOUT_GPU();
  DeviceBuffersOnAStream({});
}

// Without cuda_ipc: every call staged through pinned memory and the proxy.
TEST(Gpu, StagedDeviceBuffersOnAStream) {
  SKIP_WITHOUT_GPU();
  DeviceBuffersOnAStream({{"TESSERA_TRANSPORT", "shm"}});
}

// One rank: every collective is a copy on the stream (device_path.cc, RunsAlone), in and
// out of place and in a group, and so is a send to itself paired with a receive; a
// PreMulSum still runs (through the proxy).
TEST(Gpu, OneRankCopiesOnTheStream) {
  SKIP_WITHOUT_GPU();
  auto results = RunRanks(1, [](int, tesseraComm_t comm) {
    RankChecks c;
    cudaSetDevice(0);
    cudaStream_t stream;
    if (!c.Expect(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate")) return c.str();
    const size_t n = (1 << 20) + 3;
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000);
    DeviceFloats in(n), out(n), again(n), scaled(n), scalar(1), received(n);
    c.Expect(in.ok && out.ok && again.ok && scaled.ok && scalar.ok && received.ok && in.Put(values) &&
                 scaled.Put(values),
             "device buffers");
    c.ExpectCode(tesseraAllReduce(in.p, out.p, n, tesseraFloat32, tesseraSum, comm, stream), tesseraSuccess,
                 "allreduce out of place");
    c.ExpectCode(tesseraAllReduce(in.p, in.p, n, tesseraFloat32, tesseraMax, comm, stream), tesseraSuccess,
                 "allreduce in place");
    c.ExpectCode(tesseraGroupStart(), tesseraSuccess, "GroupStart");
    c.ExpectCode(tesseraAllGather(in.p, again.p, n, tesseraFloat32, comm, stream), tesseraSuccess, "allgather");
    c.ExpectCode(tesseraAlltoAll(again.p, again.p, n, tesseraFloat32, comm, stream), tesseraSuccess,
                 "alltoall in place");
    c.ExpectCode(tesseraGroupEnd(), tesseraSuccess, "GroupEnd");
    c.ExpectCode(tesseraGroupStart(), tesseraSuccess, "GroupStart (send/recv)");
    c.ExpectCode(tesseraSend(in.p, n, tesseraFloat32, 0, comm, stream), tesseraSuccess, "send to itself");
    c.ExpectCode(tesseraRecv(received.p, n, tesseraFloat32, 0, comm, stream), tesseraSuccess, "recv from itself");
    c.ExpectCode(tesseraGroupEnd(), tesseraSuccess, "GroupEnd (send/recv)");
    const float half = 0.5f;
    c.Expect(cudaMemcpy(scalar.p, &half, 4, cudaMemcpyHostToDevice) == cudaSuccess, "scalar");
    tesseraRedOp_t premul;
    c.ExpectCode(tesseraRedOpCreatePreMulSum(&premul, scalar.p, tesseraFloat32, tesseraScalarDevice, comm),
                 tesseraSuccess, "PreMulSum");
    c.ExpectCode(tesseraAllReduce(scaled.p, scaled.p, n, tesseraFloat32, premul, comm, stream), tesseraSuccess,
                 "PreMulSum allreduce");
    c.ExpectCode(tesseraRedOpDestroy(premul, comm), tesseraSuccess, "destroy PreMulSum");
    c.Expect(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
    c.Expect(Mismatches(out.Get(), values) == 0, "allreduce out of place: wrong values");
    c.Expect(Mismatches(in.Get(), values) == 0, "allreduce in place: changed");
    c.Expect(Mismatches(again.Get(), values) == 0, "allgather then alltoall: wrong values");
    c.Expect(Mismatches(received.Get(), values) == 0, "send/recv to itself: wrong values");
    std::vector<float> halves(n);
    for (size_t i = 0; i < n; ++i) halves[i] = 0.5f * values[i];
    c.Expect(Mismatches(scaled.Get(), halves) == 0, "PreMulSum: wrong values");
    ExpectNoAsyncError(&c, comm, "async error");
    cudaStreamDestroy(stream);
    return c.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

// A non-blocking communicator stages on its worker: calls answer tesseraInProgress, and
// the stream carries the results.
TEST(Gpu, NonBlockingCommunicatorStagesOnItsWorker) {
  SKIP_WITHOUT_GPU();
  const int nranks = 2;
  auto results = RunRanksRaw(nranks, [](const RankContext& ctx) {
    RankChecks c;
    int devices = 0;
    if (!c.Expect(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0, "cudaGetDeviceCount")) return c.str();
    cudaSetDevice(ctx.rank % devices);
    tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
    config.blocking = 0;
    tesseraComm_t comm = nullptr;
    tesseraResult_t r = tesseraCommInitRankConfig(&comm, nranks, ctx.ids[0], ctx.rank, &config);
    if (!c.Expect(r == tesseraInProgress || r == tesseraSuccess, "InitRankConfig: " + Code(r))) return c.str();
    c.ExpectCode(WaitAsync(comm), tesseraSuccess, "init");
    cudaStream_t stream;
    c.Expect(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate");
    std::vector<float> mine(4099, static_cast<float>(ctx.rank + 1));
    DeviceFloats a(mine.size());
    c.Expect(a.ok && a.Put(mine), "device buffer");
    r = tesseraAllReduce(a.p, a.p, mine.size(), tesseraFloat32, tesseraSum, comm, stream);
    c.Expect(r == tesseraInProgress || r == tesseraSuccess, "staged allreduce: " + Code(r));
    c.ExpectCode(WaitAsync(comm), tesseraSuccess, "staged allreduce on the worker");
    c.Expect(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
    c.Expect(Mismatches(a.Get(), std::vector<float>(mine.size(), 3.0f)) == 0, "wrong sums");
    cudaStreamDestroy(stream);
    c.ExpectCode(tesseraCommDestroy(comm), tesseraSuccess, "destroy");
    return c.str();
  }, Options());
  EXPECT_EQ("", Failures(results));
}

}  // namespace
}  // namespace tessera_test
