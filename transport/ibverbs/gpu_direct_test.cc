// GPUDirect RDMA without a GPU: the CUDA driver is opened at run time, and every way of
// not having one (no libcuda.so.1, the toolkit's stub library, a library that is not a
// driver) is the clean "no CUDA driver" answer, never a crash.
#include "transport/ibverbs/gpu_direct.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace ibverbs {
namespace {

// Built with --define=tessera_gpudirect=off, this file has nothing to test
// (gpu_direct_not_compiled_test covers that build).
class GpuDirectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GpuDirectCompiled()) GTEST_SKIP() << "GPUDirect not compiled in (--define=tessera_gpudirect=off)";
  }
};

TEST_F(GpuDirectTest, NoDriverOnThisHostIsNoCudaDriver) {
  std::unique_ptr<CudaDriver> cuda;
  Status s = CudaDriver::Load("libcuda.so.1", &cuda);
  if (s.ok()) GTEST_SKIP() << "this host has a CUDA driver";
  EXPECT_EQ(s.code(), Code::kSystemError) << s.ToString();
  EXPECT_TRUE(IsNoCudaDriver(s)) << s.ToString();
  EXPECT_NE(s.message().find("libcuda.so.1"), std::string::npos) << s.message();
  EXPECT_EQ(cuda, nullptr);
  std::printf("dma-buf path here: %s\n", s.ToString().c_str());
}

// The toolkit ships a stub libcuda.so for linking; it has every symbol, and cuInit
// answers CUDA_ERROR_STUB_LIBRARY. Loading it exercises the real dlsym path.
TEST_F(GpuDirectTest, ToolkitStubIsNoCudaDriver) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  struct stat st;
  if (stat(stub, &st) != 0) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  std::unique_ptr<CudaDriver> cuda;
  Status s = CudaDriver::Load(stub, &cuda);
  EXPECT_TRUE(IsNoCudaDriver(s)) << s.ToString();
  EXPECT_NE(s.message().find("stub"), std::string::npos) << s.message();
  EXPECT_EQ(cuda, nullptr);
}

TEST_F(GpuDirectTest, ALibraryThatIsNotADriverIsNoCudaDriver) {
  std::unique_ptr<CudaDriver> cuda;
  Status s = CudaDriver::Load("libibverbs.so.1", &cuda);  // loads, but has no cuInit
  EXPECT_TRUE(IsNoCudaDriver(s)) << s.ToString();
  EXPECT_NE(s.message().find("has no cu"), std::string::npos) << s.message();
  s = CudaDriver::Load("/nonexistent/libcuda.so.1", &cuda);
  EXPECT_TRUE(IsNoCudaDriver(s)) << s.ToString();
}

TEST_F(GpuDirectTest, NamesRegistrationPaths) {
  EXPECT_STREQ(DeviceRegistrationPathName(DeviceRegistrationPath::kDmaBuf), "dma-buf");
  EXPECT_STREQ(DeviceRegistrationPathName(DeviceRegistrationPath::kPeerMemory), "peer memory");
  EXPECT_FALSE(IsNoCudaDriver(Status::Ok()));
  EXPECT_FALSE(IsNoCudaDriver(Status(Code::kCudaError, "no CUDA driver")));
}

// The peer-memory module is found by its /sys entries, under any of its names.
TEST(PeerMemoryModuleTest, FoundByItsSysEntries) {
  char root_template[] = "/tmp/tessera_sys_XXXXXX";
  ASSERT_NE(mkdtemp(root_template), nullptr);
  const std::string root = root_template;
  EXPECT_FALSE(PeerMemoryModuleLoaded(root));
  ASSERT_EQ(mkdir((root + "/module").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((root + "/module/nvidia").c_str(), 0700), 0);  // the GPU driver alone is not enough
  EXPECT_FALSE(PeerMemoryModuleLoaded(root));
  ASSERT_EQ(mkdir((root + "/module/nvidia_peermem").c_str(), 0700), 0);
  EXPECT_TRUE(PeerMemoryModuleLoaded(root));
  rmdir((root + "/module/nvidia_peermem").c_str());
  ASSERT_EQ(mkdir((root + "/module/nv_peer_mem").c_str(), 0700), 0);
  EXPECT_TRUE(PeerMemoryModuleLoaded(root));
  rmdir((root + "/module/nv_peer_mem").c_str());
  rmdir((root + "/module/nvidia").c_str());
  rmdir((root + "/module").c_str());
  rmdir(root.c_str());
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
