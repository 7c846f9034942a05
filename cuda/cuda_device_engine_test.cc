// The CUDA DeviceEngine of the cuda_ipc links: its no-driver answer (run here) and, on a
// GPU (skipped here with "skipped: no GPU"), its streams: a copy, a reduction of every
// operator on float32 and bfloat16, PreMulSum scaling, avg's division, tickets that
// complete in order, and the refusals (a reducer without its type, a record of another
// process's pid, host memory not counted as device memory). The cuda_ipc protocol
// itself runs with the host engine in //tests:cuda_ipc_test.
#include "cuda/cuda_device_engine.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "elementwise/elementwise.h"
#include "elementwise/reduce_kernels.h"
#include "cuda/gpu_test.h"
#include "gtest/gtest.h"

namespace tessera {
namespace cuda {
namespace {

TEST(CudaDeviceEngine, WithoutADriverCreateSaysWhy) {
  TESSERA_SKIP_WITH_GPU();
  std::unique_ptr<CudaDeviceEngine> engine;
  const Status s = CudaDeviceEngine::Create(0, &engine);
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_NE(s.message().find("no usable CUDA"), std::string::npos) << s.ToString();
  EXPECT_EQ(engine, nullptr);
}

// Waits (bounded) for everything on the stream.
void Finish(DeviceStream* stream) {
  const Status s = stream->Drain(Deadline::AfterMs(10000), nullptr, "test");
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TEST(CudaDeviceEngine, StreamsCopyReduceScaleAndDivide) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::unique_ptr<CudaDeviceEngine> engine;
  ASSERT_TRUE(CudaDeviceEngine::Create(0, &engine).ok());
  std::unique_ptr<DeviceStream> stream;
  ASSERT_TRUE(engine->CreateStream(&stream).ok());
  const size_t n = 1031;
  std::shared_ptr<void> a, b, dst;
  ASSERT_TRUE(engine->Allocate(n * 4, &a).ok());
  ASSERT_TRUE(engine->Allocate(n * 4, &b).ok());
  ASSERT_TRUE(engine->Allocate(n * 4, &dst).ok());
  EXPECT_TRUE(engine->IsDeviceMemory(a.get(), n * 4));
  std::vector<float> ha(n), hb(n), got(n), want(n);
  EXPECT_FALSE(engine->IsDeviceMemory(ha.data(), n * 4));
  for (size_t i = 0; i < n; ++i) {
    ha[i] = static_cast<float>(i % 13);
    hb[i] = static_cast<float>(i % 7) - 3;
  }
  ASSERT_EQ(cudaMemcpy(a.get(), ha.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.get(), hb.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
    Reducer r;
    ASSERT_TRUE(GetReducer(DataType::kFloat32, op, &r).ok());
    r.typed = true;
    r.type = DataType::kFloat32;
    r.op = op;
    ASSERT_TRUE(stream->Reduce(r, dst.get(), a.get(), b.get(), n).ok());
    Finish(stream.get());
    r.fn(want.data(), ha.data(), hb.data(), n);
    ASSERT_EQ(cudaMemcpy(got.data(), dst.get(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, want) << RedOpName(op);
  }
  Reducer untyped;
  ASSERT_TRUE(GetReducer(DataType::kFloat32, RedOp::kSum, &untyped).ok());
  EXPECT_EQ(stream->Reduce(untyped, dst.get(), a.get(), b.get(), n).code(), Code::kInvalidArgument);
  // Copy, then scale by 2 and divide by 2 in place: back to a.
  const float two = 2;
  ASSERT_TRUE(stream->Copy(dst.get(), a.get(), n * 4).ok());
  ASSERT_TRUE(stream->Scale(DataType::kFloat32, &two, dst.get(), dst.get(), n).ok());
  ASSERT_TRUE(stream->Divide(DataType::kFloat32, dst.get(), n, 2).ok());
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(stream->Record(&first).ok());
  ASSERT_TRUE(stream->Record(&second).ok());
  EXPECT_EQ(second, first + 1);
  Finish(stream.get());
  bool done = false;
  ASSERT_TRUE(stream->Done(first, &done).ok());
  EXPECT_TRUE(done);
  ASSERT_EQ(cudaMemcpy(got.data(), dst.get(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, ha);
  // A record exported by this process is refused as a peer's: the pid says so.
  std::unique_ptr<ExportedMemory> slots;
  ASSERT_TRUE(engine->Export(4 * 4096, &slots).ok());
  std::unique_ptr<MappedMemory> mapped;
  EXPECT_EQ(engine->Map(slots->record(), getpid() + 1, &mapped).code(), Code::kInvalidArgument);
  EXPECT_EQ(engine->Map(slots->record(), getpid(), &mapped).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace cuda
}  // namespace tessera
