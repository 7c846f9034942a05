// DevicePath (comm/device_path.h) on its own, in the build it was compiled for: the
// bytes staged per operation (comm/operation.h), and the answers for streams and host
// buffers. Two targets run it: device_path_test (the CPU build) and
// device_path_cuda_test (the CUDA build, where //comm:device_path_cuda defines
// TESSERA_WITH_CUDA). The staged path itself needs a GPU and is tested through the
// library by cuda_library_test.
#include "comm/device_path.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "gtest/gtest.h"

#ifdef TESSERA_WITH_CUDA
#include "cuda/availability.h"
#endif

namespace tessera {
namespace {

Operation Op(OpKind kind, size_t count, DataType type, int root = 0) {
  Operation op;
  op.kind = kind;
  op.count = count;
  op.type = type;
  op.root = root;
  return op;
}

// Every kind, on the root and off it: what the operation reads and writes on this rank
// (4 ranks, 10 float64 = 80 bytes per block).
TEST(BytesOf, EveryKindOnAndOffTheRoot) {
  struct Case {
    OpKind kind;
    int rank;
    size_t send, recv;
  };
  const Case cases[] = {
      {OpKind::kAllReduce, 0, 80, 80},      {OpKind::kAllReduce, 3, 80, 80},
      {OpKind::kBroadcast, 1, 80, 80},      {OpKind::kBroadcast, 2, 0, 80},
      {OpKind::kReduce, 1, 80, 80},         {OpKind::kReduce, 0, 80, 0},
      {OpKind::kAllGather, 2, 80, 320},     {OpKind::kReduceScatter, 2, 320, 80},
      {OpKind::kAlltoAll, 0, 320, 320},     {OpKind::kGather, 1, 80, 320},
      {OpKind::kGather, 3, 80, 0},          {OpKind::kScatter, 1, 320, 80},
      {OpKind::kScatter, 0, 0, 80},         {OpKind::kSend, 2, 80, 0},
      {OpKind::kRecv, 2, 0, 80},
  };
  for (const Case& c : cases) {
    const OperationBytes b = BytesOf(Op(c.kind, 10, DataType::kFloat64, 1), c.rank, 4);
    EXPECT_EQ(b.send, c.send) << OpName(c.kind) << " on rank " << c.rank;
    EXPECT_EQ(b.recv, c.recv) << OpName(c.kind) << " on rank " << c.rank;
  }
  const OperationBytes zero = BytesOf(Op(OpKind::kAllGather, 0, DataType::kFloat32), 0, 4);
  EXPECT_EQ(zero.send, 0u);
  EXPECT_EQ(zero.recv, 0u);
  const OperationBytes half = BytesOf(Op(OpKind::kAllReduce, 3, DataType::kBfloat16), 0, 2);
  EXPECT_EQ(half.send, 6u) << "half types are staged as they are, 2 bytes each";
}

TEST(CheckStream, NullIsAlwaysFine) { EXPECT_TRUE(DevicePath::CheckStream(nullptr).ok()); }

TEST(CheckStream, ANonNullStreamWithoutUsableCuda) {
  int fake = 0;
  const Status s = DevicePath::CheckStream(&fake);
#ifdef TESSERA_WITH_CUDA
  if (cuda::CudaUsable().ok()) {
    EXPECT_TRUE(s.ok()) << s.ToString();
    GTEST_SKIP() << "skipped: a GPU is present (streams are accepted)";
  }
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("stream must be NULL: this process cannot use CUDA (no usable CUDA"), std::string::npos)
      << s.message();
#else
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "stream must be NULL on this CPU build");
#endif
  std::printf("a non-NULL stream here: %s\n", s.ToString().c_str());
}

// Without usable CUDA there is no device path: every call runs on the host. With it,
// host buffers on the NULL stream are not handled: they run as on the CPU build, and
// nothing is created for them (no proxy thread, nothing to wait for).
TEST(Submit, HostBuffersOnTheNullStreamRunAsOnTheCpuBuild) {
  const std::atomic<Communicator*> no_communicator{nullptr};
  const std::unique_ptr<DevicePath> path = DevicePath::Create(&no_communicator, Settings());
#ifdef TESSERA_WITH_CUDA
  if (!cuda::CudaUsable().ok()) {
    EXPECT_EQ(path, nullptr);
    GTEST_SKIP() << "skipped: no usable CUDA (no device path)";
  }
  ASSERT_NE(path, nullptr);
#else
  ASSERT_EQ(path, nullptr) << "the CPU build has no device path";
  return;
#endif
  std::vector<float> a(64, 1.0f), b(64, 0.0f);
  DeviceBatch batch;
  Operation op = Op(OpKind::kAllReduce, 64, DataType::kFloat32);
  op.send = a.data();
  op.recv = b.data();
  batch.ops = {op, op};
  batch.streams = {nullptr, nullptr};
  batch.rank = 0;
  batch.nranks = 2;
  int reports = 0;
  batch.report = [&reports](const Status&) { ++reports; };
  bool handled = true;
  const Status s = path->Submit(batch, &handled);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(handled);
  EXPECT_TRUE(path->WaitForHostBuffers().ok());
  path->WaitIdle();
  EXPECT_TRUE(path->async_error().ok());
  EXPECT_EQ(reports, 0) << "the C API runs it, not the device path";
  path->Abort();  // nothing queued: a no-op
  EXPECT_TRUE(path->async_error().ok());
}

}  // namespace
}  // namespace tessera
