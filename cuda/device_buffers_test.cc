// Device buffers: the no-driver answers (run here, where libcuda.so.1 is absent), and the
// staging path on a real GPU (skipped here with "skipped: no GPU").
#include "cuda/device_buffers.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "cuda/availability.h"
#include "cuda/gpu_test.h"
#include "gtest/gtest.h"

namespace tessera {
namespace cuda {
namespace {

// ---- Without a driver ----------------------------------------------------------------

TEST(NoDriver, CudaUsableAnswersCleanlyAndTheSameEveryTime) {
  TESSERA_SKIP_WITH_GPU();
  const Status s = CudaUsable();
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_EQ(s.message().rfind("no usable CUDA", 0), 0u) << s.message();
  EXPECT_EQ(CudaUsable().message(), s.message());
  EXPECT_EQ(NoGpuReason(), s.message());
  std::printf("this machine: %s\n", s.message().c_str());
}

TEST(NoDriver, EveryEntryPointAnswersWithoutCrashing) {
  TESSERA_SKIP_WITH_GPU();
  int device = 7;
  EXPECT_EQ(CurrentDevice(&device).code(), Code::kCudaError);
  std::unique_ptr<DeviceStager> stager;
  const Status s = DeviceStager::Create(0, 1000, &stager);
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_NE(s.message().find("staging device buffers"), std::string::npos) << s.message();
  EXPECT_EQ(stager, nullptr);
  std::string why;
  EXPECT_EQ(DriverFunction("cuStreamWaitValue32", 12000, &why), nullptr);
  EXPECT_EQ(why, CudaUsable().message());
}

// Host memory is host memory with or without a GPU; without usable CUDA no CUDA call is
// made at all to say so.
TEST(ClassifyPointer, HostMemoryIsHostAndNeedsNoStaging) {
  std::vector<float> heap(16);
  int stack = 0;
  for (const void* p : {static_cast<const void*>(heap.data()), static_cast<const void*>(&stack),
                        static_cast<const void*>(nullptr)}) {
    MemoryKind kind = MemoryKind::kDevice;
    int device = 5;
    ASSERT_TRUE(ClassifyPointer(p, &kind, &device).ok());
    EXPECT_EQ(kind, MemoryKind::kHost);
    EXPECT_EQ(device, -1);
  }
  StagingRequest req;
  req.send = heap.data();
  req.send_bytes = 64;
  req.recv = heap.data();
  req.recv_bytes = 64;
  bool staged = true;
  ASSERT_TRUE(NeedsStaging(req, &staged).ok());
  EXPECT_FALSE(staged);
  EXPECT_FALSE(IsStaged(MemoryKind::kHost));
  EXPECT_FALSE(IsStaged(MemoryKind::kPinnedHost));
  EXPECT_TRUE(IsStaged(MemoryKind::kDevice));
  EXPECT_TRUE(IsStaged(MemoryKind::kManaged));
  EXPECT_STREQ(MemoryKindName(MemoryKind::kManaged), "managed");
}

// ---- With a GPU ------------------------------------------------------------------------

// A device buffer, freed at scope exit.
struct DeviceArray {
  explicit DeviceArray(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DeviceArray() { cudaFree(p); }
  void* p = nullptr;
};

TEST(Gpu, ClassifiesDevicePinnedAndManagedMemory) {
  TESSERA_SKIP_WITHOUT_GPU();
  DeviceArray dev(256);
  void* pinned = nullptr;
  void* managed = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 256, cudaHostAllocDefault), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, 256), cudaSuccess);
  MemoryKind kind;
  int device;
  ASSERT_TRUE(ClassifyPointer(dev.p, &kind, &device).ok());
  EXPECT_EQ(kind, MemoryKind::kDevice);
  EXPECT_GE(device, 0);
  ASSERT_TRUE(ClassifyPointer(static_cast<char*>(dev.p) + 100, &kind, &device).ok());
  EXPECT_EQ(kind, MemoryKind::kDevice);
  ASSERT_TRUE(ClassifyPointer(pinned, &kind, &device).ok());
  EXPECT_EQ(kind, MemoryKind::kPinnedHost);
  ASSERT_TRUE(ClassifyPointer(managed, &kind, &device).ok());
  EXPECT_EQ(kind, MemoryKind::kManaged);
  cudaFreeHost(pinned);
  cudaFree(managed);
}

// The host part of a staged operation, run by a proxy thread: waits for the inputs,
// applies `host_work`, finishes. The caller's thread never blocks.
void RunProxy(DeviceStager* stager, const std::vector<StagedOp>& ops,
              const std::function<void(const StagedOp&)>& host_work, std::vector<Status>* results) {
  for (const StagedOp& op : ops) {
    Status s = stager->WaitInput(op, Deadline::AfterMs(10000), nullptr);
    if (s.ok()) host_work(op);
    const Status f = stager->Finish(op);
    results->push_back(s.ok() ? f : s);
  }
}

TEST(Gpu, StagedOperationsRunInStreamOrder) {
  TESSERA_SKIP_WITHOUT_GPU();
  int device = 0;
  ASSERT_TRUE(CurrentDevice(&device).ok());
  std::unique_ptr<DeviceStager> stager;
  ASSERT_TRUE(DeviceStager::Create(device, 10000, &stager).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const size_t n = 1000;
  DeviceArray buf(n * sizeof(float));
  std::vector<float> host(n, 1.0f);
  ASSERT_EQ(cudaMemcpy(buf.p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

  // Three in-place "collectives" (x = 2x + k on the host), each seeing the previous
  // one's result: the stream order carries the data from one to the next.
  std::vector<StagedOp> ops;
  for (int k = 0; k < 3; ++k) {
    StagingRequest req;
    req.send = buf.p;
    req.send_bytes = n * sizeof(float);
    req.recv = buf.p;
    req.recv_bytes = n * sizeof(float);
    StagedOp op;
    ASSERT_TRUE(stager->Stage(req, stream, &op).ok());
    EXPECT_EQ(op.host_send, op.host_recv) << "in place stays in place";
    ops.push_back(op);
  }
  std::vector<Status> results;
  std::thread proxy(RunProxy, stager.get(), ops,
                    [](const StagedOp& op) {
                      float* x = static_cast<float*>(op.host_recv);
                      for (size_t i = 0; i < 1000; ++i) x[i] = 2 * x[i] + static_cast<float>(op.seq % 100);
                    },
                    &results);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  proxy.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(cudaMemcpy(host.data(), buf.p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  float expect = 1.0f;
  for (const StagedOp& op : ops) expect = 2 * expect + static_cast<float>(op.seq % 100);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(host[i], expect) << i;
  cudaStreamDestroy(stream);
}

TEST(Gpu, InPlaceAllGatherSharesOneStagingRegion) {
  TESSERA_SKIP_WITHOUT_GPU();
  int device = 0;
  ASSERT_TRUE(CurrentDevice(&device).ok());
  std::unique_ptr<DeviceStager> stager;
  ASSERT_TRUE(DeviceStager::Create(device, 10000, &stager).ok());
  DeviceArray buf(4 * 256);
  StagingRequest req;  // rank 2 of 4: send = recv + 2 * 256
  req.recv = buf.p;
  req.recv_bytes = 4 * 256;
  req.send = static_cast<char*>(buf.p) + 2 * 256;
  req.send_bytes = 256;
  StagedOp op;
  ASSERT_TRUE(stager->Stage(req, nullptr, &op).ok());
  EXPECT_EQ(static_cast<const char*>(op.host_send), static_cast<char*>(op.host_recv) + 2 * 256);
  ASSERT_TRUE(stager->WaitInput(op, Deadline::AfterMs(10000), nullptr).ok());
  ASSERT_TRUE(stager->Finish(op).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(Gpu, ReleaseAllLetsAStreamGoWhoseOperationNeverRan) {
  TESSERA_SKIP_WITHOUT_GPU();
  int device = 0;
  ASSERT_TRUE(CurrentDevice(&device).ok());
  std::unique_ptr<DeviceStager> stager;
  ASSERT_TRUE(DeviceStager::Create(device, 10000, &stager).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  DeviceArray buf(64);
  StagingRequest req;
  req.send = buf.p;
  req.send_bytes = 64;
  req.recv = buf.p;
  req.recv_bytes = 64;
  StagedOp op;
  ASSERT_TRUE(stager->Stage(req, stream, &op).ok());
  usleep(20000);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the stream must wait for the host part";
  stager->ReleaseAll();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::atomic<bool> abort{true};
  EXPECT_TRUE(stager->WaitInput(op, Deadline::AfterMs(1000), &abort).ok());  // inputs were copied
  EXPECT_TRUE(stager->Finish(op).ok());  // a late finish is fine
  cudaStreamDestroy(stream);
}

TEST(Gpu, BuffersOfAnotherDeviceAreRefused) {
  TESSERA_SKIP_WITHOUT_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "skipped: needs 2 GPUs";
  std::unique_ptr<DeviceStager> stager;
  ASSERT_TRUE(DeviceStager::Create(1, 10000, &stager).ok());
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceArray buf(64);
  StagingRequest req;
  req.send = buf.p;
  req.send_bytes = 64;
  StagedOp op;
  const Status s = stager->Stage(req, nullptr, &op);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace cuda
}  // namespace tessera
