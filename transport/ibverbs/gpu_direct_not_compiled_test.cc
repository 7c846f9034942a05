// gpu_direct.cc built without TESSERA_GPUDIRECT (as with --define=tessera_gpudirect=off):
// the driver is never looked for, and the answer is the same quiet "no CUDA driver".
#include "gtest/gtest.h"
#include "transport/ibverbs/gpu_direct.h"

namespace tessera {
namespace ibverbs {
namespace {

TEST(GpuDirectNotCompiledTest, AnswersNoCudaDriver) {
  EXPECT_FALSE(GpuDirectCompiled());
  std::unique_ptr<CudaDriver> cuda;
  Status s = CudaDriver::Load("libcuda.so.1", &cuda);
  EXPECT_TRUE(IsNoCudaDriver(s)) << s.ToString();
  EXPECT_NE(s.message().find("not compiled in"), std::string::npos) << s.message();
  EXPECT_EQ(cuda, nullptr);
}

}  // namespace
}  // namespace ibverbs
}  // namespace tessera
